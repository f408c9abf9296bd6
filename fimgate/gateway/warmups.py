"""Warm-ups (a file opened, the cursor jumped; max_tokens 0) yield to typing, for a while.

A warm-up's prefill is the biggest job the gateway runs (1-3k tokens: seconds on a CPU) and
nobody waits for it, while a keystroke waits for everything queued ahead of it. So a warm-up
runs in chunks of WARMUP_CHUNK_TOKENS: each chunk is a prefix of its prompt, which the prefix
cache extends chunk by chunk, and the runner orders jobs by `order_key`: typing by arrival, a
warm-up's chunks as if it had arrived WARMUP_YIELD_S later. A keystroke that comes within
that time waits one chunk at most (64 tokens: ~170 ms here); after it, the warm-up takes its
turn - yielding for ever starves warm-ups under load, and the person who opened the file
then pays the prefill on their first keystroke (measured: README, "Warm-ups and typing").
`bench replay --warmup-yield-ms` replays the same policy.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterator

from fimgate.backend.base import FimPlan, Finished, StreamEvent

# the embedded engine's scheduler keeps the same rule for its prefill chunks
from fimgate.backend.embedded.scheduler import PREFILL_CHUNK_TOKENS as WARMUP_CHUNK_TOKENS  # noqa: E402,F401
from fimgate.backend.embedded.scheduler import WARMUP_YIELD_S, order_key  # noqa: E402,F401


def is_warmup(plan: FimPlan) -> bool:
    return plan.prewarm or plan.sampling.max_tokens == 0


def chunk_ends(num_tokens: int, chunk: int = WARMUP_CHUNK_TOKENS) -> list[int]:
    return list(range(chunk, num_tokens, chunk)) + [num_tokens]


def run_chunked(
    plan: FimPlan, run: Callable[[FimPlan], Iterator[StreamEvent]], cancelled: Callable[[], bool]
) -> Iterator[StreamEvent]:
    """Run a warm-up chunk by chunk through `run` (which queues each chunk); yields one Finished
    whose usage counts every chunk's prefill."""
    ids = plan.prompt_ids
    first = last = None
    prefilled = 0
    for end in chunk_ends(len(ids)):
        last = None
        for ev in run(replace(plan, prompt_ids=ids[:end])):
            if isinstance(ev, Finished):
                last = ev
        if last is None:
            return
        first = first or last
        prefilled += last.usage.prefilled_tokens
        if cancelled() or last.usage.cancelled:
            break
    yield replace(
        last,
        usage=replace(
            last.usage, prompt_tokens=len(ids), prefix_cached_tokens=first.usage.prefix_cached_tokens, prefilled_tokens=prefilled
        ),
    )
