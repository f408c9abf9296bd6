"""The shape of a decoder-only causal LM, read from GGUF metadata or an HF config.json.

One dataclass covers the families the engine runs (Llama, SmolLM, Qwen2, Gemma 3); the fields
that differ between them (qkv bias, tied embeddings, RoPE layout and scaling, Gemma's scaled
embeddings, q/k norms, sandwich norms, GELU and sliding-window layers) are explicit here rather
than branches on the family name in the model code.
"""

from __future__ import annotations

from dataclasses import dataclass

from fimgate.kernels.rope import RopeConfig

SUPPORTED_ARCHS = ("llama", "qwen2", "gemma3")
_HF_ARCHS = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "MistralForCausalLM": "llama",
    "Gemma3ForCausalLM": "gemma3",
}
GEMMA3_LOCAL_ROPE_BASE = 10000.0  # llama.cpp and HF hard-code it; GGUF does not carry it
GEMMA3_GLOBAL_EVERY = 6  # every 6th layer attends globally, the rest to a sliding window


@dataclass(frozen=True)
class ModelConfig:
    arch: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_eps: float
    rope: RopeConfig
    max_position: int
    tie_embeddings: bool
    qkv_bias: bool = False
    activation: str = "silu"  # or "gelu_tanh"
    embed_scale: float | None = None  # Gemma multiplies embeddings by sqrt(hidden)
    qk_norm: bool = False
    sandwich_norm: bool = False  # norms after attention and after the MLP too (Gemma 2/3)
    attn_scale: float | None = None  # None: head_dim ** -0.5
    sliding_window: int | None = None
    local_layers: tuple[bool, ...] = ()  # per layer: attends to the sliding window only
    local_rope: RopeConfig | None = None  # RoPE of the local layers, when it differs

    def rope_for(self, layer: int) -> RopeConfig:
        if self.local_rope is not None and self.is_local(layer):
            return self.local_rope
        return self.rope

    def is_local(self, layer: int) -> bool:
        return bool(self.local_layers) and self.local_layers[layer]

    @classmethod
    def from_gguf(cls, fields: dict, tensor_names: set[str]) -> "ModelConfig":
        arch = fields["general.architecture"]
        if arch not in SUPPORTED_ARCHS:
            raise ValueError(f"GGUF architecture {arch!r} is not supported (supported: {', '.join(SUPPORTED_ARCHS)})")
        g = lambda key, default=None: fields.get(f"{arch}.{key}", default)  # noqa: E731
        hidden, heads = g("embedding_length"), g("attention.head_count")
        head_dim = g("attention.key_length") or hidden // heads
        scaling = None
        if g("rope.scaling.type") == "linear":
            scaling = ("linear", g("rope.scaling.factor"))
        # llama.cpp permutes Llama's q/k rows so adjacent dims pair up (GPT-J layout); Qwen2 stays NeoX.
        layout = "gptj" if arch == "llama" else "neox"
        extra = {}
        if arch == "gemma3":
            extra = cls._gemma3(hidden, head_dim, g("block_count"), g("attention.sliding_window"), layout)
        return cls(
            arch=arch,
            vocab_size=g("vocab_size") or len(fields["tokenizer.ggml.tokens"]),
            hidden_size=hidden,
            intermediate_size=g("feed_forward_length"),
            num_layers=g("block_count"),
            num_heads=heads,
            num_kv_heads=g("attention.head_count_kv") or heads,
            head_dim=head_dim,
            rms_eps=g("attention.layer_norm_rms_epsilon"),
            rope=RopeConfig(
                head_dim=head_dim,
                base=g("rope.freq_base", 10000.0),
                rotary_dim=g("rope.dimension_count"),
                layout=layout,
                scaling=scaling,
            ),
            max_position=g("context_length", 4096),
            tie_embeddings="output.weight" not in tensor_names,
            qkv_bias="blk.0.attn_q.bias" in tensor_names,
            **extra,
        )

    @staticmethod
    def _gemma3(
        hidden: int,
        head_dim: int,
        num_layers: int,
        window: int | None,
        layout: str,
        query_pre_attn_scalar: float | None = None,
        layer_types: list | None = None,
    ) -> dict:
        if layer_types:
            local = tuple(t == "sliding_attention" for t in layer_types)
        else:
            local = tuple((i + 1) % GEMMA3_GLOBAL_EVERY != 0 for i in range(num_layers))
        return dict(
            activation="gelu_tanh",
            embed_scale=hidden**0.5,
            qk_norm=True,
            sandwich_norm=True,
            attn_scale=(query_pre_attn_scalar or head_dim) ** -0.5,
            sliding_window=window,
            local_layers=local,
            local_rope=RopeConfig(head_dim=head_dim, base=GEMMA3_LOCAL_ROPE_BASE, layout=layout),
        )

    @classmethod
    def from_hf(cls, cfg: dict) -> "ModelConfig":
        archs = cfg.get("architectures") or []
        arch = next((_HF_ARCHS[a] for a in archs if a in _HF_ARCHS), None)
        if arch is None:
            raise ValueError(f"HF architecture {archs} is not supported (supported: {', '.join(_HF_ARCHS)})")
        heads = cfg["num_attention_heads"]
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
        rs = cfg.get("rope_scaling") or cfg.get("rope_parameters")
        if rs and "full_attention" in rs:  # per-layer-type RoPE (Gemma 3 in transformers 5)
            rs = rs["full_attention"]
        scaling = None
        if rs and rs.get("rope_type", rs.get("type")) == "linear":
            scaling = ("linear", rs["factor"])
        elif rs and rs.get("rope_type", rs.get("type")) == "llama3":
            scaling = (
                "llama3",
                rs["factor"],
                rs["low_freq_factor"],
                rs["high_freq_factor"],
                rs["original_max_position_embeddings"],
            )
        elif rs and rs.get("rope_type", rs.get("type")) not in (None, "default"):
            raise ValueError(f"unsupported rope scaling {rs}")
        base = cfg.get("rope_theta") or (rs or {}).get("rope_theta") or 10000.0
        extra = {}
        if arch == "gemma3":
            extra = cls._gemma3(
                cfg["hidden_size"],
                head_dim,
                cfg["num_hidden_layers"],
                cfg.get("sliding_window"),
                "neox",
                cfg.get("query_pre_attn_scalar"),
                cfg.get("layer_types"),
            )
        return cls(
            arch=arch,
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=head_dim,
            rms_eps=cfg.get("rms_norm_eps", 1e-6),
            rope=RopeConfig(head_dim=head_dim, base=float(base), layout="neox", scaling=scaling),
            max_position=cfg.get("max_position_embeddings", 4096),
            tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=arch == "qwen2" or bool(cfg.get("attention_bias", False)),
            **extra,
        )

    @property
    def kv_bytes_per_token(self) -> int:
        """fp32 K and V for every layer."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * 4
