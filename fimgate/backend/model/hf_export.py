"""Write a model fimgate loads (GGUF or HF folder) as a Hugging Face folder that vLLM serves.

vLLM on CPU does not run GGUF's quantized kernels, so the bundled SmolLM2 GGUF is exported
once: dequantized weights under HF names, config.json, tokenizer.json. Two things differ from
a plain rename:
  - llama.cpp permutes Llama's q/k rows so that RoPE pairs are adjacent (GPT-J layout); HF and
    vLLM expect the NeoX layout, so the rows are permuted back (what transformers does too).
  - tied embeddings: vLLM reads `model.embed_tokens.weight` and ties lm_head to it, so the
    embedding is written once and `tie_word_embeddings` says so.
Llama and Qwen2 only (the families whose HF names are one-to-one with fimgate's).
"""

from __future__ import annotations

import json
import os

import torch

from fimgate.backend.model.weights import ModelLoadError, load_model

_HF_LAYER_NAMES = {
    "attn_norm": "input_layernorm.weight",
    "q": "self_attn.q_proj.weight",
    "k": "self_attn.k_proj.weight",
    "v": "self_attn.v_proj.weight",
    "o": "self_attn.o_proj.weight",
    "q_bias": "self_attn.q_proj.bias",
    "k_bias": "self_attn.k_proj.bias",
    "v_bias": "self_attn.v_proj.bias",
    "mlp_norm": "post_attention_layernorm.weight",
    "gate": "mlp.gate_proj.weight",
    "up": "mlp.up_proj.weight",
    "down": "mlp.down_proj.weight",
}
_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}


def gptj_to_neox(w: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Undo llama.cpp's q/k row permutation (rows of each head: interleaved pairs -> two halves)."""
    half = w.shape[0] // num_heads // 2
    return w.reshape(num_heads, half, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape).contiguous()


def export_hf(model_path: str, out_dir: str, dtype: torch.dtype = torch.bfloat16) -> str:
    """Export `model_path` to `out_dir` (created); returns out_dir."""
    from safetensors.torch import save_file

    loaded = load_model(model_path)
    cfg = loaded.config
    if cfg.arch not in _ARCHITECTURES:
        raise ModelLoadError(f"export to a Hugging Face folder supports {', '.join(_ARCHITECTURES)}, not {cfg.arch}")
    unpermute = cfg.rope.layout == "gptj"
    tensors: dict[str, torch.Tensor] = {}
    for name, t in loaded.tensors.items():
        if name == "embed":
            hf = "model.embed_tokens.weight"
        elif name == "final_norm":
            hf = "model.norm.weight"
        elif name == "lm_head":
            hf = "lm_head.weight"
        else:
            _, i, part = name.split(".", 2)
            if unpermute and part in ("q", "k"):
                t = gptj_to_neox(t, cfg.num_heads if part == "q" else cfg.num_kv_heads)
            hf = f"model.layers.{i}.{_HF_LAYER_NAMES[part]}"
        tensors[hf] = t.to(dtype).contiguous()
    os.makedirs(out_dir, exist_ok=True)
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    tok = loaded.tokenizer
    config = {
        "architectures": [_ARCHITECTURES[cfg.arch]],
        "model_type": cfg.arch,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads,
        "num_key_value_heads": cfg.num_kv_heads,
        "head_dim": cfg.head_dim,
        "rms_norm_eps": cfg.rms_eps,
        "rope_theta": cfg.rope.base,
        "max_position_embeddings": cfg.max_position,
        "tie_word_embeddings": cfg.tie_embeddings,
        "hidden_act": "silu",
        "attention_bias": cfg.qkv_bias,
        "bos_token_id": tok.bos_id,
        "eos_token_id": tok.eos_id,
        "torch_dtype": str(dtype).removeprefix("torch."),
    }
    if cfg.rope.scaling is not None:
        kind, factor, *rest = cfg.rope.scaling
        config["rope_scaling"] = {"rope_type": kind, "factor": factor}
        if kind == "llama3":
            config["rope_scaling"].update(
                low_freq_factor=rest[0], high_freq_factor=rest[1], original_max_position_embeddings=rest[2]
            )
    _write_json(os.path.join(out_dir, "config.json"), config)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    token = lambda i: None if i is None else tok.id_to_token(i)  # noqa: E731
    _write_json(
        os.path.join(out_dir, "tokenizer_config.json"),
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": token(tok.bos_id),
            "eos_token": token(tok.eos_id),
            "add_bos_token": tok.add_bos,
            "model_max_length": cfg.max_position,
            "clean_up_tokenization_spaces": False,
        },
    )
    return out_dir


def _write_json(path: str, obj: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
