"""A step nobody will read stops part way: when every request in a batched step is cancelled
while it runs (a person's next key superseded their last suggestion), the scheduler sets the
step's stop flag and each request gets None - the next key's request does not wait for it. A
step that still has one live request runs whole. The compute here is a stand-in whose step
runs until it is released or its flag is set (the real kernel reads the flag before each
layer: tests/unit/test_llama_step.py; the real engine: tests/integration/test_batching.py)."""

import contextlib
import ctypes
import threading
import time

import torch

from fimgate.backend.base import CancelToken
from fimgate.backend.embedded.scheduler import BatchScheduler, StepWork


class _LongStep:
    num_layers = 1

    def __init__(self):
        self.entered = threading.Event()  # a step is running
        self.release = threading.Event()  # let it end normally
        self.flag: ctypes.c_int32 | None = None

    @contextlib.contextmanager
    def stoppable_steps(self):
        self.flag = ctypes.c_int32(0)
        try:
            yield self.flag
        finally:
            self.flag = None

    def run_steps(self, works):
        self.entered.set()
        while not self.release.is_set():
            if self.flag is not None and self.flag.value:
                return None
            time.sleep(0.001)
        return [torch.zeros(1) for _ in works]

    def prefill_by_layer(self, work, end):
        yield
        return torch.zeros(1)

    def free_slots(self):
        return 4


class _Idle:  # a runner that runs nothing: the test's driver thread iterates the loop
    stopped = False

    def submit(self, fn, priority=0.0):
        pass


def _request(replies: list):
    reply = yield StepWork(1, 0, None)
    replies.append(reply)


def _start(n: int):
    compute = _LongStep()
    sched = BatchScheduler(compute, threading.Lock())
    sched.drive_on(_Idle())
    replies = [[] for _ in range(n)]
    cancels = [CancelToken() for _ in range(n)]
    gens = [sched.run(_request(replies[i]), cancels[i], float(i)) for i in range(n)]
    readers = [threading.Thread(target=lambda g=g: list(g)) for g in gens]
    for t in readers:
        t.start()
    while sched.state()["waiting"] < n:
        time.sleep(0.001)

    def drive():
        while sched.has_work():
            sched.iterate()

    driver = threading.Thread(target=drive)
    driver.start()
    assert compute.entered.wait(10)
    return compute, sched, cancels, replies, readers + [driver]


def test_a_step_whose_only_request_is_cancelled_stops_and_answers_none():
    compute, sched, cancels, replies, threads = _start(1)
    cancels[0].cancel()  # the next key: the step stops without being released
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert replies == [[None]] and sched.state()["stopped_steps"] == 1


def test_a_step_with_a_live_request_runs_whole():
    compute, sched, cancels, replies, threads = _start(2)
    cancels[0].cancel()  # one of two people moved on (the hooks run within cancel()); the other still reads the step
    assert compute.flag is not None and compute.flag.value == 0
    compute.release.set()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert all(isinstance(r[0], torch.Tensor) for r in replies) and sched.state()["stopped_steps"] == 0
