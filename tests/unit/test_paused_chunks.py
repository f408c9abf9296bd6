"""A prefill chunk runs a layer at a time: a keystroke that arrives while a warm-up's chunk runs
is served after the layer running then, not after the whole chunk, and the chunk then goes on
from that layer (nothing runs twice); a request cancelled mid-chunk stops within a layer. The
compute here is a stand-in that records what ran (the real model's layers:
tests/unit/test_llama_step.py's forward_by_layer test; the engine: tests/integration/test_batching.py)."""

import contextlib
import threading
import time

import torch

from fimgate.backend.base import CancelToken
from fimgate.backend.embedded.scheduler import BatchScheduler, PrefillWork, StepWork
from fimgate.backend.urgency import BACKGROUND

LAYERS = 24


class _Recorded:
    num_layers = LAYERS

    def __init__(self):
        self.ran: list[str] = []
        self.at_layer: dict[int, callable] = {}  # run once when the warm-up's chunk reaches that layer

    def prefill_by_layer(self, work, end):
        for i in range(LAYERS):
            self.ran.append(f"layer {i} of [{work.done}, {end})")
            if i in self.at_layer:
                self.at_layer.pop(i)()
            yield
        return torch.zeros(1)

    def run_steps(self, works):
        self.ran.append("step")
        return [torch.zeros(1) for _ in works]

    def free_slots(self):
        return 4

    def stoppable_steps(self):
        return contextlib.nullcontext(None)


class _Idle:  # a runner that runs nothing: the test iterates the loop itself
    stopped = False

    def submit(self, fn, priority=0.0):
        pass


def _warmup(tokens: int, got: list):
    got.append((yield PrefillWork(list(range(tokens)), list(range(tokens)), None)))


def _key(got: list):
    got.append((yield StepWork(1, 0, None)))


def _submit(
    sched: BatchScheduler, coro, cancel: CancelToken, priority: float, warmup: bool = False, owner=None, prompt=()
) -> threading.Thread:
    waiting = sched.state()["waiting"]
    reader = threading.Thread(target=lambda: list(sched.run(coro, cancel, priority, warmup, owner, tuple(prompt))))
    reader.start()
    while sched.state()["waiting"] == waiting:
        time.sleep(0.001)
    return reader


def _drain(sched: BatchScheduler) -> None:
    for _ in range(1000):
        if not sched.has_work():
            return
        sched.iterate()
    raise AssertionError("the loop never finished")


def test_a_key_during_a_warmups_chunk_waits_one_layer_and_the_chunk_goes_on_where_it_stopped():
    compute = _Recorded()
    sched = BatchScheduler(compute, threading.Lock())
    sched.drive_on(_Idle())
    warm, key = [], []
    threads = [_submit(sched, _warmup(100, warm), CancelToken(), BACKGROUND, warmup=True)]
    compute.at_layer[3] = lambda: threads.append(_submit(sched, _key(key), CancelToken(), 1.0))
    _drain(sched)
    for t in threads:
        t.join(10)
    chunk = [f"layer {i} of [0, 64)" for i in range(LAYERS)]  # (a background prefill's chunks are never the alone size)
    assert compute.ran[:5] == chunk[:4] + ["step"]  # the key ran after layer 3, not after layer 23
    assert compute.ran[5:] == chunk[4:] + [f"layer {i} of [64, 100)" for i in range(LAYERS)]  # nothing ran twice
    assert len(key) == 1 and len(warm) == 1 and isinstance(warm[0], torch.Tensor)
    assert sched.paused_chunks == 1


def test_a_less_urgent_arrival_does_not_pause_a_chunk():
    compute = _Recorded()
    sched = BatchScheduler(compute, threading.Lock())
    sched.drive_on(_Idle())
    first, later = [], []
    threads = [_submit(sched, _warmup(64, first), CancelToken(), 1.0)]
    compute.at_layer[3] = lambda: threads.append(_submit(sched, _key(later), CancelToken(), 2.0))
    _drain(sched)
    for t in threads:
        t.join(10)
    assert compute.ran == [f"layer {i} of [0, 64)" for i in range(LAYERS)] + ["step"]
    assert sched.paused_chunks == 0


