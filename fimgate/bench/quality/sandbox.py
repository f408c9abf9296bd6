"""Run untrusted generated code: a subprocess with a time limit, memory and file-size limits,
an empty working folder and a bare environment. Pass = exit status 0."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile

MEMORY_BYTES = 1 << 30
FILE_BYTES = 1 << 20


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))
    os.setsid()


def run_program(source: str, timeout_s: float = 10.0) -> bool:
    with tempfile.TemporaryDirectory(prefix="fimgate-sandbox-") as tmp:
        path = os.path.join(tmp, "program.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        try:
            r = subprocess.run(
                [sys.executable, "-I", "-S", path],
                cwd=tmp,
                env={"PATH": "/usr/bin:/bin"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout_s,
                preexec_fn=_limits,
            )
        except subprocess.TimeoutExpired:
            return False
        return r.returncode == 0
