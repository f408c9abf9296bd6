"""int8 weights times fp32 activations for one-token steps on CPU.

    q, scales = quantize_rows(w)                 # per output row: w ~ q * scale, |q| <= 127
    y = int8_linear(x, q, scales)                # (m, k) fp32, m small -> (m, n) fp32

The C kernel (kernels/int8_gemv.c) reads each int8 weight once and multiplies it, converted to
fp32, into fp32 activations with fp32 sums. It is compiled with the system's C compiler on first
use (`cc -O3 -march=native -fopenmp`, ~1 s) into a cache directory and loaded with ctypes. It
beats torch's int8 weight-only kernel (`aten._weight_int8pack_mm`, which takes bf16 activations
and returns bf16) on this machine's decode-step shapes - 120 linears of SmolLM2-135M, one token:
11.8 ms against 15.1 ms, fp32 25.4 ms (`python -m bench.int8_gemv`) - and keeps the activations
in fp32. Without
a C compiler, or with FIMGATE_INT8_KERNEL=torch, torch's kernel does the work (bf16 activations).
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

log = logging.getLogger(__name__)
_SOURCE = Path(__file__).with_name("int8_gemv.c")
_FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """w: (n, k) fp32 -> q (n, k) int8 and scales (n,) bf16 with |w - q * scale| <= scale / 2.
    A scale is stored in bf16 (what torch's kernel takes) and rounded up, never down, so every
    weight fits in [-127, 127] and the bound holds for the scale as stored."""
    w = w.detach().float()
    amax = w.abs().amax(dim=1).clamp(min=1e-30)
    scales = (amax / 127.0).to(torch.bfloat16)
    short = scales.float() * 127.0 < amax
    scales = torch.where(short, torch.nextafter(scales, torch.full_like(scales, float("inf"))), scales)
    q = torch.round(w / scales.float()[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
    return q, scales


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "fimgate" / "kernels"


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return ""


def _build() -> ctypes.CDLL | None:
    """Compile (once per source, compiler flags and CPU) and load the kernel; None if impossible."""
    if os.environ.get("FIMGATE_INT8_KERNEL", "c") == "torch":
        return None
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        log.warning("no C compiler found: int8 steps use torch's kernel (bf16 activations)")
        return None
    key = hashlib.sha256(_SOURCE.read_bytes() + " ".join(_FLAGS).encode() + _cpu_flags().encode()).hexdigest()[:16]
    lib_path = _cache_dir() / f"int8_gemv-{key}.so"
    try:
        if not lib_path.exists():
            lib_path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib_path.parent)
            os.close(fd)
            subprocess.run([cc, *_FLAGS, str(_SOURCE), "-o", tmp], check=True, capture_output=True, timeout=120)
            os.replace(tmp, lib_path)  # atomic: a concurrent build never loads half a file
        lib = ctypes.CDLL(str(lib_path))  # after torch: its libgomp is the one already loaded
    except (OSError, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", b"") or b""
        log.warning("int8 kernel build failed (%s %s): using torch's kernel", e, detail.decode(errors="replace")[:500])
        return None
    lib.int8_gemv.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 3 + [ctypes.c_int]
    lib.int8_gemv.restype = None
    return lib


_lib: ctypes.CDLL | None = None
_tried = False


def kernel_available() -> bool:
    global _lib, _tried
    if not _tried:
        _lib, _tried = _build(), True
    return _lib is not None


def int8_linear(x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, scales_f32: torch.Tensor | None = None
                ) -> torch.Tensor:
    """x: (m, k) fp32 on CPU; q: (n, k) int8; scales: (n,) bf16 (scales_f32: the same values as
    fp32, to spare a conversion per call). Returns (m, n) fp32 = x @ (q * scales)^T."""
    if not kernel_available():
        return torch.ops.aten._weight_int8pack_mm(x.to(torch.bfloat16), q, scales).float()
    if x.dtype != torch.float32 or x.dim() != 2 or x.shape[1] != q.shape[1]:
        raise ValueError(f"int8_linear: x {tuple(x.shape)} {x.dtype} against weights {tuple(q.shape)}")
    x = x.contiguous()
    s = scales.float() if scales_f32 is None else scales_f32
    y = torch.empty(x.shape[0], q.shape[0])
    _lib.int8_gemv(q.data_ptr(), s.data_ptr(), x.data_ptr(), y.data_ptr(), q.shape[0], q.shape[1], x.shape[0],
                   torch.get_num_threads())
    return y
