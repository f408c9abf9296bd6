"""Load a model's config, weights and tokenizer from a GGUF file or a Hugging Face folder.

Weights come out under canonical names (`embed`, `final_norm`, `lm_head`,
`layers.{i}.{attn_norm,q,k,v,o,q_bias,k_bias,v_bias,mlp_norm,gate,up,down}`), so the model code
never sees a file format. Quantized GGUF tensors are dequantized to float32 on load, or, with
`quantized=True`, kept as the file stores them (fimgate/kernels/quant_gemv.QuantMatrix: Q4_0,
Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K), packed for the kernel in slices of rows so that load
never holds more than a slice unpacked.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import struct
from dataclasses import dataclass, field

import numpy as np
import torch

from fimgate.backend.model.config import ModelConfig
from fimgate.backend.model.gguf_blocks import supported, unpack
from fimgate.backend.model.gguf_file import GGUFFile
from fimgate.backend.model.tokenizer import HFTokenizer
from fimgate.kernels.quant_gemv import QuantMatrix, simd
from fimgate.kernels.quant_gemv import kernel_available as quant_kernel_available
from fimgate.kernels.quant_pack import pack

log = logging.getLogger(__name__)

_GGUF_NAMES = {
    "attn_norm.weight": "attn_norm",
    "attn_q.weight": "q",
    "attn_k.weight": "k",
    "attn_v.weight": "v",
    "attn_output.weight": "o",
    "attn_q.bias": "q_bias",
    "attn_k.bias": "k_bias",
    "attn_v.bias": "v_bias",
    "ffn_norm.weight": "mlp_norm",
    "ffn_gate.weight": "gate",
    "ffn_up.weight": "up",
    "ffn_down.weight": "down",
    "attn_q_norm.weight": "q_norm",
    "attn_k_norm.weight": "k_norm",
    "post_attention_norm.weight": "post_attn_norm",
    "post_ffw_norm.weight": "post_mlp_norm",
}
_HF_NAMES = {
    "input_layernorm.weight": "attn_norm",
    "self_attn.q_proj.weight": "q",
    "self_attn.k_proj.weight": "k",
    "self_attn.v_proj.weight": "v",
    "self_attn.o_proj.weight": "o",
    "self_attn.q_proj.bias": "q_bias",
    "self_attn.k_proj.bias": "k_bias",
    "self_attn.v_proj.bias": "v_bias",
    "post_attention_layernorm.weight": "mlp_norm",
    "mlp.gate_proj.weight": "gate",
    "mlp.up_proj.weight": "up",
    "mlp.down_proj.weight": "down",
    "self_attn.q_norm.weight": "q_norm",
    "self_attn.k_norm.weight": "k_norm",
}
# Gemma's norms multiply by (1 + w); llama.cpp stores 1 + w in GGUF, so HF weights get +1 on load.
_HF_GEMMA_NAMES = {
    **_HF_NAMES,
    "post_attention_layernorm.weight": "post_attn_norm",
    "pre_feedforward_layernorm.weight": "mlp_norm",
    "post_feedforward_layernorm.weight": "post_mlp_norm",
}


class ModelLoadError(ValueError):
    """A model path that cannot be loaded; the message says why, for the person who gave it."""


@dataclass
class LoadedModel:
    name: str
    config: ModelConfig
    tensors: dict[str, "torch.Tensor | QuantMatrix"]
    tokenizer: HFTokenizer
    file_types: dict[str, int] = field(default_factory=dict)  # canonical name -> GGUF tensor type (8: Q8_0, ...)

    @property
    def quantized(self) -> bool:
        """Whether any weight is kept in a quantized block format."""
        return any(isinstance(t, QuantMatrix) for t in self.tensors.values())


def load_model(path: str, quantized: bool = False) -> LoadedModel:
    """quantized: keep a GGUF file's quantized 2-D weights as they are (where the kernel is built)."""
    if not os.path.exists(path):
        raise ModelLoadError(f"model path does not exist: {path}")
    try:
        if os.path.isdir(path):
            return _load_hf_folder(path)
        if path.endswith(".gguf"):
            quantized = quantized and quant_kernel_available()
            if quantized and simd() is None:
                log.warning("neither AVX-512 VNNI nor AVX2 here: quantized weights are multiplied in plain C loops (~30x slower)")
            return _load_gguf(path, quantized)
    except ModelLoadError:
        raise
    except (ValueError, KeyError, OSError, struct.error) as e:  # GGUFError is a ValueError
        raise ModelLoadError(f"cannot load model {path}: {e}") from e
    raise ModelLoadError(f"not a model: {path} (expected a .gguf file or a Hugging Face folder)")


