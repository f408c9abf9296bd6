"""The one place that composes the planner and a backend.

Per (user, document) session, a new request supersedes the one in flight: the old one's
cancel token is set, so its generation stops before its next token and its stream ends
cleanly. Planning is serialized (the planner's sessions are plain dicts). Generation runs on
the main thread when a `MainThreadRunner` is given (servers: see fimgate/backend/main_thread.py for
why), warm-ups in chunks that yield to typing (fimgate/gateway/warmups.py), else in the caller's thread;
the backend serializes compute either way.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Iterator

from fimgate.backend.base import Backend, CancelToken, Finished, SamplingParams, StreamEvent, last_finished
from fimgate.backend.main_thread import MainThreadRunner
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.gateway.warmups import is_warmup, order_key, run_chunked


@dataclass
class _InFlight:
    cancel: CancelToken
    place: float  # its place in the runner's line (fimgate/gateway/warmups.py: order_key)
    warmup: bool


class CompletionService:
    def __init__(self, backend: Backend, planner: EfimPlanner, runner: MainThreadRunner | None = None,
                 request_timeout_s: float | None = None) -> None:
        self.backend = backend
        self.planner = planner
        self.runner = runner
        self.request_timeout_s = request_timeout_s  # a request still running then is cancelled
        self._lock = threading.Lock()
        self._inflight: dict[tuple[str, str], _InFlight] = {}

    def start(self, state: EditorState, sampling: SamplingParams) -> tuple[Iterator[StreamEvent], CancelToken]:
        """Plan now (cancelling the session's previous request); return the event stream.
        A request that supersedes the session's warm-up takes the warm-up's place in line when
        that is earlier: the person's first key after opening a file does the warm-up's work."""
        session = (state.user_id, state.document_id)
        arrived = time.monotonic()
        with self._lock:
            plan = self.planner.plan(state, sampling)
            warmup = is_warmup(plan)
            place = order_key(arrived, warmup)
            previous = self._inflight.get(session)
            if previous is not None:
                previous.cancel.cancel()
                if previous.warmup:
                    place = min(place, previous.place)
            deadline = None if self.request_timeout_s is None else arrived + self.request_timeout_s
            job = self._inflight[session] = _InFlight(CancelToken(deadline), place, warmup)
        return self._run(session, plan, job), job.cancel

    def cancel_all(self) -> None:
        """Cancel every request in flight (shutdown): each stops before its next token."""
        with self._lock:
            for job in self._inflight.values():
                job.cancel.cancel()

    def _run(self, session, plan, job: _InFlight) -> Iterator[StreamEvent]:
        cancel = job.cancel
        try:
            if self.runner is None:
                yield from self.backend.generate(plan, cancel)
            elif job.warmup and getattr(self.backend, "chunked_warmups", False):
                yield from run_chunked(plan, lambda p: self.runner.submit(lambda: self.backend.generate(p, cancel),
                                                                          priority=job.place), lambda: cancel.cancelled)
            else:
                yield from self.runner.submit(lambda: self.backend.generate(plan, cancel), priority=job.place)
        finally:
            with self._lock:
                if self._inflight.get(session) is job:
                    del self._inflight[session]

    def complete(self, state: EditorState, sampling: SamplingParams) -> Finished:
        events, _ = self.start(state, sampling)
        return last_finished(events)
