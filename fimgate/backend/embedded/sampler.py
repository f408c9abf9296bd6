"""Pick the next token: greedy or temperature + nucleus (top-p), optionally within an allowed set."""

from __future__ import annotations

import torch

from fimgate.backend.base import SamplingParams


def sample(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None, allowed_ids: list[int] | None = None
) -> int:
    """logits: (vocab,) float32."""
    if allowed_ids is not None:
        masked = torch.full_like(logits, float("-inf"))
        idx = torch.tensor(allowed_ids, dtype=torch.long)
        masked[idx] = logits[idx]
        logits = masked
    if params.temperature == 0:
        return int(torch.argmax(logits))
    # shifted so the best logit is 0 first: a tiny temperature then scales the rest to -inf (greedy
    # in the limit), where dividing raw logits would overflow to inf - inf = nan
    probs = torch.softmax((logits - logits.max()) / params.temperature, dim=-1)
    if params.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < params.top_p
        sorted_p = torch.where(keep, sorted_p, torch.zeros_like(sorted_p))
        choice = torch.multinomial(sorted_p / sorted_p.sum(), 1, generator=generator)
        return int(order[choice])
    return int(torch.multinomial(probs, 1, generator=generator))
