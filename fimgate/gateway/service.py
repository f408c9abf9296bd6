"""The one place that composes the planner and a backend, and the one path from a request to
the text an editor shows, for every front end (HTTP, LSP, `fimgate complete`, benchmarks):

    start(state, sampling, shape)
      shape: single- or multi-line (the code around the cursor decides unless the client does);
             a single line stops at its newline
      plan:  the EFIM planner (cancelling the session's request in flight)
      run:   the backend, on the main-thread runner where there is one
      show:  StreamTidy: each streamed piece is text no continuation can take back, and the
             Finished text is tidy(whole) - streamed and plain answers are the same text;
             once nothing more can be shown (a multi-line suggestion's block ended), decoding
             stops there (CancelToken.enough) instead of running on to max_tokens
      type-through: a request whose text typed since the session's last suggestion is that
             suggestion's beginning gets its rest without a model call (gateway/type_through.py)
      first window: a key at a place whose prompt is not cached yet is answered from a short
             window while the full one prefills behind it (gateway/first_window.py)

Per (user, document) session, a new request supersedes the one in flight: the old one's
cancel token is set, so its generation stops before its next token and its stream ends
cleanly. Planning is serialized (the planner's sessions are plain dicts). Compute runs on the
main thread when a `MainThreadRunner` is given (servers: see fimgate/backend/main_thread.py for
why): the embedded engine runs its batching loop there (fimgate/backend/embedded/scheduler.py:
requests together, typing's prefill before warm-ups'); a backend that does not batch runs each
request as a job there, a warm-up whole, in the order of fimgate/backend/urgency.py.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Iterator

from fimgate.backend.base import Backend, CancelToken, Finished, SamplingParams, StreamEvent, TextDelta, last_finished
from fimgate.backend.main_thread import MainThreadRunner
from fimgate.backend.urgency import is_warmup, order_key
from fimgate.efim.languages import language_of
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.postprocess import FENCED_LANGUAGES, StreamTidy, at_line_end, between_statements, wants_multiline
from fimgate.efim.postprocess import tidy as shown_at
from fimgate.gateway.first_window import FirstWindow
from fimgate.gateway.request_log import RequestLog
from fimgate.gateway.type_through import TypeThrough


@dataclass(frozen=True)
class Shape:
    """How a raw completion becomes what an editor shows."""

    multiline: bool | None = None  # None: decided by the code around the cursor
    raw: bool = False  # the model's text as it is: no line rule, no clean-up
    min_indent: int | None = None  # lines indented less end a suggestion (llama.cpp's n_indent)


@dataclass
class _InFlight:
    cancel: CancelToken
    place: float  # its place in line (fimgate/backend/urgency.py: order_key)
    warmup: bool


class CompletionService:
    def __init__(
        self,
        backend: Backend,
        planner: EfimPlanner,
        runner: MainThreadRunner | None = None,
        request_timeout_s: float | None = None,
        stop_when_shown: bool = True,
        type_through: bool = True,
        request_log: RequestLog | None = None,
        first_window: FirstWindow | None = None,
    ) -> None:
        self.backend = backend
        self.planner = planner
        self._runner = None
        self.runner = runner
        self.request_timeout_s = request_timeout_s  # a request still running then is cancelled
        self.stop_when_shown = stop_when_shown  # stop decoding once nothing more can be shown (False: A/B only)
        self._lock = threading.Lock()
        self._inflight: dict[tuple[str, str], _InFlight] = {}
        self.type_through = TypeThrough() if type_through else None  # False: A/B only
        self.request_log = request_log  # gateway/request_log.py: a line per request, no text
        self.first_window = first_window  # None: every key runs the full window

    @property
    def runner(self) -> MainThreadRunner | None:
        return self._runner

    @runner.setter
    def runner(self, runner: MainThreadRunner | None) -> None:
        """Compute runs on `runner`'s thread: a batching engine runs its loop there, requests
        wait in their own threads; anything else runs whole jobs there, one at a time."""
        self._runner = runner
        if runner is not None and getattr(self.backend, "batches", False):
            self.backend.drive_on(runner)

    def start(
        self, state: EditorState, sampling: SamplingParams, shape: Shape = Shape()
    ) -> tuple[Iterator[StreamEvent], CancelToken]:
        """Plan now (cancelling the session's previous request); return the event stream of the
        text as shown. A request that supersedes the session's request in flight (a warm-up, or a
        keystroke's not yet finished) takes its place in line when that is earlier: the person's
        next key does the work the superseded one had begun."""
        arrived = time.monotonic()
        asked = sampling  # type-through compares what the client asked, not the stop the place adds
        multiline = paragraph = False
        language = language_of(state.path, state.language)
        fences = language not in FENCED_LANGUAGES
        if not shape.raw and sampling.max_tokens > 0:
            multiline = shape.multiline
            if multiline is None:
                multiline = wants_multiline(state.text, state.cursor, language)
            paragraph = multiline and between_statements(state.text, state.cursor, language)
            # one line ends at its newline; at the end of a line of code the next line may come
            # (StreamTidy says when it is done, and decoding stops there)
            if not multiline and not at_line_end(state.text, state.cursor) and "\n" not in sampling.stop:
                sampling = replace(sampling, stop=sampling.stop + ("\n",))
        with self._lock:
            if not state.document_id:  # no file named: the planner finds the session by the text
                state = replace(state, document_id=self.planner.document_for(state))
            session = (state.user_id, state.document_id)
            typing = not shape.raw and sampling.max_tokens > 0
            quick = None
            if typing and self.type_through:

                def here(rest: str) -> str:
                    cut = {"min_indent": shape.min_indent or 0, "fences": fences, "paragraph": paragraph}
                    return shown_at(rest, state.text, state.cursor, multiline, **cut)

                quick = self.type_through.answer(session, state, asked, here)
            if quick is not None:
                previous = self._inflight.pop(session, None)
                if previous is not None:
                    previous.cancel.cancel()
                return self._logged(quick, session, "type_through"), CancelToken()
            plan = self.planner.plan(state, sampling)
            warmup = is_warmup(plan)
            full = plan
            if typing and not warmup and self.first_window is not None:
                plan = self.first_window.plan(session, state, sampling, plan)
            elif warmup and not shape.raw and self.first_window is not None:
                plan = self.first_window.warm(state, sampling, plan)
            place = order_key(arrived, warmup)
            previous = self._inflight.get(session)
            if previous is not None:  # it keeps the place in line of what it supersedes, when earlier:
                previous.cancel.cancel()  # a person whose keys keep superseding an unfinished prefill
                place = min(place, previous.place)  # (or warm-up) is not sent to the back each time
            deadline = None if self.request_timeout_s is None else arrived + self.request_timeout_s
            job = self._inflight[session] = _InFlight(CancelToken(deadline), place, warmup)
        events = self._run(session, plan, job)
        if not shape.raw:
            tidy = StreamTidy(state.text, state.cursor, multiline, shape.min_indent or 0, fences, paragraph)
            events = _shown(events, tidy, job.cancel if self.stop_when_shown else None)
            if typing and self.type_through is not None:
                events = _remembered(events, self.type_through, session, state, asked)
        kind = "warmup" if warmup else "raw" if not typing else "typing" if plan is full else "first_window"
        return self._logged(events, session, kind), job.cancel

    def _logged(self, events: Iterator[StreamEvent], session: tuple[str, str], kind: str) -> Iterator[StreamEvent]:
        return events if self.request_log is None else self.request_log.watch(events, session, kind)

    def cancel_all(self) -> None:
        """Cancel every request in flight (shutdown): each stops before its next token."""
        with self._lock:
            for job in self._inflight.values():
                job.cancel.cancel()
        if self.first_window is not None:
            self.first_window.cancel_all()

    def _run(self, session, plan, job: _InFlight) -> Iterator[StreamEvent]:
        cancel = job.cancel
        try:
            if getattr(self.backend, "batches", False):  # it schedules (and places on the runner) itself
                yield from self.backend.generate(plan, cancel, priority=job.place)
            elif self.runner is None:
                yield from self.backend.generate(plan, cancel)
            else:
                yield from self.runner.submit(lambda: self.backend.generate(plan, cancel), priority=job.place)
        finally:
            with self._lock:
                if self._inflight.get(session) is job:
                    del self._inflight[session]

    def complete(self, state: EditorState, sampling: SamplingParams, shape: Shape = Shape()) -> Finished:
        events, _ = self.start(state, sampling, shape)
        return last_finished(events)


def _remembered(events: Iterator[StreamEvent], tt: TypeThrough, session, state: EditorState, sampling) -> Iterator[StreamEvent]:
    """The events; a suggestion that ended by itself (not cut by max_tokens or the time budget:
    the model would go on past the cut) is remembered for type-through."""
    for ev in events:
        if isinstance(ev, Finished) and ev.usage.finish_reason == "stop":
            tt.remember(session, state, sampling, ev.text)
        yield ev


def _shown(events: Iterator[StreamEvent], tidy: StreamTidy, cancel: CancelToken | None) -> Iterator[StreamEvent]:
    """The text as shown; with `cancel`, decoding stops once nothing more can be shown."""
    for ev in events:
        if isinstance(ev, TextDelta):
            piece = tidy.feed(ev.text)
            if cancel is not None and tidy.done:
                cancel.enough()
            if piece:
                yield TextDelta(piece)
        elif isinstance(ev, Finished):
            rest = tidy.finish(ev.text)
            if rest:
                yield TextDelta(rest)
            yield Finished(tidy.sent, ev.usage)
        else:
            yield ev  # (Alternatives: each a token's text within its line, as the next request shows it)
