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


def start_http(cmd: list[str], url: str, name: str, health: str = "/health", timeout_s: float = 180) -> subprocess.Popen:
    """Run `cmd` (a server that will listen at `url`), its output to a log file; the process once
    `health` answers 200, or a RuntimeError with the end of its log."""
    log = tempfile.NamedTemporaryFile(prefix=f"{name.replace(' ', '-')}-", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + timeout_s
    while time.time() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + health, timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop(proc)
    with open(log.name, encoding="utf-8", errors="replace") as f:
        raise RuntimeError(f"{name} did not come up ({log.name}): {f.read()[-2000:]}")


def stop(proc: subprocess.Popen, timeout_s: float = 30) -> None:
    """Terminate, and kill what does not end within `timeout_s`."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_serve(*flags: str, timeout_s: float = 180) -> tuple[subprocess.Popen, str]:
    """(the process, its base URL); flags go to `fimgate serve` after --port."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "fimgate", "serve", "--port", str(port), *flags]
    return start_http(cmd, url, "fimgate serve", timeout_s=timeout_s), url
