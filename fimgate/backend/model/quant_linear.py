"""A layer's linear kept in the GGUF file's quantized blocks (`--dtype auto`, the default for a
quantized file): no fp32 or bf16 copy of the weight exists.

    w = QuantWeight([q, k, v])     # QuantMatrix parts side by side in output rows (a fused qkv)
    y = w(x)                       # x (..., cols) fp32 -> (..., rows) fp32

Every product goes through fimgate/kernels/quant_gemv.c: x quantized per 32 values to int8 (as
llama.cpp pairs its quantized weights with 8-bit activation blocks), integer dot products
(AVX-512 VNNI, or AVX2), fp32 scales and sums. A one-token step reads the weights once, 4-6.5 bits a
weight, instead of 16 (bf16 copies) or 32 (fp32). A prompt of many tokens is compute-bound
rather than read-bound; it goes through the same kernel, which unpacks each group of weights
once per 8 rows of x (a bf16 GEMM over weights dequantized per call took 2.4-16x as long here,
16-256 rows: `python -m fimgate.bench.micro.quant_prompt`).

An 8-bit output head is the exception: a greedy pick is decided there between logits a rounding
can swap, so its activations go as two 8-bit rows - x, then what x's rounding left out (~16 bits) -
in the same pass over the head's weights. One token's head costs the same (4.25 vs 4.35 ms here:
the pass waits on the reads), and greedy completions identical to the fp32-dequantized reference
went from 96.5% to 98.0% of 200 HumanEval single-line problems (pass@1 57.0 vs 56.5; residual
activations in every layer as well: 97.5%, so the layers keep 8 bits).
"""

from __future__ import annotations

import torch

from fimgate.kernels.quant_gemv import QuantMatrix, QuantParts, quant_linear


class QuantWeight:
    def __init__(self, parts: list[QuantMatrix], residual: bool = False) -> None:
        """residual: every row of x goes as two 8-bit rows, x and what its rounding left out
        (~16-bit activations: quant_linear's residual). The output head takes it (below)."""
        self.packed = QuantParts(parts)  # what the kernel (and the fused step) reads
        self.residual = residual
        self.shape = (self.packed.rows, self.packed.cols)

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.packed.parts)

    @property
    def formats(self) -> list[str]:
        return [p.format_name for p in self.packed.parts]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.shape[1]).float()
        return quant_linear(flat, self.packed, residual=self.residual).reshape(*x.shape[:-1], self.shape[0])
