"""Enforce a healing constraint: the first generated tokens must spell a given text.

The planner backed text off the prompt (the cursor sat inside a token); the model must now
produce tokens that re-spell it. At each step a token is allowed when its bytes and the
remaining text agree on their overlap: the token is a prefix of what remains, or what remains
is a prefix of the token (the token finishes the constraint and may run on past it).

    remaining b"ret"   allowed: "r", "re", "ret", "return", "rets", ...   not: "x", " ret"

Lookups are O(log V + len(remaining)) over a sorted byte index built once per vocabulary, and
recent answers are kept: a keystroke's first pick asks for its healing text twice (the head's
hint, then the sampler), and a bare space allows ~32k of SmolLM2's 49k tokens, ~100k of Qwen2.5's
152k. The kept answers are bounded by the ids they hold (MEMO_IDS, ~40 MB of Python ints at most),
not by their count, so a larger vocabulary cannot grow them. The answers are facts about the
vocabulary, shared by every user. Imports no torch.
"""

from __future__ import annotations

import bisect

MEMO_IDS = 1 << 20  # ids held by the kept answers, all together


class TextPrefixIndex:
    def __init__(self, token_bytes: list[bytes], exclude_ids: set[int] = frozenset()) -> None:
        self.excluded = frozenset(exclude_ids)  # (special tokens: never text)
        pairs = sorted((b, i) for i, b in enumerate(token_bytes) if b and i not in exclude_ids)
        self._keys = [b for b, _ in pairs]
        self._ids = [i for _, i in pairs]
        self._exact: dict[bytes, list[int]] = {}
        for b, i in pairs:
            self._exact.setdefault(b, []).append(i)
        self._memo: dict[bytes, list[int]] = {}
        self._memo_ids = 0

    def allowed_ids(self, remaining: bytes) -> list[int]:
        """Tokens consistent with `remaining` (non-empty) as the next bytes of output. The list is
        shared between calls: read it, do not change it."""
        out = self._memo.get(remaining)
        if out is None:
            out = self._lookup(remaining)
            while self._memo and self._memo_ids + len(out) > MEMO_IDS:
                self._memo_ids -= len(self._memo.pop(next(iter(self._memo))))  # the oldest answer
            if len(out) <= MEMO_IDS:
                self._memo[remaining] = out
                self._memo_ids += len(out)
        return out

    @property
    def memo_ids(self) -> int:
        return self._memo_ids

    def _lookup(self, remaining: bytes) -> list[int]:
        lo = bisect.bisect_left(self._keys, remaining)
        hi = bisect.bisect_left(self._keys, remaining + b"\xff" * 8)
        out = self._ids[lo:hi]  # tokens that start with all of `remaining`
        for n in range(1, len(remaining)):
            out = out + self._exact.get(remaining[:n], [])  # tokens that are a strict prefix of it
        return out


class HealingCursor:
    """One generation's progress through a healing constraint: which tokens may come next, and
    which bytes of a sampled token are new output (the re-spelled text is not repeated)."""

    def __init__(self, index: TextPrefixIndex, text: bytes) -> None:
        self.index = index
        self.pending = text

    def allowed(self) -> list[int] | None:
        """The tokens allowed next; None: any (done, or nothing in the vocabulary spells it)."""
        if not self.pending:
            return None
        ids = self.index.allowed_ids(self.pending)
        if not ids:
            self.pending = b""
        return ids or None

    def take(self, data: bytes) -> bytes:
        """Feed a sampled token's bytes; returns the part that is output."""
        if not self.pending:
            return data
        if data.startswith(self.pending):
            out, self.pending = data[len(self.pending) :], b""
            return out
        self.pending = self.pending[len(data) :]
        return b""
