"""One decode step's linears, three ways, in one run: fp32 F.linear, torch's int8 weight-only
kernel (bf16 activations), and fimgate/kernels/int8_gemv.c (fp32 activations).

    python -m fimgate.bench.micro.int8_gemv [--layers 30] [--repeats 7]

SmolLM2-135M's shapes (per layer: qkv 960x576, o 576x576, gate_up 3072x576, down 576x1536),
random weights, one token. Every matrix is read once per pass, so after the first pass the
weights come from wherever 120 matrices fit (L3 here); the best of `repeats` passes is printed.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

from fimgate.kernels.int8_gemv import int8_linear, kernel_available, quantize_rows

SHAPES = [(960, 576), (576, 576), (3072, 576), (576, 1536)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    torch.manual_seed(0)
    mats = []
    for _ in range(a.layers):
        for n, k in SHAPES:
            w = torch.randn(n, k) * 0.05
            mats.append((w, quantize_rows(w), torch.randn(1, k)))
    ways = {
        "fp32": lambda w, r, x: F.linear(x, w),
        "torch_int8_bf16_act": lambda w, r, x: torch.ops.aten._weight_int8pack_mm(x.to(torch.bfloat16), r.q, r.scales),
    }
    if kernel_available():
        ways["c_int8_fp32_act"] = lambda w, r, x: int8_linear(x, r)
    best = {name: float("inf") for name in ways}
    for _ in range(a.repeats):
        for name, f in ways.items():
            t0 = time.perf_counter()
            for m in mats:
                f(*m)
            best[name] = min(best[name], (time.perf_counter() - t0) * 1000)
    mb = {"fp32": sum(m[0].numel() * 4 for m in mats) / 1e6, "int8": sum(m[1].q.numel() for m in mats) / 1e6}
    print(
        json.dumps(
            {
                "linears": len(mats),
                "threads": torch.get_num_threads(),
                "weights_mb": mb,
                "best_ms": {k: round(v, 2) for k, v in best.items()},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
