"""The gateway's line on the main-thread runner: warm-ups yield to typing for WARMUP_YIELD_S;
a person's key that supersedes their own warm-up takes the warm-up's place in line."""

import threading
import time

import pytest

from fimgate.backend.base import FimPlan, Finished, SamplingParams, UsageReport
from fimgate.backend.main_thread import MainThreadRunner
from fimgate.backend.urgency import WARMUP_YIELD_S
from fimgate.efim.planner import EditorState
from fimgate.gateway import service as service_module
from fimgate.gateway.service import CompletionService


class Planner:
    def plan(self, state, sampling):
        return FimPlan(prompt_ids=tuple(range(10)), user_id=state.user_id, session_id=state.document_id, sampling=sampling)


class Backend:
    model_name = "stand-in"
    context_tokens = 2048

    def __init__(self, gate: threading.Event):
        self.gate = gate
        self.busy = threading.Event()
        self.ran: list[tuple[str, int]] = []

    def generate(self, plan, cancel=None):
        if not self.busy.is_set():
            self.busy.set()
            self.gate.wait(5)  # the first job holds the runner while the others queue
        if cancel is not None and cancel.cancelled:
            return  # (the engine checks its token before every token)
        self.ran.append((plan.user_id, plan.sampling.max_tokens))
        yield Finished("", UsageReport(prompt_tokens=len(plan.prompt_ids)))


@pytest.mark.parametrize(
    "bob_at,ann_types,expected",
    [
        (0.1, False, [("blocker", 1), ("bob", 1), ("ann", 0)]),  # bob types within the warm-up's yield: first
        (WARMUP_YIELD_S + 0.1, False, [("blocker", 1), ("ann", 0), ("bob", 1)]),  # after it: the warm-up's turn
        (WARMUP_YIELD_S + 0.1, True, [("blocker", 1), ("ann", 1), ("bob", 1)]),  # ann's key takes its place
    ],
)
def test_place_in_line(monkeypatch, bob_at, ann_types, expected):
    clock = [100.0]
    monkeypatch.setattr(service_module.time, "monotonic", lambda: clock[0])
    gate = threading.Event()
    backend = Backend(gate)
    runner = MainThreadRunner()
    svc = CompletionService(backend, Planner(), runner)
    worker = threading.Thread(target=runner.serve_forever)
    worker.start()
    streams = []

    def ask(user, doc, max_tokens, at):
        clock[0] = at
        events, _ = svc.start(EditorState(user, doc, "x", 1), SamplingParams(max_tokens=max_tokens))
        t = threading.Thread(target=lambda: list(events))  # each editor reads its own stream
        t.start()
        streams.append(t)

    ask("blocker", "z.py", 1, 100.0)
    assert backend.busy.wait(5)
    ask("ann", "a.py", 0, 100.1)  # opens a.py: a warm-up, in line at 100.1 + WARMUP_YIELD_S
    ask("bob", "b.py", 1, 100.1 + bob_at)
    if ann_types:
        ask("ann", "a.py", 1, 100.1 + bob_at + 0.1)  # ann types in a.py, after bob: her warm-up is cancelled
    time.sleep(0.3)  # every job is queued
    gate.set()
    for t in streams:
        t.join(5)
    runner.stop()
    worker.join(5)
    assert backend.ran == expected
