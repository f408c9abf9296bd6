"""One token through all the layers of a Llama-style decoder in one C call (fimgate/kernels/llama_step.c),
for one sequence or a batch of them (each with its own cache, slot and position).

    layers = pack_layers([LayerWeights(attn_norm, mlp_norm, qkv, o, gate_up, down), ...])
    ok = llama_step(layers, x, kv_k, kv_v, slot, cos_t, sin_t, dims)   # x (hidden,) updated in place
    ok = llama_step_batch(layers, xs, [(kv_k, kv_v), ...], slots, cos_t, sin_t, dims)   # xs (batch, hidden)

A linear is an fp32 or bf16 (rows, cols) tensor, kernels/int8_gemv.Int8Rows or
kernels/quant_gemv.QuantParts (GGUF blocks); the qkv linear may carry a bias. The caller keeps the
weights alive and decides which models fit (fimgate/backend/model/fused_step.py); this module only checks
shapes and dtypes and returns False where the kernel is not built, so the caller runs torch.
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple, Union

import torch

from fimgate.kernels import cpu_build
from fimgate.kernels.int8_gemv import Int8Rows
from fimgate.kernels.quant_gemv import QuantParts

_P, _I = ctypes.c_void_p, ctypes.c_int64


class _Linear(ctypes.Structure):
    _fields_ = [("w", _P), ("scale", _P), ("rows", _I), ("cols", _I), ("kind", _I), ("n_parts", _I), ("bias", _P)]


FP32, INT8, BF16, QUANT = 0, 1, 2, 3  # _Linear.kind, as int8_gemv.c and llama_step.c number them


class _Layer(ctypes.Structure):
    _fields_ = [("attn_norm", _P), ("mlp_norm", _P), ("qkv", _Linear), ("o", _Linear), ("gate_up", _Linear), ("down", _Linear)]


KERNEL = cpu_build.Kernel(
    "llama_step",
    {
        "llama_step": (
            # layers n_layers batch x k/v_caches head_strides slots rope_cos/sin, gptj + 5 sizes, eps scale, ws threads stop
            [_P, _I, _I, _P, _P, _P, _P, _P, _P, _P, *[_I] * 6, ctypes.c_float, ctypes.c_float, _P, ctypes.c_int, _P],
            ctypes.c_int,
        ),
        "llama_step_workspace": ([_I] * 7, _I),
    },
)

Weight = Union[torch.Tensor, Int8Rows, QuantParts]


class StepStopped(Exception):
    """The step's stop flag was set while it ran: it stopped between two layers, its output and
    the K/V rows it wrote are garbage (the caller drops the step)."""


class LayerWeights(NamedTuple):
    attn_norm: torch.Tensor
    mlp_norm: torch.Tensor
    qkv: Weight
    o: Weight
    gate_up: Weight
    down: Weight
    qkv_bias: torch.Tensor | None = None  # (q, k, v rows,) fp32 (Qwen2)


class Dims(NamedTuple):
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    rms_eps: float
    attn_scale: float
    gptj: bool  # RoPE pairs neighbours (GGUF llama) rather than halves (neox)


def kernel_available() -> bool:
    return KERNEL.lib is not None


def _linear(w: Weight, bias: torch.Tensor | None = None) -> _Linear:
    b = None
    if bias is not None:
        if bias.dtype != torch.float32 or not bias.is_contiguous() or bias.numel() != _rows(w):
            raise ValueError("llama_step: a bias is contiguous fp32, one per output row")
        b = bias.data_ptr()
    if isinstance(w, QuantParts):
        return _Linear(ctypes.addressof(w.carray), None, w.rows, w.cols, QUANT, len(w.parts), b)
    if isinstance(w, Int8Rows):
        return _Linear(w.q.data_ptr(), w.scales_f32.data_ptr(), w.q.shape[0], w.q.shape[1], INT8, 0, b)
    if w.dtype not in (torch.float32, torch.bfloat16) or not w.is_contiguous() or w.device.type != "cpu":
        raise ValueError("llama_step: fp32 or bf16 linears must be contiguous CPU tensors")
    return _Linear(w.data_ptr(), None, w.shape[0], w.shape[1], BF16 if w.dtype == torch.bfloat16 else FP32, 0, b)


def _rows(w: Weight) -> int:
    return w.rows if isinstance(w, QuantParts) else w.q.shape[0] if isinstance(w, Int8Rows) else w.shape[0]


def pack_layers(layers: list[LayerWeights]) -> ctypes.Array:
    """The C array of layer descriptors; it points into the tensors, which must outlive it."""
    arr = (_Layer * len(layers))()
    for i, lw in enumerate(layers):
        for norm in (lw.attn_norm, lw.mlp_norm):
            if norm.dtype != torch.float32 or not norm.is_contiguous():
                raise ValueError("llama_step: norms must be contiguous fp32")
        arr[i] = _Layer(
            lw.attn_norm.data_ptr(),
            lw.mlp_norm.data_ptr(),
            _linear(lw.qkv, lw.qkv_bias),
            _linear(lw.o),
            _linear(lw.gate_up),
            _linear(lw.down),
        )
    return arr


def llama_step(
    layers: ctypes.Array,
    x: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot: int,
    cos_t: torch.Tensor,
    sin_t: torch.Tensor,
    dims: Dims,
) -> bool:
    """x: (hidden,) fp32, the token's embedding, replaced by the last layer's output. k_cache,
    v_cache: (layers, kv_heads, capacity, head_dim) fp32 contiguous; row `slot` is written and
    rows [0, slot] attended to. cos_t, sin_t: (head_dim,) RoPE tables of the token's position.
    False (nothing done) without the C kernel."""
    return llama_step_batch(layers, x.view(1, -1), [(k_cache, v_cache)], [slot], cos_t.view(1, -1), sin_t.view(1, -1), dims)


def llama_step_batch(
    layers: ctypes.Array,
    xs: torch.Tensor,
    caches: list[tuple[torch.Tensor, torch.Tensor]],
    slots: list[int],
    cos_t: torch.Tensor,
    sin_t: torch.Tensor,
    dims: Dims,
    stop: ctypes.c_int32 | None = None,
) -> bool:
    """xs: (batch, hidden) fp32 contiguous, each sequence's token embedding, replaced by its last
    layer's output. caches[b]: sequence b's (k, v), each (layers, kv_heads, capacity, head_dim)
    fp32 contiguous; row slots[b] is written and rows [0, slots[b]] attended to. cos_t, sin_t:
    (batch, head_dim) RoPE tables of each token's position. Row b comes out as llama_step would
    give it alone, bit for bit. False (nothing done) without the C kernel. `stop`: a flag another
    thread may set to end the step between two layers (StepStopped is raised)."""
    lib = KERNEL.lib
    if lib is None:
        return False
    batch = xs.shape[0]
    if not (xs.is_contiguous() and xs.dtype == torch.float32 and len(caches) == batch == len(slots)):
        raise ValueError("llama_step: x must be contiguous fp32, one row per cache and slot")
    for (k, v), slot in zip(caches, slots):
        if not (k.is_contiguous() and v.is_contiguous() and k.dtype == torch.float32 and v.dtype == torch.float32):
            raise ValueError("llama_step: the K/V caches must be contiguous fp32")
        if not 0 <= slot < k.shape[2] or k.shape[0] != len(layers) or k.shape[1] != dims.kv_heads:
            raise ValueError(f"llama_step: slot {slot} outside the cache, or {len(layers)} layers for {k.shape[0]}")
    threads = torch.get_num_threads()
    cos_t, sin_t = cos_t.contiguous(), sin_t.contiguous()
    ws = torch.empty(
        lib.llama_step_workspace(batch, dims.hidden, dims.heads, dims.kv_heads, dims.head_dim, dims.intermediate, max(slots) + 1)
    )
    pointers = ctypes.c_void_p * batch
    rc = lib.llama_step(
        layers,
        len(layers),
        batch,
        xs.data_ptr(),
        pointers(*[k.data_ptr() for k, _ in caches]),
        pointers(*[v.data_ptr() for _, v in caches]),
        (ctypes.c_int64 * batch)(*[k.stride(1) for k, _ in caches]),
        (ctypes.c_int64 * batch)(*slots),
        cos_t.data_ptr(),
        sin_t.data_ptr(),
        int(dims.gptj),
        dims.hidden,
        dims.heads,
        dims.kv_heads,
        dims.head_dim,
        dims.intermediate,
        dims.rms_eps,
        dims.attn_scale,
        ws.data_ptr(),
        threads,
        None if stop is None else ctypes.addressof(stop),
    )
    if rc == 1:
        raise StepStopped()
    if rc != 0:
        raise ValueError("llama_step: head_dim above 512")
    return True
