"""The decoding loop every engine shares: sample, heal, stop, stream.

It owns what a completion means to the client - the healing constraint re-spelled and not
repeated, stop tokens, stop strings held back until they cannot match, cancel between
tokens - and leaves the forward pass to the caller: it yields a `NextToken` where it needs the
logits after a token and is sent them back. The embedded engine batches those needs of many
requests into one step (fimgate/backend/embedded/scheduler.py); a benchmark peer
(fimgate/bench/peers/llama_cpp.py) answers them one by one with `stepped`, so both answer the
same plan the same way. The two hints say what the next pick reads of the logits, so a model
may skip the rest of its output head: argmax_only, the pick is greedy (only the argmax need be
right); only_ids, the pick is restricted to these tokens (a healing constraint: only their
entries are read, the others may be anything). A cancelled request may be sent None instead
of logits: the loop stops before it reads them. With `min_token_prob` the text ends before the
first token the model gives less than that probability once it holds more than white space.
With `alternatives` (greedy), the pick that runs past the cursor (past the healing text) also
yields Alternatives, before any text: for other characters the person may type next, what the
next request picks then (alternatives.py).

Speculation (greedy only, given a `drafter`): a NextToken may carry draft tokens to run as
extra rows after its token, and is then sent a list of logits, one per row run (the caller may
run fewer drafts than asked), except the step whose logits give the first token of new text
(after a healing constraint is re-spelled): an editor shows that token, and draft rows would make it
wait for them (on an AVX2 CPU a row costs half a step). Each draft token is kept while it is what greedy decoding picks
from the row before it; the rows after the first that is not are `discard`ed (told in the next
NextToken and in Decoded: their K/V are not the sequence's). So the text, and every token
decoded, is what plain decoding gives; only the number of forwards changes.

    events = decode(plan, logits, ...)            # yields TextDelta, Alternatives and NextToken, returns Decoded
    result = yield from stepped(events, step)     # step(token, argmax_only, only_ids) -> logits
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Generator, Optional

import torch

from fimgate.backend.base import Alternatives, CancelToken, FimPlan, TextDelta
from fimgate.backend.embedded.alternatives import next_characters
from fimgate.backend.embedded.constraint import HealingCursor, TextPrefixIndex
from fimgate.backend.embedded.drafts import PromptLookup
from fimgate.backend.embedded.sampler import sample
from fimgate.backend.embedded.stop import StopStrings


@dataclass(frozen=True)
class Decoded:
    text: str
    num_out: int  # tokens of output (the re-spelled healing text not counted)
    t_first: float | None  # perf_counter() at the first sampled token
    finish: str  # "stop", "length", "cancelled"
    discard: int = 0  # rows of the last step after the last token kept: not the sequence's
    drafted: int = 0  # draft tokens run
    accepted: int = 0  # ... and kept
    refused: int = 0  # steps whose draft ended at a token greedy decoding did not pick


@dataclass(frozen=True)
class NextToken:
    """decode() needs the logits after `token` (the next position of its sequence)."""

    token: int
    argmax_only: bool
    only_ids: list[int] | None
    draft: tuple[int, ...] = ()  # run as rows after `token`: reply with a list of logits, one per row run
    discard: int = 0  # rows at the end of the previous step that are not the sequence's (drafts not kept)


def first_pick(plan: FimPlan, heal_index: TextPrefixIndex) -> tuple[bool, list[int] | None]:
    """(argmax_only, only_ids) for the prompt's own logits: what decode() reads of them first."""
    allowed = HealingCursor(heal_index, plan.healing.text.encode("utf-8")).allowed()
    return plan.sampling.temperature == 0, allowed