def _ann_cancelled_at_layer_5(then=None, later: dict | None = None):
    """Ann's 64-token prefill (one chunk), cancelled while its layer 5 runs; at that moment
    then(submit) queues what came with the cancel (submit(coro, priority, owner, prompt, cancel=None)),
    and later[i](submit) at layer i. What ran, and what Ann's request was sent."""
    compute = _Recorded()
    sched = BatchScheduler(compute, threading.Lock())
    sched.drive_on(_Idle())
    got, cancel = [], CancelToken()
    threads = [_submit(sched, _warmup(64, got), cancel, 1.0, owner="ann", prompt=range(64))]

    def submit(coro, priority, owner, prompt, token=None):
        threads.append(_submit(sched, coro, token or CancelToken(), priority, owner=owner, prompt=prompt))

    def at_5():
        cancel.cancel()
        if then:
            then(submit)

    compute.at_layer[5] = at_5
    compute.at_layer.update({i: (lambda f=f: f(submit)) for i, f in (later or {}).items()})
    _drain(sched)
    for t in threads:
        t.join(10)
    return compute, got


CHUNK = [f"layer {i} of [0, 64)" for i in range(LAYERS)]


def test_a_request_cancelled_mid_chunk_stops_within_a_layer_when_another_user_waits():
    key = []
    ran, got = _ann_cancelled_at_layer_5(lambda submit: submit(_key(key), 2.0, "bob", range(65)))
    assert ran.ran == CHUNK[:6] + ["step"]
    assert got == [None]  # told it was cancelled: its chunk's positions are not counted done


def test_a_cancelled_chunk_runs_to_its_end_for_the_same_persons_next_key_which_waits_for_it():
    """The person's next key at the same place: its prompt shares the chunk's tokens, so the
    chunk is not dropped (it would be computed again for that key), and the key is not admitted
    beside it (it would claim another slot and compute them again there)."""
    key = []
    ran, got = _ann_cancelled_at_layer_5(lambda submit: submit(_key(key), 2.0, "ann", [*range(63), 99, 100]))
    assert ran.ran == CHUNK + ["step"]
    assert len(got) == 1 and isinstance(got[0], torch.Tensor)  # its positions counted done: the slot keeps them
    assert len(key) == 1


def test_a_cancelled_chunk_the_next_request_shares_little_of_stops_within_a_layer():
    key = []
    ran, got = _ann_cancelled_at_layer_5(lambda submit: submit(_key(key), 2.0, "ann", [*range(31), 7, 7]))
    assert ran.ran == CHUNK[:6] + ["step"]
    assert got == [None]


def test_a_more_urgent_request_still_pauses_a_chunk_finished_for_an_heir():
    """The chunk runs at its heir's urgency: another person's key that came before the heir
    is served between two of its layers."""
    key, other = [], []

    def bobs_key_then_anns(submit):
        submit(_key(other), 1.5, "bob", range(9))
        submit(_key(key), 2.0, "ann", range(65))

    ran, got = _ann_cancelled_at_layer_5(bobs_key_then_anns)
    assert ran.ran == CHUNK[:6] + ["step"] + CHUNK[6:] + ["step"]
    assert len(key) == len(other) == 1 and isinstance(got[0], torch.Tensor)


def test_a_request_cancelled_with_nobody_waiting_runs_its_chunk_on():
    """Nobody is held by it, and the person's next request (sent just after the cancel) may
    reuse it; a request that comes and is not its heir stops it within a layer (above)."""
    ran, _ = _ann_cancelled_at_layer_5()
    assert ran.ran == CHUNK


def test_a_cancelled_heir_waiting_does_not_stop_the_chunk_before_the_next_one_comes():
    """Keys faster than the chunk: the heir is cancelled in turn while it waits, and the key after
    it (its own heir) arrives a moment later; the chunk runs on for that one."""
    keys, heir_cancel = [[], []], CancelToken()
    ran, _ = _ann_cancelled_at_layer_5(
        lambda submit: submit(_key(keys[0]), 2.0, "ann", range(65), heir_cancel),
        later={
            9: lambda submit: heir_cancel.cancel(),  # the key after it
            11: lambda submit: submit(_key(keys[1]), 3.0, "ann", range(66)),  # and its request
        },
    )
    assert ran.ran == CHUNK + ["step"]
    assert keys[0] == [None] and len(keys[1]) == 1 and isinstance(keys[1][0], torch.Tensor)
