"""The one place that composes the planner and a backend.

Per (user, document) session, a new request supersedes the one in flight: the old one's
cancel token is set, so its generation stops before its next token and its stream ends
cleanly. Planning is serialized (the planner's sessions are plain dicts). Generation runs on
the main thread when a `MainThreadRunner` is given (servers: see backend/main_thread.py for
why), warm-ups in chunks that yield to typing (gateway/warmups.py), else in the caller's thread;
the backend serializes compute either way.
"""
from __future__ import annotations

import threading
import time
from typing import Iterator

from backend.base import Backend, CancelToken, Finished, SamplingParams, StreamEvent, last_finished
from backend.main_thread import MainThreadRunner
from efim.planner import EditorState, EfimPlanner
from gateway.warmups import is_warmup, order_key, run_chunked


class CompletionService:
    def __init__(self, backend: Backend, planner: EfimPlanner, runner: MainThreadRunner | None = None) -> None:
        self.backend = backend
        self.planner = planner
        self.runner = runner
        self._lock = threading.Lock()
        self._inflight: dict[tuple[str, str], CancelToken] = {}

    def start(self, state: EditorState, sampling: SamplingParams) -> tuple[Iterator[StreamEvent], CancelToken]:
        """Plan now (cancelling the session's previous request); return the event stream."""
        key = (state.user_id, state.document_id)
        cancel = CancelToken()
        with self._lock:
            previous = self._inflight.get(key)
            if previous is not None:
                previous.cancel()
            self._inflight[key] = cancel
            plan = self.planner.plan(state, sampling)
        return self._run(key, plan, cancel), cancel

    def _run(self, key, plan, cancel: CancelToken) -> Iterator[StreamEvent]:
        try:
            if self.runner is None:
                yield from self.backend.generate(plan, cancel)
            elif is_warmup(plan) and getattr(self.backend, "chunked_warmups", False):
                key = order_key(time.monotonic(), warmup=True)
                yield from run_chunked(plan, lambda p: self.runner.submit(lambda: self.backend.generate(p, cancel),
                                                                          priority=key), lambda: cancel.cancelled)
            else:
                yield from self.runner.submit(lambda: self.backend.generate(plan, cancel),
                                              priority=order_key(time.monotonic(), warmup=False))
        finally:
            with self._lock:
                if self._inflight.get(key) is cancel:
                    del self._inflight[key]

    def complete(self, state: EditorState, sampling: SamplingParams) -> Finished:
        events, _ = self.start(state, sampling)
        return last_finished(events)
