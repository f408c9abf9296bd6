"""An output head kept in GGUF blocks (fimgate/backend/model/quant_linear.py: QuantWeight with
refine_top): every row read once with 8-bit activations, then the highest rows computed again in
fp32 from their dequantized weights - so a greedy pick is the fp32-dequantized head's where 8
bits alone pick another row."""

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

from fimgate.backend.model.gguf_blocks import unpack
from fimgate.backend.model.quant_linear import REFINE_TOP, QuantWeight, screen_copy
from fimgate.kernels import cpu_build
from fimgate.kernels.quant_gemv import QuantMatrix, dequantize, quant_linear

pytestmark = pytest.mark.skipif(cpu_build.compiler() is None, reason="no C compiler: quantized weights are dequantized")
ROWS, COLS = 4096, 512
NOISE = 0.02


def _head(fmt: T = T.Q8_0):
    """Rows close to one another (a vocabulary's near-ties), and the fp32 rows they dequantize to."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal((1, COLS)).astype(np.float32) * 0.05
    w = base + rng.standard_normal((ROWS, COLS)).astype(np.float32) * NOISE
    raw = gguf_quantize(w, fmt)
    q, scales = unpack(raw, int(fmt), ROWS, COLS)
    return QuantMatrix.from_parts(int(fmt), q, **scales), torch.from_numpy(gguf_dequantize(raw, fmt).reshape(ROWS, COLS).copy())


def _states(n: int = 200) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, COLS, generator=g) * torch.exp(torch.randn(n, COLS, generator=g))  # outliers, as hidden states have


def test_the_pick_is_the_fp32_heads_where_8_bits_alone_pick_another_row():
    m, w = _head()
    x = _states()
    exact = x @ w.T
    plain = QuantWeight([m])(x)
    refined = QuantWeight([m], refine_top=REFINE_TOP)(x)
    assert (plain.argmax(1) != exact.argmax(1)).sum() >= 3  # 8-bit activations swap near-ties
    assert torch.equal(refined.argmax(1), exact.argmax(1))
    top = exact.topk(4, dim=1).indices
    assert torch.allclose(refined.gather(1, top), exact.gather(1, top), rtol=1e-5, atol=1e-4)


def test_a_healing_constraint_has_its_own_best_rows_computed_again():
    """The allowed tokens' best may lie below the head's overall top rows: those are refined too."""
    m, w = _head()
    x = _states(20)
    head = QuantWeight([m], refine_top=REFINE_TOP)
    g = torch.Generator().manual_seed(2)
    for i in range(x.shape[0]):
        y = head(x[i : i + 1])[0]
        exact = w @ x[i]
        allowed = y.argsort()[: ROWS - REFINE_TOP][torch.randperm(ROWS - REFINE_TOP, generator=g)[:256]]  # none refined above
        assert not torch.allclose(y[allowed], exact[allowed], rtol=1e-5, atol=1e-4)
        head.refine(y, x[i], allowed)
        best = allowed[exact[allowed].argmax()]
        assert allowed[y[allowed].argmax()] == best and torch.allclose(y[best], exact[best], rtol=1e-5, atol=1e-4)


def test_a_few_rows_asked_for_are_the_fp32_heads_exactly():
    """exact_rows (a healing constraint's few allowed tokens, computed alone): each row as the
    fp32-dequantized head gives it, where the 8-bit pass does not."""
    m, w = _head()
    x = _states(10)
    head = QuantWeight([m], refine_top=REFINE_TOP)
    rows = torch.randperm(ROWS, generator=torch.Generator().manual_seed(3))[:300]
    for i in range(x.shape[0]):
        assert torch.allclose(head.exact_rows(rows, x[i]), w[rows] @ x[i], rtol=1e-5, atol=1e-4)
        assert not torch.allclose(head(x[i : i + 1], refine=False)[0][rows], w[rows] @ x[i], rtol=1e-5, atol=1e-4)


def test_a_4_bit_screen_picks_the_rows_and_the_pick_is_still_the_fp32_heads():
    """A Q8_0 head's screening pass on its Q4_0 copy (screen_copy: ggml's own rounding, half the
    bytes read): the pick and its logit are the fp32-dequantized head's all the same, on rows
    closer to one another than a vocabulary's (on the default model's real states: docs/benchmarks.md)."""
    m, w = _head()
    screen = screen_copy(m)
    want = gguf_dequantize(gguf_quantize(w.numpy(), T.Q4_0), T.Q4_0).reshape(ROWS, COLS)
    assert screen.nbytes < 0.6 * m.nbytes and torch.equal(dequantize(screen), torch.from_numpy(want.copy()))
    x = _states()
    exact = x @ w.T
    screened = QuantWeight([m], refine_top=REFINE_TOP, screen=screen)(x)
    assert (quant_linear(x, screen).argmax(1) != exact.argmax(1)).sum() >= 3  # 4 bits alone pick other rows
    assert torch.equal(screened.argmax(1), exact.argmax(1))
    top = exact.argmax(1, keepdim=True)  # (the pick's probability, for the floor rule, from its fp32 logit)
    assert torch.allclose(screened.gather(1, top), exact.gather(1, top), rtol=1e-5, atol=1e-4)
