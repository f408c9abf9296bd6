"""Acceptance events: which suggestions people were shown, took, or typed over.

Clients report them as Tabby does (`POST /v1/events`: `type` view | select | dismiss, the
`completion_id` the answer carried; `select_kind` line | word for a partial accept; fimgate adds
`accepted_chars`). The gateway remembers each answer it gave for a while - who got it, its
language, how its prompt was served (prefix hit, shifted reuse, miss), how long it took, how long
it is; never its text - so an event is counted with those, and only for the user the answer went
to: an event naming another user's completion is refused like an unknown one.

Counted in /metrics (shown, accepted, accepted characters, dismissed; by reuse, latency bucket
and language: acceptance rate = accepted / shown) and per user (`GET /v1/events/summary`, the
caller's own numbers; `fimgate stats` prints them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter

from fimgate.backend.base import UsageReport

REMEMBERED = 20_000  # answers kept for events to name (oldest forgotten first)
LATENCY_BUCKETS = ((100, "<100ms"), (300, "100-300ms"), (1000, "300ms-1s"))


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
    user: str
    language: str
    reuse: str
    latency: str
    chars: int
    seen: set[str] = field(default_factory=set)  # event types counted already (each once)


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
        labels = ["reuse", "latency", "language"]
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
        self._answers: OrderedDict[str, _Answer] = OrderedDict()
        self._users: dict[str, dict[str, _Tally]] = {}  # user -> language -> tally
        self._remembered = remembered
        self._lock = threading.Lock()

    def answered(self, completion_id: str, user: str, language: str, usage: UsageReport, chars: int) -> None:
        """Remember an answer an editor may show (not a warm-up, not empty, not cancelled)."""
        if usage.cancelled or chars <= 0:
            return
        answer = _Answer(user, language or "unknown", reuse_of(usage), latency_bucket(usage.total_ms), chars)
        with self._lock:
            self._answers[completion_id] = answer
            while len(self._answers) > self._remembered:
                self._answers.popitem(last=False)

    def record(self, user: str, kind: str, completion_id: str, select_kind: str | None, accepted_chars: int | None) -> bool:
        """Count one event; False when the completion is unknown here or went to someone else."""
        with self._lock:
            a = self._answers.get(completion_id)
            if a is None or a.user != user:
                return False
            if kind in a.seen:
                return True  # a repeated event counts once
            a.seen.add(kind)
            tally = self._users.setdefault(user, {}).setdefault(a.language, _Tally())
            labels = (a.reuse, a.latency, a.language)
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
            return True

    def summary(self, user: str) -> dict:
        """One user's numbers: in all, and per language."""
        with self._lock:
            per = {lang: t.as_dict() for lang, t in sorted(self._users.get(user, {}).items())}
        total = _Tally()
        for t in per.values():
            for k in ("shown", "accepted", "accepted_chars", "dismissed"):
                setattr(total, k, getattr(total, k) + t[k])
        return {"user": user, "total": total.as_dict(), "by_language": per}
