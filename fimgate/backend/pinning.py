"""Keystroke-aware pinning: keep a typing person's anchor blocks through other users' traffic.

While a person types in a session, each request re-pins the session's anchor (the prompt's
first `pin_tokens` tokens, which every keystroke's prompt shares). The pin's time-to-live
follows that person's own rhythm: a few times their slow keystroke gap (p90 of recent gaps),
within bounds. A pause far longer than their rhythm lets the pin lapse; a re-anchor moves the
pin to the new anchor; the tree's cap on the pinned share holds throughout.

Policies, to compare (`--pin-policy`):
    none        random eviction, no pins (the floor)
    lru-only    LRU eviction, no pins (what prefix caches do today)
    pin         LRU eviction + keystroke-aware pins
    random+pin  random eviction + keystroke-aware pins (the baseline any policy must beat)
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from fimgate.backend.base import PinReceipt

POLICIES = {"none": ("random", False), "lru-only": ("lru", False), "pin": ("lru", True), "random+pin": ("random", True)}
GAPS_KEPT = 32
TTL_GAPS = 4.0  # a pin outlives this many slow (p90) gaps of the person's own typing
MIN_TTL_S, MAX_TTL_S, FIRST_TTL_S = 1.0, 30.0, 5.0
MAX_SESSIONS = 20_000  # sessions whose rhythm is remembered (~1 KB each); the least recent forgotten


@dataclass
class _Session:
    last_s: float
    gaps: deque
    receipt: PinReceipt | None = None


class KeystrokePins:
    def __init__(self, policy: str = "pin") -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown pin policy {policy!r}; known: {', '.join(POLICIES)}")
        self.policy = policy
        self.eviction, self.enabled = POLICIES[policy]
        self._sessions: OrderedDict[tuple[str, str], _Session] = OrderedDict()

    def ttl_s(self, key: tuple[str, str], now_s: float) -> float:
        """Record a request at now_s; return the pin lifetime this person's rhythm earns. A session
        forgotten (past MAX_SESSIONS) keeps its pin in the tree until the pin's own time runs out."""
        s = self._sessions.get(key)
        if s is None:
            self._sessions[key] = _Session(now_s, deque(maxlen=GAPS_KEPT))
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
            return FIRST_TTL_S
        self._sessions.move_to_end(key)
        gap = now_s - s.last_s
        s.last_s = now_s
        if gap > 0:
            s.gaps.append(gap)
        if not s.gaps:
            return FIRST_TTL_S
        ordered = sorted(s.gaps)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        return min(MAX_TTL_S, max(MIN_TTL_S, TTL_GAPS * p90))

    def repin(self, tree, user_id: str, session_id: str, anchor: tuple[int, ...], now_s: float) -> None:
        """Move the session's pin onto its current anchor, with a fresh lifetime."""
        if not self.enabled or not anchor:
            return
        key = (user_id, session_id)
        ttl = self.ttl_s(key, now_s)
        s = self._sessions[key]
        if s.receipt is not None:
            tree.unpin(s.receipt)
        s.receipt = tree.pin(user_id, anchor, ttl)

    def reset(self) -> None:
        self._sessions.clear()
