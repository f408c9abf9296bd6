"""Server-side type-through: a person typing the first characters of the suggestion they were
just given gets its remainder at once, without a model call.

Per session the service keeps the last complete suggestion and where it was made (the text
before the cursor, the text after it, the sampling). A request whose text after the cursor is the
same, and whose text before it is that place plus a strict beginning of the suggestion, is
answered with the rest, under the same sampling, greedy only, for suggestions that ended by
themselves (one cut by max_tokens or the time budget would go on). It is the suggestion the
person is reading, kept steady as they type it; decoding afresh there gives the same text most of
the time, not always: the typed characters are tokenized differently from how the model produced
them, and greedy decoding can take another branch (tests/integration/test_type_through.py
measures the share). The planner is not asked, so its session still holds the last anchor; the next request the
model serves appends everything typed since, as usual (an EFIM append). Usage says
`type_through: true`. Clients with their own cache (the VS Code extension, llama.vscode) rarely
need it; LSP editors and OpenAI clients ask on every key.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterator

from fimgate.backend.base import Finished, SamplingParams, StreamEvent, TextDelta, UsageReport
from fimgate.efim.planner import EditorState

MAX_SESSIONS = 4096


@dataclass(frozen=True)
class _Made:
    before: str
    after: str
    sampling: SamplingParams
    text: str


class TypeThrough:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._made: OrderedDict[tuple[str, str], _Made] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_sessions

    def remember(self, session: tuple[str, str], state: EditorState, sampling: SamplingParams, text: str) -> None:
        """The session's suggestion `text`, complete, made for `state`."""
        if sampling.temperature != 0 or not text:
            self.forget(session)
            return
        made = _Made(state.text[: state.cursor], state.text[state.cursor :], sampling, text)
        with self._lock:
            self._made[session] = made
            self._made.move_to_end(session)
            while len(self._made) > self._max:
                self._made.popitem(last=False)

    def forget(self, session: tuple[str, str]) -> None:
        with self._lock:
            self._made.pop(session, None)

    def answer(
        self, session: tuple[str, str], state: EditorState, sampling: SamplingParams, shown: Callable[[str], str] = str
    ) -> Iterator[StreamEvent] | None:
        """The rest of the session's last suggestion if the person typed its beginning, as the new
        place shows it (`shown`: a multi-line rest ends where the block the cursor is now in
        ends), else None."""
        with self._lock:
            m = self._made.get(session)
        if m is None or sampling != m.sampling or state.text[state.cursor :] != m.after:
            return None
        before = state.text[: state.cursor]
        if not before.startswith(m.before):
            return None
        typed = before[len(m.before) :]
        if not typed or len(typed) >= len(m.text) or not m.text.startswith(typed):
            return None
        rest = m.text[len(typed) :]
        if shown(rest) != rest:
            return None  # the new place shows less of it: ask the model there
        return _events(rest)


def _events(rest: str) -> Iterator[StreamEvent]:
    t0 = time.perf_counter()
    yield TextDelta(rest)
    ms = (time.perf_counter() - t0) * 1000
    yield Finished(rest, UsageReport(prompt_tokens=0, ttft_ms=ms, total_ms=ms, finish_reason="stop", type_through=True))
