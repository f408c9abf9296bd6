"""Shifted reuse with suffix-KV correction: place cached KV at new positions, then fix some of it.

After a re-anchor the new prompt often repeats runs of the old one at other positions (an edit
above moved the text down a line; a cursor jump moved the hole). Their cached K/V are usable
after two repairs:

1. Position (exact): a key computed at position p carries RoPE(p). Rotating it by d = p' - p
   gives RoPE(p') exactly, because rotations compose (fimgate/kernels/rope.py). Values carry no position.
2. Context (approximate): above layer 0 a token's K/V also depend on every token before it, and
   those changed. We recompute a budget of the shifted tokens against the new context, in one
   causal pass with the tokens that have to be computed anyway:
   - first a contiguous window right after each change (the tokens that saw the most different
     context, and whose errors every later token attends to),
   - then the shifted tokens nearest the hole, where the completion is decided.
   A budget of 0 is llama.cpp's shift-only cache reuse.

       old   [ P0 | P1 ......................... | S ... ]
       new   [ P0 | edit | P1 (shifted +d) ..... | S (+d) ] inc
                         ^^^^ window            ^^^^^ nearest the hole
"""

from __future__ import annotations

import math

from fimgate.backend.base import ReuseHint

WINDOW_SHARE = 0.5  # of the budget, for the windows right after each change; the rest nearest the hole
# At most this many recomputed, whatever the share: one prefill chunk (scheduler.py). A long prompt
# that moved whole (an edit right after the cursor in a layout that shows that text first, a context
# chunk added, dropped or moved) recomputed 15% of 1,000-1,600 tokens, 150-240, as many as a short
# prompt's whole prefill; capped at 64, as many completions stayed the same as the exact prefill's
# on flask-301's holes (at aaf2919: `git show aaf2919:docs/benchmarks.md`, "A cap on the recompute"). EngineConfig.recompute_cap.
RECOMPUTE_CAP = 64


def usable_spans(
    hints: tuple[ReuseHint, ...], old: tuple[int, ...], new: tuple[int, ...], cached: int, available_old: int
) -> list[ReuseHint]:
    """Hints clipped to what helps: after the exact prefix, before the prompt's last token (always
    computed, for its logits), within the old tokens still cached, and whose tokens really match."""
    spans = []
    last = len(new) - 1
    for h in sorted(hints, key=lambda h: h.new_start):
        lo = max(h.new_start, cached)
        hi = min(h.new_start + h.num_tokens, last, available_old + h.delta)
        if spans:
            lo = max(lo, spans[-1].new_start + spans[-1].num_tokens)
        if hi <= lo:
            continue
        o = lo - h.delta
        if o < 0 or tuple(old[o : o + hi - lo]) != tuple(new[lo:hi]):
            continue
        spans.append(ReuseHint(o, lo, hi - lo))
    return spans


def uncovered(spans: list[ReuseHint], placed: list[ReuseHint]) -> list[ReuseHint]:
    """The parts of `spans` at new positions no `placed` span covers (an earlier source gave
    those), each part with its own old position."""
    taken = sorted((p.new_start, p.new_start + p.num_tokens) for p in placed)
    out = []
    for s in spans:
        lo, hi = s.new_start, s.new_start + s.num_tokens
        for a, b in taken:
            if b <= lo or a >= hi:
                continue
            if a > lo:
                out.append(ReuseHint(s.old_start + lo - s.new_start, lo, a - lo))
            lo = max(lo, b)
        if lo < hi:
            out.append(ReuseHint(s.old_start + lo - s.new_start, lo, hi - lo))
    return out


def select_recompute(spans: list[ReuseHint], share: float, cap: int | None = None) -> set[int]:
    """New positions of the shifted tokens to recompute, for a budget of `share` of them and at
    most `cap` (None: no cap)."""
    total = sum(s.num_tokens for s in spans)
    budget = math.ceil(share * total) if share > 0 else 0
    if cap is not None:
        budget = min(budget, cap)
    if budget <= 0:
        return set()
    chosen: set[int] = set()
    window = max(1, int(budget * WINDOW_SHARE)) if len(spans) else 0
    per_span = max(1, window // max(1, len(spans)))
    for s in spans:  # a window right after each change
        for p in range(s.new_start, min(s.new_start + per_span, s.new_start + s.num_tokens)):
            if len(chosen) < window:
                chosen.add(p)
    positions = sorted((p for s in spans for p in range(s.new_start, s.new_start + s.num_tokens)), reverse=True)
    for p in positions:  # then the tokens nearest the hole
        if len(chosen) >= budget:
            break
        chosen.add(p)
    return chosen
