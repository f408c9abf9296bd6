"""The C decode-attention kernel (fimgate/kernels/decode_attention.c) equals torch's attention for one
query token: grouped heads, views into a KV buffer that start past row 0, one row to thousands,
and lengths that do not split evenly over the threads."""

import pytest
import torch

from fimgate.kernels.decode_attention import decode_attention, kernel_available


def _reference(q, keys, values, scale):
    kv_heads = keys.shape[0]
    group = q.shape[0] // kv_heads
    k = keys.repeat_interleave(group, 0).double()
    v = values.repeat_interleave(group, 0).double()
    p = torch.softmax(q.double() @ k.transpose(1, 2) * scale, dim=-1)
    return (p @ v).float()


@pytest.mark.parametrize(
    "kv_heads,group,d,start,n",
    [(3, 3, 64, 0, 1), (3, 3, 64, 5, 7), (1, 4, 32, 0, 129), (2, 1, 128, 100, 1000), (3, 3, 64, 17, 3001)],
)
def test_kernel_equals_attention(kv_heads, group, d, start, n):
    if not kernel_available():
        pytest.skip("the C kernel is not built here")
    torch.manual_seed(n)
    buf_k = torch.randn(kv_heads, 4096, d) * 2
    buf_v = torch.randn(kv_heads, 4096, d)
    keys, values = buf_k[:, start : start + n], buf_v[:, start : start + n]
    q = torch.randn(kv_heads * group, 1, d)
    got = decode_attention(q, keys, values, d**-0.5)
    assert got is not None and got.shape == (kv_heads * group, 1, d)
    assert torch.allclose(got, _reference(q, keys, values, d**-0.5), atol=2e-6, rtol=1e-5)


def test_large_scores_do_not_overflow():
    if not kernel_available():
        pytest.skip("the C kernel is not built here")
    keys = torch.randn(1, 300, 16) * 50
    values = torch.randn(1, 300, 16)
    q = torch.randn(2, 1, 16) * 50
    got = decode_attention(q, keys, values, 1.0)
    assert torch.isfinite(got).all()
    assert torch.allclose(got, _reference(q, keys, values, 1.0), atol=1e-5)


def test_it_declines_what_it_does_not_handle():
    q = torch.randn(4, 1, 8)
    keys = torch.randn(2, 10, 8)
    assert decode_attention(q.double(), keys.double(), keys.double(), 1.0) is None  # not fp32
    assert decode_attention(q, keys.transpose(1, 2).contiguous().transpose(1, 2), keys, 1.0) is None  # rows strided


@pytest.mark.parametrize("n", [130, 1000, 3001])
def test_the_result_does_not_depend_on_the_thread_count(n):
    """The server runs each request on the cores free at that moment (backend/embedded/threads.py),
    so one suggestion may be decoded on 2 threads and its re-asked twin on 1: the two must be the same
    bits, or a near-tie flips a suggestion (a speculative draft's verify then disagrees with plain
    decoding, type-through with a cold request)."""
    if not kernel_available():
        pytest.skip("the C kernel is not built here")
    torch.manual_seed(n)
    keys, values = torch.randn(2, n, 64) * 2, torch.randn(2, n, 64)
    q = torch.randn(14, 1, 64)
    was = torch.get_num_threads()
    try:
        outs = []
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            outs.append(decode_attention(q, keys, values, 0.125))
    finally:
        torch.set_num_threads(was)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
