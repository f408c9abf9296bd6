"""Quantized matrices (GGUF block formats, packed by quant_pack.py) times fp32 activations, on CPU.

    m = QuantMatrix.from_parts(fmt, q, rows, cols, d=..., ...)   # packed once, at load
    y = quant_linear(x, m)           # x (n, cols) fp32 -> (n, rows) fp32; x quantized per 32 values
    w = dequantize(m, torch.bfloat16)  # the whole matrix (or rows of it), for a prompt's GEMM

The products are fimgate/kernels/quant_gemv.c's (AVX-512 VNNI or AVX2 where the CPU has them,
plain loops elsewhere, the same integer sums). Without a C compiler there is no quantized path: the weights
are then dequantized at load (fimgate/backend/model/weights.py decides).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np
import torch

from fimgate.kernels import cpu_build
from fimgate.kernels.quant_pack import FORMATS, group_bytes, pack

_P, _I = ctypes.c_void_p, ctypes.c_int64


class CMatrix(ctypes.Structure):
    """quant_gemv.c's QMatrix."""

    _fields_ = [("data", _P), ("rows", _I), ("cols", _I), ("format", _I), ("group_bytes", _I)]


SIGNATURES = {
    "quant_gemv": ([_P, ctypes.c_int, _P, _P, _I, _P, ctypes.c_int, ctypes.c_int, _P], None),
    "quant_dequant_rows": ([_P, _P, _I, _P], None),
    "quant_workspace": ([_I, _I], _I),
    "quant_dequant": ([_P, _I, _I, _P, ctypes.c_int, ctypes.c_int], None),
    "quant_group_bytes": ([_I, _I], _I),
    "quant_simd": ([], ctypes.c_int),
}
KERNEL = cpu_build.Kernel("quant_gemv", SIGNATURES)
PLAIN_KERNEL = cpu_build.Kernel("quant_gemv", SIGNATURES, defines=("FIMGATE_NO_SIMD",))  # the loops CPUs without AVX2 run


def kernel_available() -> bool:
    return KERNEL.lib is not None


def simd() -> str | None:
    """The vectors the products run on: "avx512-vnni", "avx2", or None (plain loops: correct, and
    ~two orders of magnitude slower on a prompt)."""
    lib = KERNEL.lib
    return {1: "avx512-vnni", 2: "avx2"}.get(lib.quant_simd()) if lib is not None else None


@dataclass(eq=False)
class QuantMatrix:
    """A (rows, cols) weight in a GGUF block format, packed for the kernel. `data` is its only copy."""

    data: torch.Tensor  # uint8, groups of 16 rows
    fmt: int
    rows: int
    cols: int

    @classmethod
    def from_parts(cls, fmt: int, q: np.ndarray, **scales: np.ndarray) -> "QuantMatrix":
        rows, cols = q.shape
        return cls(torch.from_numpy(pack(fmt, q, **scales)), fmt, rows, cols)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    @property
    def format_name(self) -> str:
        return FORMATS[self.fmt]

    @property
    def nbytes(self) -> int:
        return self.data.numel()

    def cstruct(self) -> CMatrix:
        return CMatrix(self.data.data_ptr(), self.rows, self.cols, self.fmt, group_bytes(self.fmt, self.cols))


def structs(parts: list[QuantMatrix]) -> ctypes.Array:
    """The C array of matrix descriptors; it points into the parts' data, which must outlive it."""
    return (CMatrix * len(parts))(*[p.cstruct() for p in parts])


class QuantParts:
    """Matrices taking the same input, their outputs side by side (q; k; v), as one kernel call
    reads them: the parts and the C array describing them (kept together, so the data outlives it)."""

    def __init__(self, parts: list[QuantMatrix]) -> None:
        if not parts or len({p.cols for p in parts}) != 1:
            raise ValueError("parts of one product take the same input")
        self.parts = parts
        self.carray = structs(parts)
        self.rows = sum(p.rows for p in parts)
        self.cols = parts[0].cols


def quant_linear(
    x: torch.Tensor,
    w: "QuantMatrix | QuantParts",
    threads: int | None = None,
    kernel: cpu_build.Kernel = KERNEL,
    residual: bool = False,
) -> torch.Tensor:
    """x: (n, cols) fp32 on CPU -> (n, rows) fp32 = x @ W^T, x quantized per 32 values (int8);
    QuantParts give their outputs side by side, from one call. residual: x as two 8-bit rows (x,
    then what its rounding left out), for ~16-bit activations. kernel: PLAIN_KERNEL runs the
    plain loops (tests)."""
    lib = kernel.lib
    if lib is None:
        raise RuntimeError("quant_gemv.c is not built (no C compiler, or FIMGATE_CPU_KERNELS=torch)")
    w = w if isinstance(w, QuantParts) else QuantParts([w])
    if x.dtype != torch.float32 or x.dim() != 2 or x.shape[1] != w.cols:
        raise ValueError(f"quant_linear: x {tuple(x.shape)} {x.dtype} against weights {w.rows}x{w.cols}")
    x = x.contiguous()
    n = x.shape[0]
    y = torch.empty(n, w.rows)
    ws = torch.empty(lib.quant_workspace(2 * n if residual else n, w.cols), dtype=torch.uint8)
    y2 = torch.empty(2 * n, w.rows) if residual else None
    lib.quant_gemv(
        w.carray,
        len(w.parts),
        x.data_ptr(),
        y.data_ptr(),
        n,
        ws.data_ptr(),
        threads or torch.get_num_threads(),
        int(residual),
        None if y2 is None else y2.data_ptr(),
    )
    return y


def embedding(w: QuantMatrix, ids: torch.Tensor) -> torch.Tensor:
    """Rows `ids` of W in fp32: (len(ids), cols)."""
    lib = KERNEL.lib
    if lib is None:
        raise RuntimeError("quant_gemv.c is not built")
    ids = ids.to(torch.int64).contiguous()
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= w.rows):
        raise IndexError("token id out of the embedding's range")
    out = torch.empty(ids.numel(), w.cols)
    m = w.cstruct()
    lib.quant_dequant_rows(ctypes.byref(m), ids.data_ptr(), ids.numel(), out.data_ptr())
    return out


def dequantize(w: QuantMatrix, dtype: torch.dtype = torch.float32, rows: tuple[int, int] | None = None) -> torch.Tensor:
    """Rows [a, b) of W (all by default) as fp32 or bf16 (rounded to nearest even)."""
    lib = KERNEL.lib
    if lib is None:
        raise RuntimeError("quant_gemv.c is not built")
    a, b = rows or (0, w.rows)
    out = torch.empty(b - a, w.cols, dtype=dtype)
    m = w.cstruct()
    lib.quant_dequant(ctypes.byref(m), a, b - a, out.data_ptr(), int(dtype == torch.bfloat16), torch.get_num_threads())
    return out
