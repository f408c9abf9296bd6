"""The decode-step attention (grouped heads, no K/V copies) equals torch's SDPA with GQA."""

import pytest
import torch
import torch.nn.functional as F

from fimgate.backend.model.llama import _decode_attention


@pytest.mark.parametrize("heads,kv_heads,length", [(9, 3, 1), (9, 3, 700), (8, 8, 33), (4, 1, 2048)])
def test_decode_attention_matches_sdpa(heads, kv_heads, length):
    g = torch.Generator().manual_seed(length)
    capacity = length + 5  # the cache is a view into a larger buffer, as in the engine
    buf_k = torch.randn(kv_heads, capacity, 64, generator=g)
    buf_v = torch.randn(kv_heads, capacity, 64, generator=g)
    q = torch.randn(heads, 1, 64, generator=g)
    keys, values = buf_k[:, :length], buf_v[:, :length]
    want = F.scaled_dot_product_attention(q, keys, values, enable_gqa=True, scale=0.125)
    got = _decode_attention(q, keys, values, 0.125)
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
