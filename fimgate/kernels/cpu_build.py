"""Build and load this package's small C kernels (fimgate/kernels/*.c) for the CPU.

    GEMV = Kernel("int8_gemv", {"int8_gemv": ([ctypes.c_void_p, ...], None)})
    GEMV.lib                      # a ctypes.CDLL with those signatures, or None where it cannot be built

Each source is compiled with the system's C compiler on first use (`cc -O3 -march=native
-fopenmp`, ~1 s) into ~/.cache/fimgate/kernels (or $XDG_CACHE_HOME), keyed by the source, the
flags, the CPU's feature flags and the folder's other sources (a kernel may #include another),
and loaded with ctypes. Loaded after torch, the kernels use
the libgomp torch already loaded, so they share its thread pool. FIMGATE_CPU_KERNELS=torch turns
them all off (the torch code paths run instead), as does a missing compiler.
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

import torch  # loaded first: its libgomp is the one the kernels bind to

log = logging.getLogger(__name__)
FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]
_loaded: dict[tuple[str, tuple[str, ...]], ctypes.CDLL | None] = {}


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "fimgate" / "kernels"


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return ""


def compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def load(name: str, defines: tuple[str, ...] = ()) -> ctypes.CDLL | None:
    """kernels/<name>.c as a loaded library, built if needed; None (logged once) if it cannot be.
    defines: extra -D macros (tests build a kernel's plain-C path with FIMGATE_NO_SIMD)."""
    if (name, defines) not in _loaded:
        _loaded[(name, defines)] = _build(name, defines)
    return _loaded[(name, defines)]


def _build(name: str, defines: tuple[str, ...] = ()) -> ctypes.CDLL | None:
    if os.environ.get("FIMGATE_CPU_KERNELS", "c") == "torch":
        return None
    cc = compiler()
    if cc is None:
        log.warning("no C compiler found: kernels/%s.c is not used, torch does that work", name)
        return None
    source = Path(__file__).with_name(f"{name}.c")
    try:
        text = source.read_bytes()
        included = b"".join(p.read_bytes() for p in sorted(source.parent.glob("*.c")) if p != source)  # may #include
    except OSError as e:  # an install without the C sources: the torch paths are complete on their own
        log.warning("kernels/%s.c is not installed (%s): torch does that work", name, e)
        return None
    flags = FLAGS + [f"-D{d}" for d in defines]
    stamp = " ".join(flags + [torch.__version__, _cpu_flags()]).encode()
    key = hashlib.sha256(text + included + stamp).hexdigest()[:16]
    lib_path = _cache_dir() / f"{name}-{key}.so"
    try:
        if not lib_path.exists():
            lib_path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib_path.parent)
            os.close(fd)
            subprocess.run([cc, *flags, str(source), "-o", tmp], check=True, capture_output=True, timeout=120)
            os.replace(tmp, lib_path)  # atomic: a concurrent build never loads half a file
        return ctypes.CDLL(str(lib_path))
    except (OSError, subprocess.SubprocessError) as e:
        detail = (getattr(e, "stderr", b"") or b"").decode(errors="replace")[:500]
        log.warning("kernels/%s.c did not build (%s %s): torch does that work", name, e, detail)
        return None


class Kernel:
    """One kernels/<name>.c: built and loaded on first use of `lib`, its functions' ctypes
    signatures declared ({function: (argtypes, restype)}); `lib` is None where it cannot be."""

    def __init__(self, name: str, signatures: dict[str, tuple[list, object]], defines: tuple[str, ...] = ()) -> None:
        self.name = name
        self.signatures = signatures
        self.defines = defines
        self._lib: ctypes.CDLL | None = None
        self._tried = False
        self._enabled = True

    @property
    def lib(self) -> ctypes.CDLL | None:
        if not self._tried:
            self._tried = True
            self._lib = load(self.name, self.defines)
            for fn, (argtypes, restype) in self.signatures.items() if self._lib is not None else ():
                getattr(self._lib, fn).argtypes = argtypes
                getattr(self._lib, fn).restype = restype
        return self._lib if self._enabled else None

    def set_enabled(self, on: bool) -> None:
        """Off: `lib` is None and callers take their torch path (benchmarks compare the two)."""
        self._enabled = on