def decode(
    plan: FimPlan,
    logits: torch.Tensor,
    token_bytes: list[bytes],
    heal_index: TextPrefixIndex,
    eos_id: int | None,
    max_new: int,
    cancel: CancelToken,
    drafter: PromptLookup | None = None,
) -> Generator[TextDelta | Alternatives | NextToken, Optional[torch.Tensor | list[torch.Tensor]], Decoded]:
    """Sample from `logits` (the prompt's last), then yield NextToken and be sent the next
    logits, up to `max_new` tokens (the plan's max_tokens plus what healing re-spells).
    drafter: proposes draft tokens after the output so far (greedy requests only)."""
    gen = torch.Generator().manual_seed(plan.sampling.seed) if plan.sampling.seed is not None else None
    stop_ids = set(plan.stop_token_ids) | ({eos_id} - {None})
    stops = StopStrings(plan.sampling.stop)
    healing = HealingCursor(heal_index, plan.healing.text.encode("utf-8"))
    greedy = plan.sampling.temperature == 0
    budget_s = None if plan.sampling.max_predict_ms is None else plan.sampling.max_predict_ms / 1000
    floor = plan.sampling.min_token_prob
    t_first = None
    num_out = 0
    finish = "length"
    allowed = healing.allowed()
    drafter = drafter if greedy else None
    alternatives = plan.sampling.alternatives if greedy else 0  # (the keys typed instead: alternatives.py)
    out_ids: list[int] = []  # every token sampled, healing's included
    draft: list[int] = []  # draft tokens whose rows ran, not yet compared
    pending: list[torch.Tensor] = []  # pending[j]: the logits after draft[j]
    drafted = accepted = refused = 0
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
        if alternatives and len(token_bytes[tok]) > len(healing.pending):  # the step past the cursor
            never = stop_ids | heal_index.excluded
            texts = next_characters(logits, allowed, healing.pending, token_bytes, tok, never, alternatives)
            if texts:
                yield Alternatives(texts)
            alternatives = 0
        if tok in stop_ids and not healing.pending:
            finish = "stop"
            break
        if floor is not None and not healing.pending and stops.text.strip() and unsure(logits, tok, floor):
            finish = "stop"  # the model is no longer sure: what it is sure of is the suggestion
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
        out_ids.append(tok)
        if draft and draft[0] == tok and allowed is None:  # the row after tok has run: its logits are next
            draft.pop(0)
            logits = pending.pop(0)
            accepted += 1
            continue
        discard = len(draft)
        refused += discard > 0
        draft = []
        if drafter is not None and allowed is None and num_out:  # (the first new text's step runs alone)
            left = min(plan.sampling.max_tokens - num_out, max_new - 1 - i)  # samples after tok still allowed
            draft = drafter.propose(out_ids, left - 1)
        reply = yield NextToken(tok, greedy, allowed, tuple(draft), discard)
        if not draft or reply is None:
            logits, draft = reply, []
        else:
            logits, pending = reply[0], list(reply[1:])
            draft = draft[: len(pending)]
            drafted += len(draft)
    tail = stops.flush()
    if tail and finish != "cancelled":
        yield TextDelta(tail)
    return Decoded(stops.text, num_out, t_first, finish, len(draft), drafted, accepted, refused)


def unsure(logits: torch.Tensor, tok: int, min_prob: float) -> bool:
    """Whether the model gives `tok` less than `min_prob`. A greedy step's logits are exact for
    the argmax and screened approximations elsewhere (screened_head.py): close enough for a
    threshold."""
    return float(torch.softmax(logits.float(), dim=-1)[tok]) < min_prob


def stepped(
    events: Generator[TextDelta | NextToken, Optional[torch.Tensor], Decoded], step: Callable[..., torch.Tensor]
) -> Generator[TextDelta, None, Decoded]:
    """decode()'s events with each NextToken answered by step(token, argmax_only, only_ids)."""
    reply = None
    while True:
        try:
            ev = events.send(reply)
        except StopIteration as done:
            return done.value
        reply = None
        if isinstance(ev, NextToken):
            reply = step(ev.token, ev.argmax_only, ev.only_ids)
        else:
            yield ev


def decode_rate(t_first: float | None, t_end: float, num_out: int) -> float | None:
    """Tokens per second after the first (the first token's time is the prompt's)."""
    if t_first is None or num_out < 2 or t_end <= t_first:
        return None
    return (num_out - 1) / (t_end - t_first)
