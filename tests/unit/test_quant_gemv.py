"""GGUF's quantized weights multiplied as the file stores them (fimgate/kernels/quant_gemv.c) must
give the dequantized fp32 product: every format, the native path (AVX-512 VNNI or AVX2) and the plain loops, rows
that do not fill a 16-row group, several matrices side by side, the embedding's row lookup."""

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

from fimgate.backend.model.gguf_blocks import BLOCK_BYTES, dequantize, unpack
from fimgate.kernels import cpu_build
from fimgate.kernels.quant_gemv import KERNEL, PLAIN_KERNEL, QuantMatrix, QuantParts, embedding, quant_linear, simd
from fimgate.kernels.quant_gemv import dequantize as kernel_dequantize

needs_kernel = pytest.mark.skipif(cpu_build.compiler() is None, reason="no C compiler: quantized weights are dequantized")
SIMPLE = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
K = [T.Q4_K, T.Q5_K, T.Q6_K]
ROWS, COLS = 37, 512  # two full 16-row groups and a partial one; two K super-blocks


def _raw(fmt: T, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """A (rows, row_bytes) tensor in `fmt`: gguf's quantizer for the simple formats, random bytes
    with sane scales for the K formats (which gguf-py cannot quantize)."""
    rng = np.random.default_rng(seed)
    if fmt in SIMPLE:
        return gguf_quantize(rng.standard_normal((rows, cols)).astype(np.float32) * 0.05, fmt)
    nb = rows * cols // 256
    b = rng.integers(0, 256, (nb, BLOCK_BYTES[int(fmt)]), dtype=np.uint8)
    d = (rng.random((nb, 1)) * 0.01 + 0.001).astype(np.float16).view(np.uint8)
    if fmt == T.Q6_K:
        b[:, 208:210] = d
    else:
        b[:, 0:2] = d
        b[:, 2:4] = (rng.random((nb, 1)) * 0.01).astype(np.float16).view(np.uint8)
    return b.reshape(rows, -1)


def _matrix(fmt: T, rows: int = ROWS, cols: int = COLS, seed: int = 0):
    raw = _raw(fmt, rows, cols, seed)
    q, scales = unpack(raw, int(fmt), rows, cols)
    return QuantMatrix.from_parts(int(fmt), q, **scales), gguf_dequantize(raw, fmt).reshape(rows, cols)


def _x_as_quantized(x: torch.Tensor) -> np.ndarray:
    """x as the kernel rounds it: per 32 values, round(x / d) * d with d = max|x| / 127."""
    v = x.numpy().astype(np.float32)
    b = v.reshape(v.shape[0], -1, 32)
    amax = np.abs(b).max(-1, keepdims=True)
    inv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    return (np.clip(np.rint(b * inv), -127, 127) * (amax / np.float32(127))).reshape(v.shape)


@pytest.mark.parametrize("fmt", SIMPLE + K, ids=lambda f: f.name)
def test_unpacked_blocks_are_the_files_numbers(fmt):
    raw = _raw(fmt, ROWS, COLS)
    q, scales = unpack(raw, int(fmt), ROWS, COLS)
    assert np.array_equal(dequantize(int(fmt), q, scales), gguf_dequantize(raw, fmt).reshape(ROWS, COLS))


@needs_kernel
@pytest.mark.parametrize("fmt", SIMPLE + K, ids=lambda f: f.name)
@pytest.mark.parametrize("kernel", [KERNEL, PLAIN_KERNEL], ids=["native", "plain"])
def test_products_equal_the_dequantized_weights(fmt, kernel):
    """Against the file's fp32 weights times x rounded as the kernel rounds it: equal up to fp32
    sums; against x itself: within the bound that rounding allows."""
    m, w = _matrix(fmt)
    x = torch.randn(11, COLS, generator=torch.Generator().manual_seed(1))  # 11 rows: an 8-row tile and a partial one
    y = quant_linear(x, m, kernel=kernel).numpy().astype(np.float64)
    want = _x_as_quantized(x).astype(np.float64) @ w.T.astype(np.float64)
    assert np.abs(y - want).max() <= 1e-5 * np.abs(want).max()
    exact = x.numpy().astype(np.float64) @ w.T.astype(np.float64)
    step = np.abs(x.numpy()).reshape(11, -1, 32).max(-1) / 127  # dx per block
    bound = (step / 2) @ np.abs(w.astype(np.float64)).reshape(ROWS, -1, 32).sum(-1).T
    assert (np.abs(y - exact) <= bound * 1.001 + 1e-5 * np.abs(exact).max()).all()


@needs_kernel
def test_the_native_path_runs_where_the_cpu_has_vnni_or_avx2():
    with open("/proc/cpuinfo") as f:
        flags = next((line for line in f if line.startswith("flags")), "") + " "
    if " avx512_vnni " in flags and " avx512bw " in flags:
        assert simd() == "avx512-vnni"
    elif all(f" {f} " in flags for f in ("avx2", "fma", "f16c")):
        assert simd() == "avx2"
    else:
        assert simd() is None


@needs_kernel
def test_q8_0_values_at_the_ends_of_int8_multiply_exactly():
    """Q8_0 values of -128 and 127 against x at +-127: the AVX2 path multiplies 8-bit values as
    |w| times x with w's sign, where a pair of products must not pass int16."""
    raw = _raw(T.Q8_0, ROWS, COLS).copy()
    blocks = raw.reshape(-1, 34)
    blocks[:, 2:] = np.where(np.arange(32) % 2 == 0, -128, 127).astype(np.int8).view(np.uint8)
    blocks[::3, 2:] = np.uint8(127)
    q, scales = unpack(raw, int(T.Q8_0), ROWS, COLS)
    m, w = QuantMatrix.from_parts(int(T.Q8_0), q, **scales), gguf_dequantize(raw, T.Q8_0).reshape(ROWS, COLS)
    x = torch.where(torch.arange(COLS) % 3 == 0, -1.0, 1.0).repeat(3, 1)  # every value of x at +-127
    want = _x_as_quantized(x).astype(np.float64) @ w.T.astype(np.float64)
    for kernel in (KERNEL, PLAIN_KERNEL):
        y = quant_linear(x, m, kernel=kernel).numpy().astype(np.float64)
        assert np.abs(y - want).max() <= 1e-5 * np.abs(want).max()


@needs_kernel
@pytest.mark.parametrize("fmt", [T.Q5_0, T.Q4_K, T.Q6_K], ids=lambda f: f.name)
def test_dequantized_rows_are_the_files_weights(fmt):
    m, w = _matrix(fmt)
    assert np.array_equal(kernel_dequantize(m).numpy(), w)
    assert torch.equal(kernel_dequantize(m, torch.bfloat16, rows=(16, 37)), torch.from_numpy(w[16:37]).to(torch.bfloat16))
    ids = torch.tensor([0, 36, 17, 17])
    assert np.array_equal(embedding(m, ids).numpy(), w[ids.numpy()])
    with pytest.raises(IndexError):
        embedding(m, torch.tensor([37]))


@needs_kernel
def test_matrices_of_different_formats_side_by_side_are_each_alone():
    """q, k, v of one layer may be stored in different formats: one call, outputs side by side."""
    parts = [_matrix(fmt, rows, COLS, seed)[0] for fmt, rows, seed in ((T.Q5_0, 40, 1), (T.Q8_0, 16, 2), (T.Q4_K, 9, 3))]
    x = torch.randn(3, COLS, generator=torch.Generator().manual_seed(4))
    together = quant_linear(x, QuantParts(parts))
    assert torch.equal(together, torch.cat([quant_linear(x, p) for p in parts], dim=1))


@needs_kernel
def test_a_row_of_x_is_the_same_alone_or_in_a_batch():
    """What a batched step relies on: each row's product does not depend on the rows beside it."""
    m, _ = _matrix(T.Q4_K)
    x = torch.randn(13, COLS, generator=torch.Generator().manual_seed(5))
    together = quant_linear(x, m)
    for i in range(13):
        assert torch.equal(together[i], quant_linear(x[i : i + 1], m)[0])


@needs_kernel
@pytest.mark.parametrize("fmt", [T.Q8_0, T.Q6_K], ids=lambda f: f.name)
def test_residual_activations_are_good_to_about_16_bits(fmt):
    """x as two 8-bit rows (x, then what its rounding left out): what the output head takes."""
    m, w = _matrix(fmt)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, COLS, generator=g) * torch.exp(torch.randn(5, COLS, generator=g))  # outliers, as hidden states have
    exact = x.double().numpy() @ w.T.astype(np.float64)
    plain = np.abs(quant_linear(x, m).numpy() - exact).max() / np.abs(exact).max()
    residual = np.abs(quant_linear(x, m, residual=True).numpy() - exact).max() / np.abs(exact).max()
    assert residual < 1e-4 and residual < plain / 50
