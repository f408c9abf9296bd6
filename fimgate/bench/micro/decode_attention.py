"""One decode step's attention, torch against fimgate/kernels/decode_attention.c, in one run.

    python -m fimgate.bench.micro.decode_attention [--context 32,1000,2800] [--repeats 7]

SmolLM2-135M's shape: 30 layers, 3 KV heads of 64 dims, 9 query heads; each layer has its own
fp32 KV buffer (4,096 rows), so a pass reads what a real step reads. Best of `repeats` passes.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import fimgate.kernels.decode_attention as kernel
from fimgate.backend.model.llama import _decode_attention

LAYERS, KV_HEADS, GROUP, D, CAPACITY = 30, 3, 3, 64, 4096


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--context", default="32,1000,2800")
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    torch.manual_seed(0)
    bufs = [(torch.randn(KV_HEADS, CAPACITY, D), torch.randn(KV_HEADS, CAPACITY, D)) for _ in range(LAYERS)]
    q = torch.randn(KV_HEADS * GROUP, 1, D)
    built = kernel.kernel_available()
    out = {"threads": torch.get_num_threads(), "kernel_built": built, "ms_per_step": {}}
    for n in (int(c) for c in a.context.split(",")):
        best = {}
        for name in ("torch", "c") if built else ("torch",):
            kernel.KERNEL.set_enabled(name == "c")
            times = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                for k, v in bufs:
                    _decode_attention(q, k[:, :n], v[:, :n], D**-0.5)
                times.append((time.perf_counter() - t0) * 1000)
            best[name] = round(min(times), 2)
        kernel.KERNEL.set_enabled(True)
        out["ms_per_step"][n] = best
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
