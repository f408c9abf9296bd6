"""How many draft tokens a step tries: as many as have paid for their rows here, lately.

A draft token saves a step when greedy decoding keeps it, and costs a row of the step that
verifies it, kept or not. What a row costs against a step depends on the machine: where a step
waits on reading the weights (AVX-512, a GPU), a few more rows are nearly free; where it computes
(an AVX2 CPU: 8-bit products, and the 8-bit pass over the head's 151,936 rows for every row), a
row is about half a step (Qwen2.5-Coder-0.5B, 1 thread: a step 57.7 ms, 5 rows 161.9 ms; 2026-12-06,
AMD EPYC Zen 1 class). How often a draft is kept depends on the text: about 1 in 10 while a
person types new code in VS Code (`fimgate bench editor`, the same day).

So the policy keeps two running figures, both measured as the engine works:

    accept = P(a draft token is kept | the one before it was)   (decode_loop counts kept, refused)
    cost   = (a row's time) / (a one-row step's time)             (single-sequence steps, timed)

and drafts k tokens, the largest k <= max_draft (--speculate) with accept^k >= cost: the k-th token is worth
its row. Where k is 0, one request in EXPLORE_EVERY drafts one token anyway, so the figures
follow the text and the machine as they change.
"""

from __future__ import annotations

PRIOR_KEPT = PRIOR_REFUSED = 1.0  # accept starts at 1/2
PRIOR_COST = 0.5  # until a multi-row step was timed at this thread count
DECAY = 0.97  # per request that drafted: the counts of ~30 such requests
STEP_EMA = 0.2  # weight of a new step time in its running mean
EXPLORE_EVERY = 8


class DraftPolicy:
    def __init__(self) -> None:
        self.kept, self.refused = PRIOR_KEPT, PRIOR_REFUSED
        self._step_s: dict[tuple[int, int], float] = {}  # (threads, rows) -> running mean seconds
        self._idle = 0  # requests since the last that drafted

    @property
    def accept(self) -> float:
        return self.kept / (self.kept + self.refused)

    def cost(self, threads: int) -> float:
        """A draft row's time over a one-row step's, at this thread count (PRIOR_COST unknown)."""
        one = self._step_s.get((threads, 1))
        rows = [(n, s) for (t, n), s in self._step_s.items() if t == threads and n > 1]
        if one is None or not rows:
            return PRIOR_COST
        return max(0.0, sum((s - one) / (n - 1) for n, s in rows) / len(rows) / one)

    def length(self, max_draft: int, threads: int) -> int:
        """Draft tokens a step of the next request may try."""
        accept, cost = self.accept, self.cost(threads)
        k = 0
        while k < max_draft and accept ** (k + 1) >= cost:
            k += 1
        if k == 0 and max_draft > 0:
            self._idle += 1
            if self._idle >= EXPLORE_EVERY:
                k = 1
        if k:
            self._idle = 0
        return k

    def record_step(self, threads: int, rows: int, seconds: float) -> None:
        """A step of one sequence: its token and rows - 1 draft tokens."""
        key = (threads, rows)
        last = self._step_s.get(key)
        self._step_s[key] = seconds if last is None else last + STEP_EMA * (seconds - last)

    def record_request(self, kept: int, refused: int) -> None:
        """A request's draft tokens kept, and its verifications that ended at a refused one."""
        if kept or refused:
            self.kept = self.kept * DECAY + kept
            self.refused = self.refused * DECAY + refused

    def state(self, threads: int) -> dict:
        return {"draft_accept": round(self.accept, 3), "draft_row_cost": round(self.cost(threads), 3)}
