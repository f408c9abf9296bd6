"""Who goes first: typing by arrival; a warm-up (a file opened, the cursor jumped; max_tokens 0)
as if it had arrived WARMUP_YIELD_S later.

A warm-up's prefill is the biggest job there is (1-3k tokens: seconds on a CPU) and nobody waits
for it, while a keystroke waits for everything ahead of it. So typing that comes within
WARMUP_YIELD_S of a warm-up goes first; after that the warm-up takes its turn - yielding for
ever starves warm-ups under load, and the person who opened the file then pays the prefill on
their first keystroke (measured: README, "Warm-ups and typing"). The embedded engine's scheduler
prefills by this order in chunks (fimgate/backend/embedded/scheduler.py); the gateway's runner
orders whole jobs by it for backends that do not batch (fimgate/gateway/service.py).
"""

from __future__ import annotations

from fimgate.backend.base import FimPlan

WARMUP_YIELD_S = 0.5
# A prefill nobody waits on while the person is served another way (the service's first window):
# it runs only when no one else has work, in small chunks, so a key never waits long behind it.
BACKGROUND = float("inf")


def is_warmup(plan: FimPlan) -> bool:
    return plan.prewarm or plan.sampling.max_tokens == 0


def order_key(arrived_s: float, warmup: bool) -> float:
    """Urgency (lower first) of a request that arrived at `arrived_s`."""
    return arrived_s + (WARMUP_YIELD_S if warmup else 0.0)
