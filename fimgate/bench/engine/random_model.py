"""A model of a given shape with random weights, for checks that need no trained weights:
CPU vs CUDA equivalence (tests/unit/test_engine_cuda.py) and engine speed where the bundled
GGUF cannot travel (the GPU machine: fimgate/bench/micro/gpu_engine.py). Speed does not depend on the weights'
values; quality does, and is never measured on these."""

from __future__ import annotations

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from fimgate.backend.model.config import ModelConfig
from fimgate.backend.model.tokenizer import HFTokenizer, _bytes_to_unicode
from fimgate.backend.model.weights import LoadedModel
from fimgate.kernels.rope import RopeConfig

EOS = "<|endoftext|>"


def byte_tokenizer() -> HFTokenizer:
    """256 byte tokens and one end-of-text token (id 256): a real byte-level BPE with no merges."""
    vocab = {ch: b for b, ch in _bytes_to_unicode().items()}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(EOS, special=True, normalized=False)])
    return HFTokenizer(tok, bos_id=None, eos_id=256)


def tiny_config(layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2) -> ModelConfig:
    head_dim = hidden // heads
    return ModelConfig(
        arch="llama",
        vocab_size=257,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rms_eps=1e-5,
        rope=RopeConfig(head_dim=head_dim, base=10000.0, layout="neox"),
        max_position=2048,
        tie_embeddings=True,
    )


def random_model(cfg: ModelConfig, tokenizer: HFTokenizer, seed: int = 0, name: str = "random") -> LoadedModel:
    """Weights scaled 1/sqrt(fan_in) so activations keep their size through the layers; embeddings
    large enough that logits are peaked (greedy decoding is then stable across devices)."""
    g = torch.Generator().manual_seed(seed)

    def linear(out_f: int, in_f: int) -> torch.Tensor:
        return torch.randn(out_f, in_f, generator=g) / in_f**0.5

    h, q, kv = cfg.hidden_size, cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    t = {"embed": torch.randn(cfg.vocab_size, h, generator=g) * 0.5, "final_norm": torch.ones(h)}
    if not cfg.tie_embeddings:
        t["lm_head"] = linear(cfg.vocab_size, h) * 4
    for i in range(cfg.num_layers):
        p = f"layers.{i}."
        t.update(
            {
                p + "attn_norm": torch.ones(h),
                p + "mlp_norm": torch.ones(h),
                p + "q": linear(q, h),
                p + "k": linear(kv, h),
                p + "v": linear(kv, h),
                p + "o": linear(h, q),
                p + "gate": linear(cfg.intermediate_size, h),
                p + "up": linear(cfg.intermediate_size, h),
                p + "down": linear(h, cfg.intermediate_size),
            }
        )
        if cfg.qkv_bias:
            t.update({p + "q_bias": torch.zeros(q), p + "k_bias": torch.zeros(kv), p + "v_bias": torch.zeros(kv)})
        if cfg.qk_norm:
            t.update({p + "q_norm": torch.ones(cfg.head_dim), p + "k_norm": torch.ones(cfg.head_dim)})
        if cfg.sandwich_norm:
            t.update({p + "post_attn_norm": torch.ones(h), p + "post_mlp_norm": torch.ones(h)})
    return LoadedModel(name=name, config=cfg, tensors=t, tokenizer=tokenizer)


def quantized(loaded: LoadedModel, formats: dict[str, int]) -> LoadedModel:
    """The same model with some weights stored as a GGUF file would store them: `formats` maps a
    weight's short name ("q", "down", "embed", ...) to a gguf.GGMLQuantizationType (simple block
    formats, quantized by gguf-py). Shapes must be whole blocks of 32."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    from fimgate.backend.model.gguf_blocks import unpack
    from fimgate.kernels.quant_gemv import QuantMatrix

    t = {}
    for name, w in loaded.tensors.items():
        fmt = formats.get(name.rsplit(".", 1)[-1])
        if fmt is None or w.dim() != 2:
            t[name] = w
            continue
        rows, cols = w.shape
        raw = quantize(w.numpy().astype("float32"), GGMLQuantizationType(fmt))
        q, scales = unpack(raw, int(fmt), rows, cols)
        t[name] = QuantMatrix.from_parts(int(fmt), q, **scales)
    return LoadedModel(name=loaded.name, config=loaded.config, tensors=t, tokenizer=loaded.tokenizer)
