"""The decoding loop every engine shares: sample, heal, stop, stream.

It owns what a completion means to the client - the healing constraint re-spelled and not
repeated, stop tokens, stop strings held back until they cannot match, cancel between
tokens - and leaves the forward pass to the caller, `step(token, argmax_only, only_ids)`: the
embedded engine's model, or a benchmark peer (fimgate/bench/peers/llama_cpp.py), so both answer the same
plan the same way. The two hints say what the next pick reads of the logits step returns, so a
model may skip the rest of its output head: argmax_only, the pick is greedy (only the argmax
need be right); only_ids, the pick is restricted to these tokens (a healing constraint: only
their entries are read, the others may be anything).

    events = decode(plan, logits, step, ...)      # yields TextDelta, returns Decoded
    result = yield from events
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Generator

import torch

from fimgate.backend.base import CancelToken, FimPlan, TextDelta
from fimgate.backend.embedded.constraint import HealingCursor, TextPrefixIndex
from fimgate.backend.embedded.sampler import sample
from fimgate.backend.embedded.stop import StopStrings


@dataclass(frozen=True)
class Decoded:
    text: str
    num_out: int  # tokens of output (the re-spelled healing text not counted)
    t_first: float | None  # perf_counter() at the first sampled token
    finish: str  # "stop", "length", "cancelled"


def first_pick(plan: FimPlan, heal_index: TextPrefixIndex) -> tuple[bool, list[int] | None]:
    """(argmax_only, only_ids) for the prompt's own logits: what decode() reads of them first."""
    allowed = HealingCursor(heal_index, plan.healing.text.encode("utf-8")).allowed()
    return plan.sampling.temperature == 0, allowed


def decode(
    plan: FimPlan,
    logits: torch.Tensor,
    step: Callable[..., torch.Tensor],
    token_bytes: list[bytes],
    heal_index: TextPrefixIndex,
    eos_id: int | None,
    max_new: int,
    cancel: CancelToken,
) -> Generator[TextDelta, None, Decoded]:
    """Sample from `logits` (the prompt's last), then step(token, argmax_only, only_ids) -> the
    next logits, up to `max_new` tokens (the plan's max_tokens plus what healing re-spells)."""
    gen = torch.Generator().manual_seed(plan.sampling.seed) if plan.sampling.seed is not None else None
    stop_ids = set(plan.stop_token_ids) | ({eos_id} - {None})
    stops = StopStrings(plan.sampling.stop)
    healing = HealingCursor(heal_index, plan.healing.text.encode("utf-8"))
    greedy = plan.sampling.temperature == 0
    budget_s = None if plan.sampling.max_predict_ms is None else plan.sampling.max_predict_ms / 1000
    t_first = None
    num_out = 0
    finish = "length"
    allowed = healing.allowed()
    for i in range(max_new):
        if cancel.cancelled:
            finish = "cancelled"
            break
        if cancel.has_enough:
            finish = "stop"  # the text so far is all that will be shown
            break
        tok = sample(logits, plan.sampling, gen, allowed)
        if t_first is None:
            t_first = time.perf_counter()
        if tok in stop_ids and not healing.pending:
            finish = "stop"
            break
        num_out += not healing.pending
        data = healing.take(token_bytes[tok])
        piece = stops.feed(data) if data else ""
        if piece:
            yield TextDelta(piece)
        if stops.stopped:
            finish = "stop"
            break
        if num_out >= plan.sampling.max_tokens or i == max_new - 1:
            break
        if budget_s is not None and "\n" in stops.text and time.perf_counter() - t_first > budget_s:
            break  # llama.cpp's t_max_predict_ms: a line is done and the time is up
        allowed = healing.allowed()
        logits = step(tok, greedy, allowed)
    tail = stops.flush()
    if tail and finish != "cancelled":
        yield TextDelta(tail)
    return Decoded(stops.text, num_out, t_first, finish)


def decode_rate(t_first: float | None, t_end: float, num_out: int) -> float | None:
    """Tokens per second after the first (the first token's time is the prompt's)."""
    if t_first is None or num_out < 2 or t_end <= t_first:
        return None
    return (num_out - 1) / (t_end - t_first)
