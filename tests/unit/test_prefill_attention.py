"""Prompt attention (several queries, grouped heads) equals attention written out by hand, and on
CPU runs SDPA's flash kernel rather than its math path (3-D inputs took the math path: ~60% of a
1k-token prefill)."""

import pytest
import torch

from fimgate.backend.model.llama import _prefill_attention


def _by_hand(q, keys, values, allowed, scale):
    group = q.shape[0] // keys.shape[0]
    k, v = keys.repeat_interleave(group, 0), values.repeat_interleave(group, 0)
    scores = (q.double() @ k.double().transpose(1, 2)) * scale
    scores = scores.masked_fill(~allowed, float("-inf"))
    return (torch.softmax(scores, -1) @ v.double()).float()


@pytest.mark.parametrize("heads,kv_heads,n,length", [(9, 3, 64, 64), (9, 3, 20, 300), (8, 8, 7, 7), (4, 1, 100, 1000)])
def test_prefill_attention_matches_by_hand(heads, kv_heads, n, length):
    g = torch.Generator().manual_seed(n + length)
    q = torch.randn(heads, n, 64, generator=g)
    keys, values = torch.randn(kv_heads, length, 64, generator=g), torch.randn(kv_heads, length, 64, generator=g)
    slots = torch.arange(length - n, length)  # the queries are the last n tokens
    allowed = torch.arange(length)[None, :] <= slots[:, None]
    mask = None if n == length else allowed
    got = _prefill_attention(q, keys, values, mask, 0.125)
    assert got.shape == (heads, n, 64)
    assert torch.allclose(got, _by_hand(q, keys, values, allowed, 0.125), atol=1e-5)


def test_prefill_attention_runs_the_flash_kernel_on_cpu():
    q, kv = torch.randn(9, 256, 64), torch.randn(3, 256, 64)
    with torch.profiler.profile() as prof:
        _prefill_attention(q, kv, kv, None, None)
    ran = {e.key for e in prof.key_averages()}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in ran, sorted(ran)
    assert "aten::_scaled_dot_product_attention_math" not in ran
