"""The shape of a decoder-only causal LM, read from GGUF metadata or an HF config.json.

One dataclass covers the Llama family the engine runs (Llama, SmolLM, Qwen2); the fields that
differ between them (qkv bias, tied embeddings, RoPE layout and scaling) are explicit here
rather than branches in the model code.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernels.rope import RopeConfig

SUPPORTED_ARCHS = ("llama", "qwen2")
_HF_ARCHS = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "MistralForCausalLM": "llama"}


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
            rope=RopeConfig(head_dim=head_dim, base=g("rope.freq_base", 10000.0),
                            rotary_dim=g("rope.dimension_count"), layout=layout, scaling=scaling),
            max_position=g("context_length", 4096),
            tie_embeddings="output.weight" not in tensor_names,
            qkv_bias="blk.0.attn_q.bias" in tensor_names,
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
        scaling = None
        if rs and rs.get("rope_type", rs.get("type")) == "linear":
            scaling = ("linear", rs["factor"])
        elif rs and rs.get("rope_type", rs.get("type")) == "llama3":
            scaling = ("llama3", rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"],
                       rs["original_max_position_embeddings"])
        elif rs and rs.get("rope_type", rs.get("type")) not in (None, "default"):
            raise ValueError(f"unsupported rope scaling {rs}")
        base = cfg.get("rope_theta") or (rs or {}).get("rope_theta") or 10000.0
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
        )

    @property
    def kv_bytes_per_token(self) -> int:
        """fp32 K and V for every layer."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * 4
