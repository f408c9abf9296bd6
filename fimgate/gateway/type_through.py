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

Memory is bounded in bytes whatever a client sends: a session keeps digests of the text before
and after the cursor (not the text), the suggestion, and all suggestions together hold at most
MAX_CHARS characters (the least recent sessions forgotten first).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterator

from fimgate.backend.base import Finished, SamplingParams, StreamEvent, TextDelta, UsageReport
from fimgate.efim.planner import EditorState

MAX_SESSIONS = 4096
MAX_CHARS = 4 << 20  # characters of suggestions held, all sessions together


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True)
class _Made:
    before_len: int  # the text before the cursor when it was made: its length and digest
    before: bytes
    after: bytes  # digest of the text after the cursor
    sampling: SamplingParams
    text: str


class TypeThrough:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._made: OrderedDict[tuple[str, str], _Made] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()
        self._max = max_sessions

    def remember(self, session: tuple[str, str], state: EditorState, sampling: SamplingParams, text: str) -> None:
        """The session's suggestion `text`, complete, made for `state`."""
        if sampling.temperature != 0 or not text or len(text) > MAX_CHARS:
            self.forget(session)
            return
        before = state.text[: state.cursor]
        made = _Made(len(before), _digest(before), _digest(state.text[state.cursor :]), sampling, text)
        with self._lock:
            self._pop(session)
            self._made[session] = made
            self._chars += len(text)
            while len(self._made) > self._max or self._chars > MAX_CHARS:
                self._pop(next(iter(self._made)))

    def _pop(self, session: tuple[str, str]) -> None:
        made = self._made.pop(session, None)
        if made is not None:
            self._chars -= len(made.text)

    @property
    def held_chars(self) -> int:
        return self._chars

    def forget(self, session: tuple[str, str]) -> None:
        with self._lock:
            self._pop(session)

    def answer(
        self, session: tuple[str, str], state: EditorState, sampling: SamplingParams, shown: Callable[[str], str] = str
    ) -> Iterator[StreamEvent] | None:
        """The rest of the session's last suggestion if the person typed its beginning, as the new
        place shows it (`shown`: a multi-line rest ends where the block the cursor is now in
        ends), else None."""
        with self._lock:
            m = self._made.get(session)
        if m is None or sampling != m.sampling or state.cursor <= m.before_len:
            return None
        typed = state.text[m.before_len : state.cursor]
        if len(typed) >= len(m.text) or not m.text.startswith(typed):
            return None  # (checked first: the digests below read the whole document)
        if _digest(state.text[state.cursor :]) != m.after or _digest(state.text[: m.before_len]) != m.before:
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
