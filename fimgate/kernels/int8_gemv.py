"""int8 weights times fp32 activations for one-token steps on CPU.

    q, scales = quantize_rows(w)                 # per output row: w ~ q * scale, |q| <= 127
    y = int8_linear(x, q, scales)                # (m, k) fp32, m small -> (m, n) fp32

The C kernel (fimgate/kernels/int8_gemv.c, built by fimgate/kernels/cpu_build.py) reads each int8 weight once
and multiplies it, converted to fp32, into fp32 activations with fp32 sums. It
beats torch's int8 weight-only kernel (`aten._weight_int8pack_mm`, which takes bf16 activations
and returns bf16) on this machine's decode-step shapes - 120 linears of SmolLM2-135M, one token:
11.8 ms against 15.1 ms, fp32 25.4 ms (`python -m fimgate.bench.micro.int8_gemv`) - and keeps the activations
in fp32. Without
a C compiler, or with FIMGATE_CPU_KERNELS=torch, torch's kernel does the work (bf16 activations).
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

import torch
import torch.nn.functional as F

from fimgate.kernels import cpu_build


class Int8Rows(NamedTuple):
    """An (n, k) weight as int8 rows: q (n, k) int8, scales (n,) bf16 (torch's kernel takes them),
    scales_f32 the same values in fp32 (the C kernel's)."""

    q: torch.Tensor
    scales: torch.Tensor
    scales_f32: torch.Tensor


def quantize_rows(w: torch.Tensor) -> Int8Rows:
    """w: (n, k) fp32 -> int8 rows and bf16 scales with |w - q * scale| <= scale / 2.
    A scale is stored in bf16 (what torch's kernel takes) and rounded up, never down, so every
    weight fits in [-127, 127] and the bound holds for the scale as stored."""
    w = w.detach().float()
    amax = w.abs().amax(dim=1).clamp(min=1e-30)
    scales = (amax / 127.0).to(torch.bfloat16)
    short = scales.float() * 127.0 < amax
    scales = torch.where(short, torch.nextafter(scales, torch.full_like(scales, float("inf"))), scales)
    q = torch.round(w / scales.float()[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
    return Int8Rows(q, scales, scales.float())


_P, _I = ctypes.c_void_p, ctypes.c_int64
KERNEL = cpu_build.Kernel(
    "int8_gemv",
    {
        "int8_gemv": ([_P, _P, _P, _P, _I, _I, _I, ctypes.c_int], None),
        "bf16_gemv": ([_P, _P, _P, _I, _I, _I, ctypes.c_int], None),
        "int8_screen": ([_P, _P, _P, _P, _P, _P, _I, _I, ctypes.c_float, ctypes.c_float, ctypes.c_int], ctypes.c_int64),
        "int8_screen_batch": ([_P, _P, _P, _P, _P, _P, _P, _I, _I, _I, _P, ctypes.c_float, ctypes.c_int], None),
    },
)


def kernel_available() -> bool:
    return KERNEL.lib is not None


def int8_linear(x: torch.Tensor, w: Int8Rows) -> torch.Tensor:
    """x: (m, k) fp32 on CPU. Returns (m, n) fp32 = x @ (q * scales)^T."""
    q = w.q
    lib = KERNEL.lib
    if lib is None:
        return torch.ops.aten._weight_int8pack_mm(x.to(torch.bfloat16), q, w.scales).float()
    if x.dtype != torch.float32 or x.dim() != 2 or x.shape[1] != q.shape[1]:
        raise ValueError(f"int8_linear: x {tuple(x.shape)} {x.dtype} against weights {tuple(q.shape)}")
    x = x.contiguous()
    y = torch.empty(x.shape[0], q.shape[0])
    lib.int8_gemv(
        q.data_ptr(),
        w.scales_f32.data_ptr(),
        x.data_ptr(),
        y.data_ptr(),
        q.shape[0],
        q.shape[1],
        x.shape[0],
        torch.get_num_threads(),
    )
    return y


def bf16_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x: (m, k) fp32 on CPU, w: (n, k) bf16. Returns (m, n) fp32 = x @ w^T, the products in fp32
    (the bf16 weights widened exactly); without the C kernel torch's bf16 product (x rounded to bf16)."""
    lib = KERNEL.lib
    if lib is None:
        return F.linear(x.to(torch.bfloat16), w).float()
    if x.dtype != torch.float32 or x.dim() != 2 or x.shape[1] != w.shape[1] or w.dtype != torch.bfloat16:
        raise ValueError(f"bf16_linear: x {tuple(x.shape)} {x.dtype} against weights {tuple(w.shape)} {w.dtype}")
    x, w = x.contiguous(), w.contiguous()
    y = torch.empty(x.shape[0], w.shape[0])
    lib.bf16_gemv(w.data_ptr(), x.data_ptr(), y.data_ptr(), w.shape[0], w.shape[1], x.shape[0], torch.get_num_threads())
    return y


def int8_screen(x: torch.Tensor, w: Int8Rows, per_l1: torch.Tensor, rel: float) -> tuple[torch.Tensor, torch.Tensor] | None:
    """For fimgate/backend/model/screened_head.py, in one C call: x (k,) fp32 -> (y, rows): y = q x * scales,
    rows: the indices r with y_r + b_r >= max(y - b), b = per_l1 * |x|_1 + rel * |y|. None
    without the C kernel."""
    lib = KERNEL.lib
    if lib is None:
        return None
    x = x.contiguous()
    q = w.q
    n = q.shape[0]
    y = torch.empty(n)
    rows = torch.empty(n, dtype=torch.int64)
    count = lib.int8_screen(
        q.data_ptr(),
        w.scales_f32.data_ptr(),
        per_l1.data_ptr(),
        x.data_ptr(),
        y.data_ptr(),
        rows.data_ptr(),
        n,
        q.shape[1],
        float(x.abs().sum()),
        rel,
        torch.get_num_threads(),
    )
    return y, rows[:count]


def int8_screen_batch(
    xs: torch.Tensor, w: Int8Rows, per_l1: torch.Tensor, rel: float
) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
    """int8_screen for each row of xs (m, k), the weights read once for all: row i's (y, rows) as
    int8_screen gives them for that row alone. None without the C kernel."""
    lib = KERNEL.lib
    if lib is None:
        return None
    xs = xs.contiguous()
    q = w.q
    n, m = q.shape[0], xs.shape[0]
    y = torch.empty(m, n)
    rows = torch.empty(m, n, dtype=torch.int64)
    counts = torch.empty(m, dtype=torch.int64)
    l1 = torch.tensor([float(x.abs().sum()) for x in xs], dtype=torch.float32)
    lib.int8_screen_batch(
        q.data_ptr(),
        w.scales_f32.data_ptr(),
        per_l1.data_ptr(),
        xs.data_ptr(),
        y.data_ptr(),
        rows.data_ptr(),
        counts.data_ptr(),
        n,
        q.shape[1],
        m,
        l1.data_ptr(),
        rel,
        torch.get_num_threads(),
    )
    return [(y[i], rows[i, : int(counts[i])]) for i in range(m)]
