"""Triton kernel for RoPE rotation / re-rotation on CUDA; `fimgate/kernels/rope.py` is its reference.

One program per (row, token), where a row is every leading index flattened (layers x heads):

    x:        (rows, num_tokens, head_dim)      contiguous
    cos, sin: (num_tokens, rotary_dim / 2)      float32, made on the host in float64 -> exact
                                                 same angles as the reference
    out[r, t, a] = x[r, t, a] * cos[t, i] - x[r, t, b] * sin[t, i]
    out[r, t, b] = x[r, t, b] * cos[t, i] + x[r, t, a] * sin[t, i]
        neox: a = i, b = i + rotary_dim / 2;  gptj: a = 2i, b = 2i + 1
    dims past rotary_dim are copied unchanged.

The kernel writes a new tensor (never in place into a `.contiguous()` copy that may alias or
not). Untested here (no GPU on the dev machines): tests/unit/test_rope_triton.py and
fimgate/bench/engine/gpu_check.sh compare it against the reference where CUDA is present.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(
    x_ptr,
    out_ptr,
    cos_ptr,
    sin_ptr,
    num_tokens,
    head_dim,
    half,
    GPTJ: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
    BLOCK_DIM: tl.constexpr,
):
    row = tl.program_id(0)
    tok = tl.program_id(1)
    base = (row * num_tokens + tok) * head_dim
    i = tl.arange(0, BLOCK_HALF)
    m = i < half
    c = tl.load(cos_ptr + tok * half + i, mask=m, other=1.0)
    s = tl.load(sin_ptr + tok * half + i, mask=m, other=0.0)
    if GPTJ:
        ia = 2 * i
        ib = 2 * i + 1
    else:
        ia = i
        ib = i + half
    a = tl.load(x_ptr + base + ia, mask=m, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + base + ib, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + base + ia, (a * c - b * s).to(out_ptr.dtype.element_ty), mask=m)
    tl.store(out_ptr + base + ib, (b * c + a * s).to(out_ptr.dtype.element_ty), mask=m)
    j = tl.arange(0, BLOCK_DIM)  # pass-through dims (partial rotary)
    rest = (j >= 2 * half) & (j < head_dim)
    tl.store(out_ptr + base + j, tl.load(x_ptr + base + j, mask=rest, other=0.0), mask=rest)


def apply_rope_triton(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, gptj: bool) -> torch.Tensor:
    """x: (..., num_tokens, head_dim) on CUDA; cos, sin: (num_tokens, rotary_dim / 2)."""
    shape = x.shape
    num_tokens, head_dim = shape[-2], shape[-1]
    half = cos.shape[-1]
    xc = x.reshape(-1, num_tokens, head_dim).contiguous()
    out = torch.empty_like(xc)
    grid = (xc.shape[0], num_tokens)
    _rope_kernel[grid](
        xc,
        out,
        cos.contiguous().float(),
        sin.contiguous().float(),
        num_tokens,
        head_dim,
        half,
        GPTJ=gptj,
        BLOCK_HALF=triton.next_power_of_2(half),
        BLOCK_DIM=triton.next_power_of_2(head_dim),
    )
    return out.reshape(shape)
