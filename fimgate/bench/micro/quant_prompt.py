"""A prompt's linears on a quantized model, two ways, in one run: the quantized kernel itself
(fimgate/kernels/quant_gemv.c, x in 8-bit blocks, each 16-row group unpacked once per 8 rows of
x) against the weights dequantized to bf16 on the fly and multiplied by torch's bf16 GEMM (what
`--prefill-dtype bfloat16` does with its kept copies, without keeping them).

    python -m fimgate.bench.micro.quant_prompt [--model qwen2.5-coder-0.5b] [--rows 64,256] [--layers 4]

Every layer linear of the first `layers` layers, `rows` tokens of random activations; the best
of `repeats` passes, in milliseconds per layer. (On 2026-12-03 here, Qwen2.5-Coder-0.5B: 16 rows
2.5 vs 41 ms, 64 rows 8.3 vs 50, 256 rows 27 vs 65: the kernel, 2.4-16x.)
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

from fimgate.backend.model.gguf_blocks import supported
from fimgate.backend.model.gguf_file import GGUFFile
from fimgate.backend.model.registry import resolve_model
from fimgate.backend.model.weights import _quant_matrix
from fimgate.kernels.quant_gemv import dequantize, quant_linear


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--rows", default="16,64,256")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    f = GGUFFile(resolve_model(a.model))
    mats = [
        _quant_matrix(t)
        for t in f.tensors
        if t.name.startswith("blk.") and int(t.name.split(".")[1]) < a.layers and supported(int(t.tensor_type))
    ]
    out = {}
    for rows in (int(r) for r in a.rows.split(",")):
        xs = {m.cols: torch.randn(rows, m.cols) for m in mats}

        def quantized():
            for m in mats:
                quant_linear(xs[m.cols], m)

        def bf16_tiles():
            for m in mats:
                F.linear(xs[m.cols].to(torch.bfloat16), dequantize(m, torch.bfloat16)).float()

        row = {}
        for name, fn in (("quantized_kernel", quantized), ("bf16_dequantized_on_the_fly", bf16_tiles)):
            fn()
            best = min(_timed(fn) for _ in range(a.repeats))
            row[name] = {"ms_per_layer": round(best * 1000 / a.layers, 2)}
        out[str(rows)] = row
    print(json.dumps(out, indent=2))


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
