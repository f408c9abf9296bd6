"""Warm-ups yield to typing in the gateway: chunked prefixes at low priority on the main thread."""

import threading
import time

from fimgate.backend.base import FimPlan, Finished, SamplingParams, UsageReport
from fimgate.backend.main_thread import MainThreadRunner
from fimgate.gateway.warmups import WARMUP_YIELD_S, chunk_ends, is_warmup, order_key, run_chunked


def test_chunks_cover_the_prompt_in_growing_prefixes():
    assert chunk_ends(130, 64) == [64, 128, 130]
    assert chunk_ends(64, 64) == [64]
    assert chunk_ends(5, 64) == [5]


def test_a_chunked_warmup_reports_every_chunks_prefill():
    plan = FimPlan(prompt_ids=tuple(range(150)), user_id="u", session_id="d", sampling=SamplingParams(max_tokens=0))
    assert is_warmup(plan) and not is_warmup(FimPlan(prompt_ids=(1,), user_id="u", session_id="d"))
    seen = []

    def run(p):
        seen.append(len(p.prompt_ids))
        cached = 0 if len(seen) == 1 else seen[-2] - 1
        yield Finished(
            "",
            UsageReport(
                prompt_tokens=len(p.prompt_ids), prefix_cached_tokens=cached, prefilled_tokens=len(p.prompt_ids) - cached
            ),
        )

    (done,) = list(run_chunked(plan, run, lambda: False))
    assert seen == [64, 128, 150]
    assert done.usage.prompt_tokens == 150 and done.usage.prefix_cached_tokens == 0
    assert done.usage.prefilled_tokens == 64 + 65 + 23  # each chunk re-runs its last cached token
    stopped = list(run_chunked(plan, run, lambda: True))
    assert len(stopped) == 1 and seen[-1] == 64  # cancelled: no more chunks


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
