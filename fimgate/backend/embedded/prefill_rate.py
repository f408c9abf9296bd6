"""How many prompt tokens a second this engine prefills now, measured on its own prefill chunks.

The same prompt costs 5x more on one CPU than another (AVX2 against AVX-512 VNNI, docs/benchmarks.md)
and more again while the editor beside it draws: decisions about what to prefill for a person who
types (fimgate/gateway/first_window.py: fill a full anchor behind the keys, or not) are made in
seconds, and this turns tokens into seconds:

    rate = PrefillRate()
    rate.add(tokens=64, seconds=0.85)   # a chunk that ran (the scheduler times each one)
    rate.add(256, 1.6, share=0.5)       # a chunk cancelled after half its layers
    rate.seconds(1240)                  # ~16.5: what 1,240 uncached tokens would take; None before any chunk

A chunk's time is what its layers took (paused chunks count only the time they ran), so it
includes what other processes took from the cores meanwhile, which is what a person waits for.
An exponential average: the last few chunks count most.
"""

from __future__ import annotations

import threading

MIN_TOKENS = 16  # a shorter chunk is mostly the weights' read, not the prompt's compute
WEIGHT = 0.3  # of the newest chunk in the average


class PrefillRate:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._per_s: float | None = None
        self._so_far: float | None = None  # the first chunk's rate while it runs
        self.chunks = 0

    def add(self, tokens: int, seconds: float, share: float = 1.0) -> None:
        """A chunk of `tokens` ran `share` of its layers in `seconds` (a chunk cut short: less than 1)."""
        if tokens < MIN_TOKENS or seconds <= 0 or share <= 0:
            return
        rate = tokens * share / seconds
        with self._lock:
            self._per_s = rate if self._per_s is None else WEIGHT * rate + (1 - WEIGHT) * self._per_s
            self.chunks += 1

    def running(self, tokens: int, seconds: float, share: float) -> None:
        """The chunk running now has run `share` of its layers in `seconds` (the scheduler tells
        after each layer): until a chunk has been timed, its rate so far stands for the rate - the
        first prompt a server computes may be seconds long and superseded before it ends."""
        if self.chunks == 0 and tokens >= MIN_TOKENS and seconds > 0 and share > 0:
            self._so_far = tokens * share / seconds

    def seconds(self, tokens: int) -> float | None:
        """About how long `tokens` would take to prefill now; None until a chunk has run a layer."""
        per_s = self._per_s if self._per_s is not None else self._so_far
        return None if per_s is None else tokens / per_s
