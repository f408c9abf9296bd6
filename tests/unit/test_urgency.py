"""Warm-ups yield to typing (fimgate/backend/urgency.py): the order the gateway's runner serves
jobs in for a backend that does not batch; the embedded scheduler prefills by the same key."""

import threading
import time

from fimgate.backend.base import FimPlan, SamplingParams
from fimgate.backend.main_thread import MainThreadRunner
from fimgate.backend.urgency import WARMUP_YIELD_S, is_warmup, order_key
from fimgate.bench.replay.simulate import chunk_ends


def test_a_warmup_is_a_request_for_no_tokens_or_one_marked_so():
    assert is_warmup(FimPlan(prompt_ids=(1,), user_id="u", session_id="d", sampling=SamplingParams(max_tokens=0)))
    assert is_warmup(FimPlan(prompt_ids=(1,), user_id="u", session_id="d", prewarm=True))
    assert not is_warmup(FimPlan(prompt_ids=(1,), user_id="u", session_id="d"))


def test_serial_replay_chunks_cover_the_prompt_in_growing_prefixes():
    assert chunk_ends(130, 64) == [64, 128, 130]
    assert chunk_ends(64, 64) == [64]
    assert chunk_ends(5, 64) == [5]


def _served_order(jobs: list[tuple[str, float]]) -> list[str]:
    """Submit a long warm-up chunk (key 0 + yield), then `jobs` (name, key) while it runs."""
    runner = MainThreadRunner()
    order = []
    release = threading.Event()

    def job(name, wait=False):
        def make():
            if wait:
                release.wait(5)
            order.append(name)
            yield name

        return make

    t0 = 100.0  # arrival times are explicit: the runner orders by key alone
    streams = [runner.submit(job("warm-1", wait=True), priority=order_key(t0, warmup=True))]
    worker = threading.Thread(target=runner.serve_forever, kwargs={"until": lambda: len(order) == len(jobs) + 1})
    worker.start()  # (any thread may serve in a test; servers use the main thread)
    time.sleep(0.3)  # warm-1 is running
    streams += [runner.submit(job(name), priority=order_key(t0 + dt, warmup=name.startswith("warm"))) for name, dt in jobs]
    release.set()
    for s in streams:
        list(s)
    worker.join(5)
    return order


def test_typing_within_the_yield_jumps_ahead_of_queued_warmup_chunks():
    # warm-2 is the same warm-up's next chunk (arrived with it at t0); the key comes 0.1 s later
    assert _served_order([("warm-2", 0.0), ("keystroke", 0.1)]) == ["warm-1", "keystroke", "warm-2"]


def test_a_warmup_past_its_yield_goes_before_later_typing():
    late = WARMUP_YIELD_S + 0.1
    assert _served_order([("warm-2", 0.0), ("keystroke", late)]) == ["warm-1", "warm-2", "keystroke"]
