"""Acceptance events: which suggestions people were shown, took, or typed over.

Clients report them as Tabby does (`POST /v1/events`: `type` view | select | dismiss, the
`completion_id` the answer carried; `select_kind` line | word for a partial accept; fimgate adds
`accepted_chars`). The gateway remembers each answer it gave for a while - who got it, its
language, how its prompt was served (prefix hit, shifted reuse, miss), how long it took, how long
it is; never its text - so an event is counted with those, and only for the user the answer went
to: an event naming another user's completion is refused like an unknown one.

Clients that report nothing (llama.vscode, llama.vim, OpenAI clients) get their events inferred
from the session's next requests: a suggestion stays open while the text before the cursor goes
on along it; once that text holds the whole suggestion it was accepted (Tab, or typed), and once
it went elsewhere it was dismissed - counted as shown and accepted or dismissed, with
source="inferred", unless the client reported an event for it (source="reported").

Counted in /metrics (shown, accepted, accepted characters, dismissed; by source, reuse, latency
bucket and language: acceptance rate = accepted / shown) and per user (`GET /v1/events/summary`,
the caller's own numbers; `fimgate stats` prints them). `GET /v1/events/recent` lists the
caller's latest verdicts by completion id (accepted or dismissed, reported or inferred), so a
replay can check the inference against what its people typed.

Only suggestions a model made count: an answer given by type-through (the rest of a suggestion
the person is typing, no model call) carries a new id that names the suggestion it continues, so
events for it count once, for that suggestion. Once accepted, a suggestion stays accepted; one
dismissed can still be accepted once (Escape, Backspace, the key again: type-through shows it
again, and Tab takes it), so a suggestion counts at most one of each. Memory is bounded in bytes, whatever clients send: an open
suggestion keeps TAIL_CHARS of the text before it, a digest of the rest of its line and its text
(all open suggestions together at most OPEN_CHARS characters); at most MAX_USERS users' tallies
and recent verdicts are kept, the least recently active forgotten first.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter

from fimgate.backend.base import UsageReport

REMEMBERED = 20_000  # answers kept for events to name (oldest forgotten first)
LATENCY_BUCKETS = ((100, "<100ms"), (300, "100-300ms"), (1000, "300ms-1s"))
OPEN_PER_SESSION = 8  # suggestions of one session waiting for the person's next keys to tell
TAIL_CHARS = 256  # the end of the text before the cursor that the next requests are matched on
RECENT_PER_USER = 1_000  # verdicts kept per user for /v1/events/recent
OPEN_CHARS = 8 << 20  # characters held by all open suggestions together (texts and tails)
MAX_USERS = 10_000  # users whose tallies and recent verdicts are kept
OUTCOMES = ("select", "dismiss")  # a suggestion has one
EARLY_EVENTS = 4  # events kept per answer while it streams (view, select, dismiss and a repeat)


def line_digest(line_rest: str) -> bytes:
    """What an open suggestion keeps of the rest of its line: a digest, whatever its length."""
    return hashlib.blake2b(line_rest.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def reuse_of(usage: UsageReport) -> str:
    """How the answer's prompt was served, from what it cost."""
    if usage.shifted_cached_tokens:
        return "shifted"
    return "prefix" if usage.prefix_cached_tokens else "miss"


def latency_bucket(ms: float | None) -> str:
    for limit, name in LATENCY_BUCKETS:
        if ms is not None and ms < limit:
            return name
    return ">=1s"


@dataclass
class _Answer:
    completion_id: str
    user: str
    language: str
    reuse: str
    latency: str
    chars: int
    seen: set[str] = field(default_factory=set)  # event types counted already (each once)


@dataclass(frozen=True)
class _Open:
    """A suggestion whose fate the session's next requests will tell."""

    completion_id: str
    before: str  # the end of the text before the cursor when it was made
    line_digest: bytes  # of the rest of the cursor line
    text: str

    @property
    def chars(self) -> int:
        return len(self.before) + len(self.text)


def fate(o: _Open, before: str, line_rest: str) -> str:
    """'open', 'accepted' or 'dismissed': what the text before the cursor now says of `o`."""
    at = before.rfind(o.before) if o.before else len(before)
    if at < 0:
        return "dismissed"
    typed = before[at + len(o.before) :]
    if typed.startswith(o.text):
        return "accepted"
    return "open" if o.text.startswith(typed) and line_digest(line_rest) == o.line_digest else "dismissed"


