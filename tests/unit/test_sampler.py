"""Sampling at the edges a client can choose: any temperature and top_p the API accepts picks a
real token (never nan, never an error), and a vanishing temperature behaves as greedy."""

import pytest
import torch

from fimgate.backend.base import SamplingParams
from fimgate.backend.embedded.sampler import sample


@pytest.mark.parametrize("temperature,top_p", [(1e-38, 1.0), (1e-38, 1e-38), (1.0, 1e-38), (2.0, 1e-38), (2.0, 1.0)])
def test_extreme_settings_pick_an_allowed_token(temperature, top_p):
    logits = torch.linspace(-40.0, 40.0, 500)  # real models' logits reach tens: x / 1e-38 overflows float32
    allowed = [3, 7, 499]
    gen = torch.Generator().manual_seed(0)
    tok = sample(logits, SamplingParams(temperature=temperature, top_p=top_p), gen, allowed)
    assert tok in allowed
    if temperature < 1e-30 or top_p < 1e-30:
        assert tok == 499  # the best allowed token, as greedy would pick
