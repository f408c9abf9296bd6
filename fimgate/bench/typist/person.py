"""The accepting typist: a person who types a trace's steps with their real gaps and takes right
suggestions.

Ghost text is on screen from the moment its answer arrives (`show`) while the document stays the
one it was asked for, and it stays there while the person types along it (VS Code keeps showing the
rest of a suggestion whose first characters are typed). Once it has been on screen `reaction_ms`
and the person's next text (the keys up to their next move, deletion or paste) starts with some of
it (fimgate/bench/typist/rule.py), they take it - Tab, or accept-word presses PRESS_MS apart -
and go on from after it: the keys it covered are skipped, and their next step comes as long after
the accept as it came after the last key covered. An answer for a document that has changed since
it was asked is never shown (the editor drops it).

Every edit asks for a suggestion (`Ask`): a key, a deletion, an accept (the editor asks again at the
end of an accepted suggestion) - but a key typed along the suggestion on screen, which the client's
cache of suggestions answers with its rest (fimgate's extension and llama.vscode both keep one). With `warmups`, as
fimgate's extension does, opening a file and a cursor that rests REST_MS after a move pre-warm there.

    key   key  [answer]-----on screen------[Tab]  (keys covered: skipped)   key ...
                          <- reaction_ms ->      <- the gap after the last key covered ->
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from fimgate.bench.typist.rule import VSCODE, Accept, WordRule, accept
from fimgate.bench.typist.script import Step
from fimgate.bench.workloads.context_ring import Ring

PRESS_MS = 150.0  # between two accept-word presses
REST_MS = 150.0  # a cursor still this long after a move is pre-warmed (the extension's MOVE_REST_MS)
UPCOMING_MAX_CHARS = 400
READY_ENTRIES = 32  # the extension's fimgate.cacheEntries


@dataclass(frozen=True)
class Ask:
    """A request for a suggestion at the person's cursor."""

    t_ms: float
    file: str
    text: str
    cursor: int
    version: int  # the document's edit count when asked: an answer for an older one is not shown
    context: tuple = ()
    warmup: bool = False
    after_accept: bool = False
    prefetch: bool = False  # for the place at the end of the suggestion on screen, were it accepted


@dataclass(frozen=True)
class Action:
    """What the person did, for a driver that does it in a real editor."""

    t_ms: float
    step: Step | None  # a step of the trace, or None for an accept
    taken: Accept | None = None  # an accept: what was taken
    shown: str = ""  # an accept: the suggestion it was taken from
    then: str = ""  # an accept: the rest of the last covered key's auto-indent, inserted after it


@dataclass
class _OnScreen:
    text: str  # what is still shown
    since_ms: float
    ask: Ask


@dataclass
class Tally:
    keys_typed: int = 0
    chars_accepted: int = 0  # keys of the trace the person did not type
    presses: int = 0
    accepts: dict = field(default_factory=lambda: {"whole": 0, "words": 0})
    tab_to_next_ms: list = field(default_factory=list)  # per accept: until the next ghost text (inf: none before the next key)
    asks: int = 0
    prefetches: int = 0
    prefetch_hits: int = 0  # accepts whose next suggestion was ready when the Tab landed
    taken: list = field(default_factory=list)  # per accept: (when, the text taken)


