"""The int8 GEMV (fimgate/kernels/int8_gemv.py): the C kernel equals the dequantized product over shapes
that exercise its edges (rows not a multiple of its 8-row blocks, k not a multiple of 16, up to
4 activation rows), and the fallback to torch's kernel gives the same answer to bf16 rounding."""

import shutil

import pytest
import torch

import fimgate.kernels.int8_gemv as K


def _dequantized(q, scales):
    return q.float() * scales.float()[:, None]


def test_quantize_rows_bound_holds_for_the_stored_scales():
    torch.manual_seed(0)
    w = torch.randn(300, 70) * torch.logspace(-3, 1, 300)[:, None]  # rows of very different size
    w[5, 3] = 40.0  # an outlier
    q, scales, _ = K.quantize_rows(w)
    assert q.dtype == torch.int8 and scales.dtype == torch.bfloat16
    assert int(q.abs().max()) <= 127
    err = (w - _dequantized(q, scales)).abs()
    assert bool((err <= scales.float()[:, None] / 2 * (1 + 1e-6)).all())


def test_a_compiler_means_the_c_kernel_runs():
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: torch's kernel is the fallback")
    assert K.kernel_available(), "a C compiler is installed but fimgate/kernels/int8_gemv.c did not build"


@pytest.mark.parametrize("n,k,m", [(1, 16, 1), (7, 33, 1), (9, 576, 2), (960, 576, 1), (576, 1536, 4), (13, 5, 3)])
def test_c_kernel_equals_the_dequantized_product(n, k, m):
    if not K.kernel_available():
        pytest.skip("the C kernel is not built here")
    torch.manual_seed(n * 1000 + k)
    rows = K.quantize_rows(torch.randn(n, k))
    q, scales = rows.q, rows.scales
    x = torch.randn(m, k)
    want = x.double() @ _dequantized(q, scales).double().T
    got = K.int8_linear(x, rows)
    assert got.shape == (m, n) and got.dtype == torch.float32
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-4 * k**0.5)


@pytest.mark.parametrize("n,k,m", [(1, 16, 1), (7, 33, 1), (9, 576, 2), (576, 1536, 4), (13, 5, 3), (40, 64, 8)])
def test_bf16_weights_multiply_as_their_exact_fp32_values(n, k, m):
    """bf16_gemv widens each bf16 weight exactly and keeps x and the sums in fp32: the product
    of the bf16-rounded weights, not of x rounded to bf16 too (what torch's bf16 product does)."""
    if not K.kernel_available():
        pytest.skip("the C kernel is not built here")
    torch.manual_seed(n * 7 + k)
    w = torch.randn(n, k).to(torch.bfloat16)
    x = torch.randn(m, k)
    want = x.double() @ w.double().T
    got = K.bf16_linear(x, w)
    assert got.shape == (m, n) and got.dtype == torch.float32
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5 * k**0.5)
    rounded_x = (x.to(torch.bfloat16).double() @ w.double().T - want).abs().max()
    assert (got.double() - want).abs().max() < rounded_x / 20  # far closer than a bf16 x would be
    with pytest.raises(ValueError):
        K.bf16_linear(torch.randn(1, k + 1), w)


@pytest.mark.parametrize("k", [5, 33, 72, 576])
def test_bf16_rows_of_a_batch_equal_each_row_alone(k):
    """More than 4 rows of x take the widened-block path: each row's numbers are still the ones it
    gets alone (a batched step equals the step alone, bit for bit)."""
    if not K.kernel_available():
        pytest.skip("the C kernel is not built here")
    torch.manual_seed(k)
    w = torch.randn(43, k).to(torch.bfloat16)
    x = torch.randn(8, k)
    alone = torch.cat([K.bf16_linear(x[i : i + 1], w) for i in range(8)])
    for m in (5, 8):
        assert torch.equal(K.bf16_linear(x[:m], w), alone[:m])


def test_c_kernel_takes_a_non_contiguous_x_and_refuses_a_wrong_shape():
    if not K.kernel_available():
        pytest.skip("the C kernel is not built here")
    rows = K.quantize_rows(torch.randn(24, 40))
    q, scales = rows.q, rows.scales
    x = torch.randn(40, 2).T  # (2, 40), transposed view
    assert torch.allclose(K.int8_linear(x, rows), x @ _dequantized(q, scales).T, atol=1e-4)
    with pytest.raises(ValueError):
        K.int8_linear(torch.randn(1, 41), rows)


def test_torch_fallback_agrees_with_the_kernel():
    torch.manual_seed(3)
    rows = K.quantize_rows(torch.randn(200, 96))
    q, scales = rows.q, rows.scales
    x = torch.randn(1, 96)
    want = x @ _dequantized(q, scales).T
    K.KERNEL.set_enabled(False)
    try:
        fallback = K.int8_linear(x, rows)  # bf16 activations and output: close, not equal
    finally:
        K.KERNEL.set_enabled(True)
    assert not torch.equal(fallback, want)
    assert ((fallback - want).norm() / want.norm()).item() < 0.01


def test_a_missing_kernel_source_falls_back_to_torch_with_one_log_line(monkeypatch, tmp_path, caplog):
    """An install without the C sources (or a broken one) must still serve: torch does the work."""
    from fimgate.kernels import cpu_build

    monkeypatch.setattr(cpu_build, "__file__", str(tmp_path / "cpu_build.py"))
    monkeypatch.setattr(cpu_build, "compiler", lambda: "cc")
    with caplog.at_level("WARNING", logger=cpu_build.__name__):
        assert cpu_build._build("int8_gemv") is None
    assert [r.getMessage() for r in caplog.records if "not installed" in r.getMessage()] != []
    assert len(caplog.records) == 1
