"""A slot: a contiguous K/V buffer a request computes in, and what it remembers of its tokens.

    slot.tokens            the tokens whose K/V sit at rows 0..len(tokens)
    slot.hidden[p]         the model's last hidden state (after the final norm) at position p:
                           the output head of it gives the logits after tokens[p]

A slot keeps the hidden states of the positions whose logits were computed: a prompt's last
token and every decoded token (drafts included). The next request of the same person often
ends exactly there - a key typed inside the word healing backed off leaves the prompt before
that word as it was (`if s` and `if se` both end at `if `), and a prompt may end inside the
suggestion just decoded - and then needs no forward at all: the head is run on the state kept
(a partial head for a healing constraint: a few allowed rows, 0.1-3.3 ms, against a ~45 ms step
on a 2-core AVX2 CPU; 2026-12-06, 21d294d: `python -m fimgate.bench.micro.quant_head`). That
state is the one the forward computed when it ran, so the logits are those of the same
computation, as cached K/V are.

A state is kept while every token up to its position is unchanged: cut() drops the states past
the tokens that stay (the engine cuts a slot to its common prefix with the next prompt before
anything is written past it). At most MAX_HIDDEN are kept (the highest positions: where the
next prompt ends), ~3.5 KB each for a 896-wide model.
"""

from __future__ import annotations

import torch

MAX_HIDDEN = 256  # hidden states a slot keeps


class Slot:
    def __init__(self, kv) -> None:
        self.kv = kv  # fimgate.backend.model.llama.KVBuffer
        self.user_id: str | None = None
        self.tokens: list[int] = []
        self.hidden: dict[int, torch.Tensor] = {}
        self.last_used = 0.0
        self.busy = False  # a running request computes in it

    def cut(self, n: int) -> None:
        """Keep the first n tokens (drafts not kept, a prompt cancelled part way)."""
        self._drop_from(n)
        del self.tokens[n:]

    def extend(self, tokens: list[int], hidden: list[torch.Tensor] | None) -> None:
        """tokens computed after the slot's: `hidden`, one state a token, as the forward gave them
        (None where it gives none: CUDA graphs)."""
        at = len(self.tokens)
        self.tokens += tokens
        for i, h in enumerate(hidden or ()):
            self.keep(at + i, h)

    def keep(self, position: int, h: torch.Tensor) -> None:
        self.hidden[position] = h
        if len(self.hidden) > MAX_HIDDEN:
            del self.hidden[min(self.hidden)]

    def state_after(self, position: int, token: int) -> torch.Tensor | None:
        """The hidden state after `token` at `position`, if the slot holds that token there and
        kept it (the caller knows the tokens before it are its own: a common prefix, or its
        sequence so far)."""
        if len(self.tokens) <= position or self.tokens[position] != token:
            return None
        return self.hidden.get(position)

    def clear(self, user_id: str | None = None) -> None:
        self.user_id, self.tokens, self.hidden = user_id, [], {}

    def _drop_from(self, n: int) -> None:
        for p in [p for p in self.hidden if p >= n]:
            del self.hidden[p]
