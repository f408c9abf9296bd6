"""A layer's linear kept in the GGUF file's quantized blocks (`--dtype auto`, the default for a
quantized file): no fp32 or bf16 copy of the weight exists.

    w = QuantWeight([q, k, v])     # QuantMatrix parts side by side in output rows (a fused qkv)
    y = w(x)                       # x (..., cols) fp32 -> (..., rows) fp32

Every product goes through fimgate/kernels/quant_gemv.c: x quantized per 32 values to int8 (as
llama.cpp pairs its quantized weights with 8-bit activation blocks), integer dot products
(AVX-512 VNNI), fp32 scales and sums. A one-token step reads the weights once, 4-6.5 bits a
weight, instead of 16 (bf16 copies) or 32 (fp32). A prompt of many tokens is compute-bound
rather than read-bound; it goes through the same kernel, which reads each group of weights
once per 4 rows of x from cache (a bf16 GEMM over weights dequantized per call measured slower
here: `python -m fimgate.bench.micro.quant_prompt`).
"""

from __future__ import annotations

import torch

from fimgate.kernels.quant_gemv import QuantMatrix, QuantParts, quant_linear


class QuantWeight:
    def __init__(self, parts: list[QuantMatrix]) -> None:
        self.packed = QuantParts(parts)  # what the kernel (and the fused step) reads
        self.shape = (self.packed.rows, self.packed.cols)

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.packed.parts)

    @property
    def formats(self) -> list[str]:
        return [p.format_name for p in self.packed.parts]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.shape[1]).float()
        return quant_linear(flat, self.packed).reshape(*x.shape[:-1], self.shape[0])
