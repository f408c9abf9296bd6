"""Compute threads fit to the cores other processes leave free (fimgate/backend/embedded/threads.py)."""

import subprocess
import sys
import time

import torch

from fimgate.backend.embedded.threads import CpuLoad, ThreadGovernor, usable_cores


class _Load:
    def __init__(self, values):
        self.values = list(values)

    def others_busy(self):
        return self.values.pop(0)


def test_threads_follow_the_cores_left_free_and_a_pinned_count_stays(monkeypatch):
    before = torch.get_num_threads()
    try:
        g = ThreadGovernor()
        g.usable = 4
        g._load = _Load([0.1, 1.0, 2.6, None, 3.9, 0.0])
        assert [g.choose() for _ in range(6)] == [4, 3, 1, 1, 1, 4]  # None: too soon to say, keep
        assert torch.get_num_threads() == 4
        assert "0.0 busy" in g.state()["why"]
        pinned = ThreadGovernor(pinned=3)
        pinned._load = _Load([3.0])
        assert pinned.choose() == 3 and "pinned" in pinned.state()["why"]
    finally:
        torch.set_num_threads(before)


def test_a_busy_loop_beside_us_is_seen():
    assert 1 <= usable_cores()
    load = CpuLoad()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.6)
        seen = load.others_busy()
    finally:
        busy.kill()
        busy.wait()
    assert seen is not None and seen >= 0.6, seen  # one core's worth, less what the scheduler shared
