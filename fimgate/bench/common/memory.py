"""Resident memory of a process, as the kernel counts it (/proc/PID/status): what `bench engine`
reports beside llama.cpp's, and what the memory tests bound."""

from __future__ import annotations


def rss_bytes(pid: int | str = "self", peak: bool = False) -> int | None:
    """VmRSS (or VmHWM, the peak, with peak=True) in bytes; None where /proc does not say."""
    key = "VmHWM:" if peak else "VmRSS:"
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
