"""The Triton RoPE kernel against the torch reference, over shapes, dtypes and layouts.
Skipped without CUDA (fimgate/bench/engine/gpu_check.sh runs it on a lent GPU)."""

import pytest
import torch

from fimgate.kernels.rope import RopeConfig, apply_rope_reference, cos_sin, inv_frequencies

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}


@pytest.mark.parametrize("dtype", list(TOLERANCE))
@pytest.mark.parametrize("layout", ["neox", "gptj"])
@pytest.mark.parametrize(
    "shape,rotary", [((1, 1, 64), None), ((30, 3, 17, 64), None), ((8, 1000, 128), None), ((4, 33, 256), 128), ((2, 5, 80), 64)]
)
def test_kernel_matches_reference(dtype, layout, shape, rotary):
    from fimgate.kernels.rope_triton import apply_rope_triton

    torch.manual_seed(0)
    cfg = RopeConfig(head_dim=shape[-1], base=10000.0, rotary_dim=rotary, layout=layout)
    x = torch.randn(shape, device="cuda", dtype=dtype)
    delta = torch.randint(-500, 5000, (shape[-2],), device="cuda")
    cos, sin = cos_sin(delta, inv_frequencies(cfg).cuda())
    want = apply_rope_reference(x, cos, sin, cfg)
    got = apply_rope_triton(x, cos, sin, layout == "gptj")
    assert got.dtype == x.dtype and got.shape == x.shape
    assert (got.float() - want.float()).abs().max().item() <= TOLERANCE[dtype] * max(1.0, x.abs().max().item())
