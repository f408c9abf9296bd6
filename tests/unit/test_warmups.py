"""Warm-ups yield to typing in the gateway: chunked prefixes at low priority on the main thread."""
import threading
import time

from backend.base import Finished, FimPlan, SamplingParams, UsageReport
from backend.main_thread import MainThreadRunner
from gateway.warmups import TYPING, WARMUP, chunk_ends, is_warmup, run_chunked


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
        yield Finished("", UsageReport(prompt_tokens=len(p.prompt_ids), prefix_cached_tokens=cached,
                                       prefilled_tokens=len(p.prompt_ids) - cached))

    (done,) = list(run_chunked(plan, run, lambda: False))
    assert seen == [64, 128, 150]
    assert done.usage.prompt_tokens == 150 and done.usage.prefix_cached_tokens == 0
    assert done.usage.prefilled_tokens == 64 + 65 + 23  # each chunk re-runs its last cached token
    stopped = list(run_chunked(plan, run, lambda: True))
    assert len(stopped) == 1 and seen[-1] == 64  # cancelled: no more chunks


def test_typing_jumps_ahead_of_queued_warmup_chunks():
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

    streams = [runner.submit(job("warm-1", wait=True), priority=WARMUP)]
    worker = threading.Thread(target=runner.serve_forever, kwargs={"until": lambda: len(order) == 3})
    worker.start()  # (any thread may serve in a test; servers use the main thread)
    time.sleep(0.3)  # warm-1 is running
    streams.append(runner.submit(job("warm-2"), priority=WARMUP))
    streams.append(runner.submit(job("keystroke"), priority=TYPING))
    release.set()
    for s in streams:
        list(s)
    worker.join(5)
    assert order == ["warm-1", "keystroke", "warm-2"]