def is_quantized_gguf(path: str) -> bool:
    """Whether a GGUF file stores weights in block formats fimgate multiplies directly."""
    if not (os.path.isfile(path) and path.endswith(".gguf")):
        return False
    return any(supported(int(t.tensor_type)) for t in GGUFFile(path).tensors)


PACK_ROWS = 8192  # rows unpacked at a time while packing a quantized tensor (bounds load's memory)


def _quant_matrix(t) -> QuantMatrix:
    """A GGUF tensor (rows x cols in a supported block format) packed for the kernel, slice by slice."""
    fmt, cols, rows = int(t.tensor_type), int(t.shape[0]), int(t.shape[1])
    raw = np.asarray(t.data).reshape(rows, -1)
    slices = []
    for a in range(0, rows, PACK_ROWS):  # PACK_ROWS is a multiple of the kernel's 16-row groups
        part = raw[a : a + PACK_ROWS]
        q, scales = unpack(part, fmt, part.shape[0], cols)
        slices.append(pack(fmt, q, **scales))
    return QuantMatrix(torch.from_numpy(np.concatenate(slices) if len(slices) > 1 else slices[0]), fmt, rows, cols)


def _load_gguf(path: str, quantized: bool = False) -> LoadedModel:
    from gguf.quants import dequantize

    reader = GGUFFile(path)
    names = {t.name for t in reader.tensors}
    config = ModelConfig.from_gguf(reader.fields, names)
    tensors: dict[str, torch.Tensor | QuantMatrix] = {}
    file_types: dict[str, int] = {}
    for t in reader.tensors:
        name = _canonical_gguf(t.name)
        file_types[name] = int(t.tensor_type)
        if quantized and supported(int(t.tensor_type)) and len(t.shape) == 2:
            tensors[name] = _quant_matrix(t)
            continue
        arr = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32, order="C", copy=True)
        tensors[name] = torch.from_numpy(arr)
    return LoadedModel(
        name=os.path.basename(path),
        config=config,
        tensors=tensors,
        tokenizer=HFTokenizer.from_gguf(reader.fields, path),
        file_types=file_types,
    )


def _canonical_gguf(name: str) -> str:
    if name == "token_embd.weight":
        return "embed"
    if name == "output_norm.weight":
        return "final_norm"
    if name == "output.weight":
        return "lm_head"
    if name.startswith("blk."):
        _, i, rest = name.split(".", 2)
        return f"layers.{i}.{_GGUF_NAMES.get(rest, rest)}"
    return name


def _load_hf_folder(path: str) -> LoadedModel:
    from safetensors.torch import load_file

    cfg_path = os.path.join(path, "config.json")
    if not os.path.exists(cfg_path):
        raise ModelLoadError(f"{path} has no config.json")
    config = ModelConfig.from_hf(json.load(open(cfg_path, encoding="utf-8")))
    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    if not files:
        raise ModelLoadError(f"{path} has no .safetensors weights")
    tensors: dict[str, torch.Tensor] = {}
    gemma = config.arch == "gemma3"
    for f in files:
        for k, v in load_file(f).items():
            name = _canonical_hf(k, _HF_GEMMA_NAMES if gemma else _HF_NAMES)
            v = v.to(torch.float32)
            tensors[name] = v + 1 if gemma and name.endswith("norm") else v
    if "lm_head" in tensors and config.tie_embeddings:
        del tensors["lm_head"]
    return LoadedModel(
        name=os.path.basename(os.path.normpath(path)), config=config, tensors=tensors, tokenizer=HFTokenizer.from_folder(path)
    )


def _canonical_hf(name: str, names: dict[str, str]) -> str:
    name = name.removeprefix("model.").removeprefix("language_model.")
    if name == "embed_tokens.weight":
        return "embed"
    if name == "norm.weight":
        return "final_norm"
    if name == "lm_head.weight":
        return "lm_head"
    if name.startswith("layers."):
        _, i, rest = name.split(".", 2)
        return f"layers.{i}.{names.get(rest, rest)}"
    return name


def load_tokenizer(path: str) -> HFTokenizer:
    """Only the tokenizer of a model (no weights), for planning and token counts."""
    if not os.path.exists(path):
        raise ModelLoadError(f"model path does not exist: {path}")
    if os.path.isdir(path):
        return HFTokenizer.from_folder(path)
    return HFTokenizer.from_gguf(GGUFFile(path).fields, path)
