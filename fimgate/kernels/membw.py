"""The memory-read bandwidth of this machine, measured now (fimgate/kernels/membw.c): what
`fimgate bench engine` divides a step's bytes by for the floor under decoding."""

from __future__ import annotations

import ctypes

import torch

from fimgate.kernels import cpu_build

KERNEL = cpu_build.Kernel("membw", {"read_bandwidth": ([ctypes.c_void_p, ctypes.c_int64, ctypes.c_int], ctypes.c_double)})
BUFFER_BYTES = 512 << 20  # far beyond any last-level cache


def read_bandwidth(threads: int | None = None, repeats: int = 5) -> float | None:
    """Bytes per second, the best of `repeats` passes over a fresh buffer; None without a compiler."""
    lib = KERNEL.lib
    if lib is None:
        return None
    buf = torch.ones(BUFFER_BYTES // 8, dtype=torch.int64)  # written once: every page is really there
    n = threads or torch.get_num_threads()
    best = max(lib.read_bandwidth(buf.data_ptr(), buf.numel(), n) for _ in range(repeats))
    del buf
    return best
