"""Time the Triton re-rotation kernel against the torch reference on CUDA (fimgate/bench/engine/gpu_check.sh)."""

import json

import torch
import triton.testing

from fimgate.kernels.rope import RopeConfig, apply_rope_reference, cos_sin, inv_frequencies
from fimgate.kernels.rope_triton import apply_rope_triton

rows = []
for layers, heads, tokens, dim in ((30, 3, 2048, 64), (32, 8, 4096, 128), (18, 1, 8192, 256)):
    for dtype in (torch.bfloat16, torch.float32):
        cfg = RopeConfig(head_dim=dim, layout="neox")
        k = torch.randn(layers, heads, tokens, dim, device="cuda", dtype=dtype)
        cos, sin = cos_sin(torch.full((tokens,), 17, device="cuda"), inv_frequencies(cfg).cuda())
        ref = triton.testing.do_bench(lambda: apply_rope_reference(k, cos, sin, cfg))
        ker = triton.testing.do_bench(lambda: apply_rope_triton(k, cos, sin, False))
        moved = 2 * k.numel() * k.element_size()
        rows.append(
            {
                "shape": [layers, heads, tokens, dim],
                "dtype": str(dtype),
                "reference_ms": round(ref, 4),
                "triton_ms": round(ker, 4),
                "speedup": round(ref / ker, 2),
                "triton_GB_per_s": round(moved / (ker / 1000) / 1e9, 1),
            }
        )
print(json.dumps(rows, indent=2))
