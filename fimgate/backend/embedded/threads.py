"""Compute threads that fit what the machine can give now.

torch and the C kernels split every step across `torch.get_num_threads()` OpenMP threads and
wait at a barrier for the slowest. Where another process keeps a core busy (a compiler, a test
run, the editor), the thread on that core runs a fraction of the time and every step waits for
it: on 2 cores, one busy loop beside the engine made a request ~20x slower. So before each
request the governor looks at what the other processes used since its last look, at least
MIN_INTERVAL_S ago (/proc/stat minus this process's own time, /proc/self/stat), and runs on the
cores left free:

    threads = clamp(round-down(usable - others_busy + SLACK), 1, usable)

`usable` is what this process may use at all: its CPU affinity, capped by a cgroup CPU quota.
A pinned count (`--threads N`) is kept as it is. A prefill that began on fewer threads than
`usable` looks again between its layers (refit, at least REFIT_INTERVAL_S apart) and takes the
cores freed since: a warm-up after a cursor move starts while the editor still draws the move,
and the editor then idles for the seconds the prefill takes. It never gives one back
mid-prefill. `state()` says how many threads run and why (/health, /metrics).
"""

from __future__ import annotations

import math
import os
import time

import torch

SLACK = 0.35  # others using up to 0.35 of a core still leave it to us (editors idle at a few %)
MIN_INTERVAL_S = 0.05  # a shorter look says little (clock ticks are 10 ms)
REFIT_INTERVAL_S = 0.2  # a look between a prefill's layers spans at least this


def usable_cores() -> int:
    """Cores this process may run on: its affinity, capped by a cgroup v2/v1 CPU quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _cgroup_quota()
    return max(1, min(cores, math.ceil(quota))) if quota else max(1, cores)


def _cgroup_quota() -> float | None:
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            limit, period = f.read().split()[:2]
        return None if limit == "max" else int(limit) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            limit = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period = int(f.read())
        return None if limit <= 0 else limit / period
    except (OSError, ValueError):
        return None


class CpuLoad:
    """Cores' worth of CPU time other processes used between two looks."""

    def __init__(self) -> None:
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._last = self._sample()

    def _sample(self) -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:]]
            with open("/proc/self/stat") as f:
                mine = f.read().rsplit(")", 1)[1].split()
        except (OSError, ValueError, IndexError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        busy = sum(fields[:8]) - idle  # user nice system idle iowait irq softirq steal
        ours = int(mine[11]) + int(mine[12])  # utime, stime of every thread of this process
        return time.monotonic(), busy / self._tick, ours / self._tick

    def others_busy(self, min_interval_s: float = MIN_INTERVAL_S) -> float | None:
        """Cores' worth used by other processes since the last call; None when too soon to say."""
        now = self._sample()
        if now is None or self._last is None or now[0] - self._last[0] < min_interval_s:
            return None
        (t0, busy0, ours0), (t1, busy1, ours1) = self._last, now
        self._last = now
        return max(0.0, ((busy1 - busy0) - (ours1 - ours0)) / (t1 - t0))


class ThreadGovernor:
    def __init__(self, pinned: int | None = None) -> None:
        self.usable = usable_cores()
        self.pinned = pinned
        self._load = CpuLoad()
        self.others = 0.0
        self.threads = pinned or self.usable
        self.reason = f"pinned by --threads {pinned}" if pinned else f"{self.usable} usable cores, none busy"
        torch.set_num_threads(self.threads)

    def choose(self) -> int:
        """The thread count for the next request (set in torch, which the C kernels follow)."""
        if self.pinned:
            if torch.get_num_threads() != self.threads:  # another engine in this process set its own
                torch.set_num_threads(self.threads)
            return self.threads
        return self._fit(self._load.others_busy(), at_least=1)

    def refit(self) -> int:
        """Between a prefill's layers: take the cores that freed up since the request began (a
        warm-up begun while the editor drew the cursor move), and never give any back mid-prefill:
        on a quiet machine a prefill then runs on one thread count throughout, so its numbers
        are those of the same prefill run again."""
        if self.pinned or self.threads >= self.usable:
            return self.threads
        return self._fit(self._load.others_busy(REFIT_INTERVAL_S), at_least=self.threads)

    def _fit(self, others: float | None, at_least: int) -> int:
        """The cores left by `others` (None: too soon to say, keep), set in torch."""
        if others is None:
            return self.threads
        self.others = others
        threads = max(at_least, min(self.usable, int(self.usable - others + SLACK)))
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        self.threads = threads
        self.reason = f"{self.usable} usable cores, {others:.1f} busy with other processes"
        return threads

    def state(self) -> dict:
        return {
            "threads": self.threads,
            "usable_cores": self.usable,
            "others_busy_cores": round(self.others, 2),
            "why": self.reason,
        }
