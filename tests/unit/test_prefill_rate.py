"""The engine's prefill rate (fimgate/backend/embedded/prefill_rate.py) is measured on the chunks
the scheduler runs: a chunk's tokens over the time its layers ran - a chunk paused for a key counts
only its own layers, not the key's work - and it turns a prompt's tokens into seconds."""

import threading
import time

from fimgate.backend.base import CancelToken
from fimgate.backend.embedded.prefill_rate import MIN_TOKENS, PrefillRate
from fimgate.backend.embedded.scheduler import BatchScheduler
from fimgate.backend.urgency import BACKGROUND
from tests.unit.test_paused_chunks import LAYERS, _drain, _Idle, _key, _Recorded, _submit, _warmup

LAYER_S = 0.004


class _Slow(_Recorded):
    """Each layer of a chunk takes LAYER_S; a key's step takes 0.2 s."""

    def prefill_by_layer(self, work, end):
        inner = super().prefill_by_layer(work, end)
        while True:
            time.sleep(LAYER_S)
            try:
                next(inner)
            except StopIteration as done:
                return done.value
            yield

    def run_steps(self, works):
        time.sleep(0.2)
        return super().run_steps(works)


def test_a_rate_turns_tokens_into_seconds_once_a_chunk_has_run():
    rate = PrefillRate()
    assert rate.seconds(1000) is None
    rate.add(MIN_TOKENS - 1, 0.001)  # a token or two is the weights' read, not a prompt's rate
    assert rate.seconds(1000) is None
    rate.add(64, 0.5)
    assert rate.seconds(1280) == 10.0
    rate.add(64, 0.25)  # the newest chunk counts most
    assert 6.0 < rate.seconds(1280) < 10.0


def test_the_scheduler_times_its_chunks_without_the_key_that_paused_one():
    compute = _Slow()
    sched = BatchScheduler(compute, threading.Lock())
    sched.drive_on(_Idle())
    warm, key = [], []
    threads = [_submit(sched, _warmup(64, warm), CancelToken(), BACKGROUND, warmup=True)]
    compute.at_layer[3] = lambda: threads.append(_submit(sched, _key(key), CancelToken(), 1.0))
    _drain(sched)
    for t in threads:
        t.join(10)
    assert sched.paused_chunks == 1 and sched.prefill_rate.chunks == 1
    per_layer = sched.prefill_rate.seconds(64) / LAYERS  # one 64-token chunk: its 24 layers, not the 0.2 s step
    assert LAYER_S <= per_layer < LAYER_S + 0.006


def test_a_chunk_cancelled_part_way_is_timed_by_the_layers_it_ran():
    """A server's first prompts are often cancelled before any chunk ends (a file opened, then the
    cursor moved: the first warm-up is superseded): the layers that ran still tell the rate."""
    compute = _Slow()
    sched = BatchScheduler(compute, threading.Lock())
    sched.drive_on(_Idle())
    warm, key, cancel = [], [], CancelToken()

    def supersede():
        cancel.cancel()
        threads.append(_submit(sched, _key(key), CancelToken(), 1.0))

    threads = [_submit(sched, _warmup(64, warm), cancel, 1.0, warmup=True)]
    compute.at_layer[5] = supersede  # while layer 5 runs: 6 of 24 layers ran when the chunk stops
    _drain(sched)
    for t in threads:
        t.join(10)
    assert warm == [None] and len(key) == 1  # the chunk never ended
    per_layer = sched.prefill_rate.seconds(64) / LAYERS
    assert LAYER_S <= per_layer < LAYER_S + 0.006


def test_the_first_chunk_tells_its_rate_while_it_runs():
    rate = PrefillRate()
    rate.running(256, 1.0, share=0.25)  # a quarter of its layers in a second: ~1 s a 64 tokens
    assert rate.seconds(640) == 10.0
    rate.add(64, 0.5)  # once a chunk is timed, that counts
    rate.running(256, 1.0, share=0.01)
    assert rate.seconds(1280) == 10.0
