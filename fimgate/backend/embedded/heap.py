"""Keep large CPU buffers in the process's heap, so torch's temporaries do not cost fresh pages.

glibc gives an allocation above its mmap threshold its own pages from the kernel and returns
them on free, and trims the heap's top once more than its trim threshold is free there. torch
allocates CPU tensors with malloc and caches none, so each temporary of a few MB (a K/V gather,
a re-rotation, a prompt chunk's activations) arrives as untouched pages: a page fault and a
zeroed page every 4 KiB. glibc raises its thresholds by itself after some such frees (not past
32 MiB), so whether a temporary gets fresh pages depends on what the process did before; in a
freshly started engine it did (~25,000 page faults per re-anchor: tests/integration/test_heap.py).
Measured here (`fimgate bench engine`, 2 cores, SmolLM2-135M): a re-anchor whose 1,000
cached tokens moved had its first token in 140 ms with glibc's defaults and 72 ms with the
settings below (`git show 8233e15:docs/benchmarks.md`, "The first words sooner, and fresh pages").

So the engine sets, once, on glibc: allocations up to 32 MiB come from the heap (the most
M_MMAP_THRESHOLD allows), and up to 1 GiB freed at the heap's top stays for the next request.
The process keeps its peak memory instead of handing it back between requests; a server's peak
comes back with the next long prompt anyway. `FIMGATE_HEAP_TUNING=0` leaves glibc as it is (A/B).
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # glibc's upper bound on 64-bit systems
TRIM_THRESHOLD = 1 << 30
TOP_PAD = 64 << 20  # the heap grows in steps this large: fewer brk calls, pages touched once

_tuned: bool | None = None


def keep_large_buffers() -> bool:
    """Apply the settings above (once per process); whether they are in effect. Not glibc (macOS,
    Windows, musl) or FIMGATE_HEAP_TUNING=0: nothing changes."""
    global _tuned
    if _tuned is None:
        _tuned = os.environ.get("FIMGATE_HEAP_TUNING", "1") != "0" and _mallopt()
    return _tuned


def _mallopt() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # glibc only: musl's mallopt does nothing
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD))
    return all(mallopt(param, value) == 1 for param, value in settings)