def _touch(table: OrderedDict, user: str, new):
    """table[user], made with new() if absent, now the most recent; the least recent users past
    MAX_USERS forgotten."""
    value = table.pop(user, None)
    table[user] = new() if value is None else value
    while len(table) > MAX_USERS:
        table.popitem(last=False)
    return table[user]


@dataclass
class _Tally:
    shown: int = 0
    accepted: int = 0
    accepted_chars: int = 0
    dismissed: int = 0

    def as_dict(self) -> dict:
        rate = round(self.accepted / self.shown, 3) if self.shown else None
        return {**self.__dict__, "acceptance_rate": rate}


class Events:
    def __init__(self, registry: CollectorRegistry, remembered: int = REMEMBERED) -> None:
        labels = ["source", "reuse", "latency", "language"]
        self.shown = Counter("fimgate_suggestions_shown", "Suggestions shown in an editor", labels, registry=registry)
        self.accepted = Counter(
            "fimgate_suggestions_accepted", "Suggestions accepted (kind: whole, line, word)", [*labels, "kind"], registry=registry
        )
        self.accepted_chars = Counter(
            "fimgate_accepted_chars", "Characters of suggestions accepted", ["language"], registry=registry
        )
        self.dismissed = Counter(
            "fimgate_suggestions_dismissed", "Suggestions typed over or dismissed", labels, registry=registry
        )
        self._answers: OrderedDict[str, _Answer] = OrderedDict()  # type-through ids name their suggestion's
        # ids still streaming -> (user, the events their editor reported meanwhile): an editor shows
        # a streamed suggestion's first part, and reports it, before the answer ends
        self._streaming: OrderedDict[str, tuple[str, list[tuple]]] = OrderedDict()
        self._users: OrderedDict[str, dict[str, _Tally]] = OrderedDict()  # user -> language -> tally
        self._open: OrderedDict[tuple[str, str], list[_Open]] = OrderedDict()  # (user, document) -> open
        self._open_chars = 0
        self._recent: OrderedDict[str, deque] = OrderedDict()  # user -> (completion id, "accepted" | "dismissed", source)
        self._remembered = remembered
        self._lock = threading.Lock()

    def answered(
        self,
        completion_id: str,
        user: str,
        language: str,
        usage: UsageReport,
        text: str,
        document: str = "",
        before: str = "",
        line_rest: str = "",
    ) -> None:
        """Remember an answer an editor may show (not a warm-up, not empty), and keep it open for its
        session's next requests to tell what became of it. `text` is what reached the client: a
        stream the next key cancelled still showed its first part. A type-through answer is the
        rest of a suggestion already counted: its id names that suggestion. Events reported while
        it streamed (`streaming`) count now."""
        with self._lock:
            _, early = self._streaming.pop(completion_id, (user, []))
            if not text.strip():
                return
            if usage.type_through:
                made = next((o for o in reversed(self._open.get((user, document), [])) if o.text.endswith(text)), None)
                a = self._answers.get(made.completion_id) if made is not None else None
                if a is not None:
                    self._remember(completion_id, a)
                    for kind, select_kind, accepted_chars in early:
                        self._record(a, kind, select_kind, accepted_chars)
                return
            answer = _Answer(
                completion_id, user, language or "unknown", reuse_of(usage), latency_bucket(usage.total_ms), len(text)
            )
            self._remember(completion_id, answer)
            session = self._open.pop((user, document), [])
            session.append(_Open(completion_id, before[-TAIL_CHARS:], line_digest(line_rest), text))
            for gone in session[:-OPEN_PER_SESSION]:
                self._open_chars -= gone.chars
            del session[:-OPEN_PER_SESSION]
            self._open[(user, document)] = session
            self._open_chars += session[-1].chars
            while self._open and (len(self._open) > self._remembered or self._open_chars > OPEN_CHARS):
                _, dropped = self._open.popitem(last=False)
                self._open_chars -= sum(o.chars for o in dropped)
            for kind, select_kind, accepted_chars in early:
                self._record(answer, kind, select_kind, accepted_chars)

    def streaming(self, completion_id: str, user: str) -> None:
        """An answer is streaming to `user`: events about it are kept until it ends (answered)."""
        with self._lock:
            self._streaming[completion_id] = (user, [])
            while len(self._streaming) > self._remembered:
                self._streaming.popitem(last=False)

    def _remember(self, completion_id: str, answer: _Answer) -> None:
        self._answers[completion_id] = answer
        while len(self._answers) > self._remembered:
            self._answers.popitem(last=False)

    def settle(self, user: str, document: str, before: str, line_rest: str) -> None:
        """A new request of the session: count what its text says of the suggestions still open
        (inferred events, for answers whose client reported none)."""
        with self._lock:
            still = []
            for o in self._open.get((user, document), []):
                now = fate(o, before, line_rest)
                if now == "open":
                    still.append(o)
                    continue
                a = self._answers.get(o.completion_id)
                if a is not None and not a.seen:  # a client that reports events spoke for itself
                    self._count(a, "view", "inferred", None, None)
                    self._count(a, "select" if now == "accepted" else "dismiss", "inferred", None, None)
            if (user, document) in self._open:
                self._open_chars -= sum(o.chars for o in self._open[(user, document)]) - sum(o.chars for o in still)
                self._open[(user, document)] = still

    def record(self, user: str, kind: str, completion_id: str, select_kind: str | None, accepted_chars: int | None) -> bool:
        """Count one event; False when the completion is unknown here or went to someone else."""
        with self._lock:
            a = self._answers.get(completion_id)
            if a is None:
                who, early = self._streaming.get(completion_id, (None, []))
                if who != user or len(early) >= EARLY_EVENTS:
                    return False
                early.append((kind, select_kind, accepted_chars))
                return True
            if a.user != user:
                return False
            self._record(a, kind, select_kind, accepted_chars)
            return True

    def _record(self, a: _Answer, kind: str, select_kind: str | None, accepted_chars: int | None) -> None:
        """One reported event of an answer (under the lock)."""
        if kind != "view" and "view" not in a.seen:  # taken or typed over: it was shown
            self._count(a, "view", "reported", None, None)
        decided = kind in OUTCOMES and "select" in a.seen  # accepted stands
        if kind not in a.seen and not decided:  # a repeated event counts once
            self._count(a, kind, "reported", select_kind, accepted_chars)

    def _count(self, a: _Answer, kind: str, source: str, select_kind: str | None, accepted_chars: int | None) -> None:
        """Count one event of an answer (under the lock)."""
        a.seen.add(kind)
        tally = _touch(self._users, a.user, dict).setdefault(a.language, _Tally())
        labels = (source, a.reuse, a.latency, a.language)
        if kind != "view":
            verdict = (a.completion_id, "accepted" if kind == "select" else "dismissed", source)
            _touch(self._recent, a.user, lambda: deque(maxlen=RECENT_PER_USER)).append(verdict)
        if kind == "view":
            tally.shown += 1
            self.shown.labels(*labels).inc()
        elif kind == "select":
            chars = a.chars if accepted_chars is None else min(accepted_chars, a.chars)
            tally.accepted += 1
            tally.accepted_chars += chars
            self.accepted.labels(*labels, select_kind or "whole").inc()
            self.accepted_chars.labels(a.language).inc(chars)
        else:
            tally.dismissed += 1
            self.dismissed.labels(*labels).inc()

    def recent(self, user: str) -> list[dict]:
        """The user's latest verdicts, oldest first."""
        with self._lock:
            rows = list(self._recent.get(user, ()))
        return [{"completion_id": c, "verdict": v, "source": s} for c, v, s in rows]

    def everyone(self) -> dict:
        """Every user's summary (for the people who run the gateway)."""
        with self._lock:
            users = sorted(self._users)
        return {"users": {u: self.summary(u) for u in users}}

    def summary(self, user: str) -> dict:
        """One user's numbers: in all, and per language."""
        with self._lock:
            per = {lang: t.as_dict() for lang, t in sorted(self._users.get(user, {}).items())}
        total = _Tally()
        for t in per.values():
            for k in ("shown", "accepted", "accepted_chars", "dismissed"):
                setattr(total, k, getattr(total, k) + t[k])
        return {"user": user, "total": total.as_dict(), "by_language": per}