class Person:
    def __init__(
        self,
        steps: list[Step],
        reaction_ms: float = 300.0,
        warmups: bool = False,
        context_chars: int = 0,
        prefetch: bool = False,
        words: WordRule = VSCODE,
    ) -> None:
        self.steps = steps
        self.reaction_ms = reaction_ms
        self.warmups = warmups
        self.prefetch = prefetch
        self.words = words
        self._ready: dict[tuple, str] = {}  # prefetched: (file, text, cursor) -> the suggestion there
        self._prefetching: set[tuple] = set()  # asked for, not arrived
        self.ring = Ring(context_chars)
        self.i = 0
        self.shift_ms = 0.0  # the trace's clock -> the person's: accepts bring later steps forward
        self.docs: dict[str, str] = {}
        self.cursor: dict[str, int] = {}
        self.file: str | None = None
        self.version = 0
        self.now_ms = 0.0
        self.screen: _OnScreen | None = None
        self._accept_at: float | None = None
        self._warm_at: float | None = None
        self._since_accept: float | None = None  # an accept whose next ghost text has not come yet
        self.tally = Tally()
        self.keys_in_trace = sum(s.op == "key" for s in steps)

    @property
    def done(self) -> bool:
        return self.i >= len(self.steps)

    def _step_ms(self) -> float:
        return self.steps[self.i].t_ms + self.shift_ms if not self.done else math.inf

    def next_ms(self) -> float:
        """When the person does their next thing (inf: done)."""
        return min(self._step_ms(), self._accept_at or math.inf, self._warm_at or math.inf)

    def upcoming(self) -> str:
        """What the person is about to type: their next keys, up to a move, deletion, paste or file switch."""
        return "".join(s.text + s.then for s in self._next_keys())

    def _next_keys(self) -> list[Step]:
        out, n = [], 0
        for s in self.steps[self.i :]:
            if s.op != "key" or s.file != self.file or n >= UPCOMING_MAX_CHARS:
                break
            out.append(s)
            n += len(s.text) + len(s.then)
        return out

    def _taken(self, shown: str) -> Accept | None:
        """What the person takes of `shown` now (rule.py), counting their keys, not the auto-indent."""
        starts, n = [], 0  # where each key's character is in upcoming()
        for s in self._next_keys():
            starts.append(n)
            n += len(s.text) + len(s.then)
        return accept(shown, self.upcoming(), lambda chars: bisect.bisect_left(starts, chars), self.words)

    # -- what the editor shows --

    def show(self, ask: Ask, text: str, at_ms: float) -> list[Ask]:
        """The answer to `ask` arrived at `at_ms`: it goes on screen unless the document changed
        since (a prefetched one is kept for its place, and shown if the person is there). What
        the client asks for next: with `prefetch`, the place at the end of a suggestion on screen."""
        if ask.prefetch:
            key = (ask.file, ask.text, ask.cursor)
            self._prefetching.discard(key)
            if not text.strip():
                return []
            self._ready[key] = text
            while len(self._ready) > READY_ENTRIES:  # the extension's cache keeps so many
                del self._ready[next(iter(self._ready))]
            if key != self._here() or self.screen is not None:
                return []
        elif ask.warmup or ask.version != self.version:
            return []
        if not text.strip():
            return []
        if self.screen is None or self.screen.text != text:
            self.screen = _OnScreen(text, at_ms, ask)
        if self._since_accept is not None:
            self.tally.tab_to_next_ms.append(at_ms - self._since_accept)
            self._since_accept = None
        self._plan_accept(at_ms)
        return self._prefetch_after(at_ms)

    def seen(self, text: str, at_ms: float) -> None:
        """A real editor's screen (bench editor --accepting): the ghost text on it now ("" none)."""
        if not text.strip():
            self._clear()
        elif self.screen is None or self.screen.text != text:
            f = self.file
            self.show(Ask(at_ms, f, self.docs[f], self.cursor[f], self.version), text, at_ms)

    def lost(self, ask: Ask, at_ms: float) -> list[Ask]:
        """`ask` ended at `at_ms` without an answer (superseded, or it failed). A prefetch that an
        accept was waiting for is asked for again, as the editor asks at a place it has nothing for."""
        key = (ask.file, ask.text, ask.cursor)
        if not ask.prefetch or key not in self._prefetching:
            return []
        self._prefetching.discard(key)
        if self.file is None or key != self._here() or self.screen is not None or self._since_accept is None:
            return []
        return [self._ask(max(at_ms, self.now_ms), after_accept=True)]

    def _here(self) -> tuple:
        f = self.file
        return (f, self.docs[f], self.cursor[f])

    def _prefetch_after(self, t: float) -> list[Ask]:
        """The client asks, in the background, for the place the suggestion on screen leads to."""
        if not self.prefetch or self.screen is None:
            return []
        f, doc, c = self._here()
        shown = self.screen.text
        key = (f, doc[:c] + shown + doc[c:], c + len(shown))
        if key in self._ready or key in self._prefetching:
            return []
        self._prefetching.add(key)
        self.tally.prefetches += 1
        return [Ask(t, f, key[1], key[2], self.version, self.ring.chunks(f), prefetch=True)]

    def _plan_accept(self, now_ms: float) -> None:
        self._accept_at = None
        if self.screen is not None and self._taken(self.screen.text) is not None:
            at = max(self.screen.since_ms + self.reaction_ms, now_ms)
            if at < self._step_ms():
                self._accept_at = at

    # -- what the person does --

    def act(self) -> tuple[Action, list[Ask]]:
        """Do the next thing; what it was, and the suggestions it asks for."""
        t = self.next_ms()
        self.now_ms = t
        if self._accept_at is not None and self._accept_at <= t:
            return self._accept(t)
        if self._warm_at is not None and self._warm_at <= t:
            self._warm_at = None
            return Action(t, None), [self._ask(t, warmup=True)]
        return self._step(t)

    def _step(self, t: float) -> tuple[Action, list[Ask]]:
        s = self.steps[self.i]
        self.i += 1
        self._warm_at = None
        if self._since_accept is not None:
            self.tally.tab_to_next_ms.append(math.inf)  # the person's next step came first
            self._since_accept = None
        if s.op == "open":
            if self.file is not None and self.file != s.file:
                self.ring.left(self.file, self.docs[self.file], self.cursor[self.file])
            self.docs[s.file], self.cursor[s.file], self.file = s.text, 0, s.file
            self._clear()
            return Action(t, s), self._warm(t, at_once=True)
        if s.file != self.file:
            raise ValueError(f"step {self.i - 1}: {s.op} in {s.file}, but {self.file} is open")
        doc = self.docs[s.file]
        if s.op == "move":
            self.cursor[s.file] = s.offset
            self._clear()
            return Action(t, s), self._warm(t, at_once=False)
        if s.op == "delete":
            self.docs[s.file] = doc[: s.offset] + doc[s.offset + s.length :]
            self.cursor[s.file] = s.offset
            self._clear()
            self.version += 1
            return Action(t, s), [self._ask(t)]
        typed = s.text + s.then
        c = self.cursor[s.file]
        self.docs[s.file] = doc[:c] + typed + doc[c:]
        self.cursor[s.file] = c + len(typed)
        self.version += 1
        if s.op == "key":
            self.tally.keys_typed += 1
        along = (
            self.screen is not None
            and s.op == "key"
            and self.screen.text.startswith(typed)
            and len(self.screen.text) > len(typed)
        )
        if along:  # typed along it: the rest stays on screen, and the client's cache answers the key
            self.screen.text = self.screen.text[len(typed) :]
        else:
            self.screen = None
        self._plan_accept(t)
        return Action(t, s), [] if along else [self._ask(t)]

    def _accept(self, t: float) -> tuple[Action, list[Ask]]:
        shown = self.screen.text
        taken = self._taken(shown)
        end = t + (taken.presses - 1) * PRESS_MS
        left = taken.chars
        last = None
        then = ""
        while left > 0:  # the keys it covers; a key's auto-indent it covers in part is inserted whole
            s = self.steps[self.i]
            unit = s.text + s.then
            if left < len(unit):
                then = unit[left:]
            left -= len(unit)
            self.i += 1
            self.tally.chars_accepted += 1
            last = s
        f = self.file
        c = self.cursor[f]
        inserted = shown[: taken.chars] + then
        self.docs[f] = self.docs[f][:c] + inserted + self.docs[f][c:]
        self.cursor[f] = c + len(inserted)
        self.version += 1
        self.shift_ms = end - last.t_ms
        self.tally.presses += taken.presses
        self.tally.accepts[taken.kind] += 1
        self.tally.taken.append((round(t, 1), shown[: taken.chars]))
        self.screen = None
        self._accept_at = None
        self._since_accept = end
        self.now_ms = end
        here = self._here()
        if here in self._ready or here in self._prefetching:  # the client's cache, or its request on the way
            ready = self._ready.get(here)
            self.tally.prefetch_hits += ready is not None
            asks = [] if ready is None else self.show(Ask(end, f, here[1], here[2], self.version), ready, end)
            return Action(end, None, taken, shown, then), asks
        return Action(end, None, taken, shown, then), [self._ask(end, after_accept=True)]

    def _clear(self) -> None:
        self.screen = None
        self._accept_at = None

    def _warm(self, t: float, at_once: bool) -> list[Ask]:
        """A warm-up now (a file opened) or once the cursor rests (a move)."""
        if not self.warmups:
            return []
        if at_once:
            return [self._ask(t, warmup=True)]
        if t + REST_MS < self._step_ms():
            self._warm_at = t + REST_MS
        return []

    def _ask(self, t: float, warmup: bool = False, after_accept: bool = False) -> Ask:
        f = self.file
        if not warmup:
            self.tally.asks += 1
        return Ask(t, f, self.docs[f], self.cursor[f], self.version, self.ring.chunks(f), warmup, after_accept)

    def summary(self) -> dict:
        """What the person was spared."""
        t = self.tally
        last = self.steps[-1].t_ms if self.steps else 0.0
        taken = sorted(t.tab_to_next_ms)
        n = self.keys_in_trace
        return {
            "keys_in_trace": n,
            "keys_typed": t.keys_typed,
            "chars_not_typed": t.chars_accepted,
            "saved_share": round(t.chars_accepted / n, 4) if n else None,
            "net_saved_share": round((t.chars_accepted - t.presses) / n, 4) if n else None,  # accept presses counted as keys
            "accepts": t.accepts,
            "accept_presses": t.presses,
            "time_ms": round(self.now_ms, 1),
            "time_typing_all_ms": round(last, 1),
            "time_saved_share": round(1 - self.now_ms / last, 4) if last else None,
            "tab_to_next_ghost_ms": {"accepts": len(taken), "p50": _quantile(taken, 0.5), "p90": _quantile(taken, 0.9)},
            "asks": t.asks,
            "prefetches": t.prefetches,
            "prefetch_hits": t.prefetch_hits,
            "taken": t.taken,
        }


def _quantile(sorted_ms: list[float], q: float) -> float | None:
    """The q-quantile of waits, None when there are none or it is censored (no ghost came)."""
    if not sorted_ms:
        return None
    v = sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]
    return None if math.isinf(v) else round(v, 1)
