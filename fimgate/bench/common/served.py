"""`fimgate serve` as a subprocess on a free loopback port, ready when /health answers: what the
benchmarks and tests that need a real server start. Its output goes to a file, never to a pipe
(a pipe nobody reads fills up and stalls the server); a server that does not come up is an error
carrying the end of that output."""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(*flags: str, timeout_s: float = 180) -> tuple[subprocess.Popen, str]:
    """(the process, its base URL); flags go to `fimgate serve` after --port."""
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="fimgate-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fimgate", "serve", "--port", str(port), *flags], stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout_s
    while time.time() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    with open(log.name, encoding="utf-8", errors="replace") as f:
        raise RuntimeError(f"fimgate serve did not come up ({log.name}): {f.read()[-2000:]}")
