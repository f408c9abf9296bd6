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

An output head is the exception: a greedy pick is decided there between logits a rounding
can swap. So every row of the head is read once with 8-bit activations, and then the REFINE_TOP
rows that came out highest are computed again in fp32 from their dequantized weights (a few
dozen rows of 151,936: ~1 ms). The pick and its probability are then the fp32-dequantized head's:
over 300 real steps of the default model the argmax equalled that reference's every time, and
the top probability was within 0.001 of it (8-bit alone: 99.33% and 0.022).

Where the file's head has more than 4 bits (the default model's is Q8_0, 145 MB), the pass that
picks those rows reads a Q4_0 copy of it instead (screen_copy, made at load: 77 MB more, ~2 s): the
same 300 steps' argmax equalled the fp32 head's every time, the top probability within 0.0026,
and one token's head took 5.5 ms against 8.6 (2 threads; 8.4 against 14.2 ms for the pass on one;
2026-12-06, AMD EPYC Zen 1 class, `python -m fimgate.bench.micro.quant_head`).

This replaced ~16-bit "residual" activations (x as two 8-bit rows, x and what its rounding left
out: quant_linear's residual) for the whole head, which had taken greedy completions identical to
the fp32-dequantized reference from 96.5% to 98.0% of 200 HumanEval single-line problems. On an
AVX-512 VNNI CPU the second row cost nothing (the pass waits on the reads), but on an AVX2 one
it is computed, not read: 15.1 ms a token against 11.4 ms for 8 bits and the refined rows
(2026-12-05, AMD EPYC Zen 1 class, 2 cores; `python -m fimgate.bench.micro.quant_head`).
"""

from __future__ import annotations

import torch

from fimgate.kernels.quant_gemv import QuantMatrix, QuantParts, dequantize, embedding, quant_linear
from fimgate.kernels.quant_pack import Q4_0

REFINE_TOP = 32  # rows of an output head computed again in fp32: those that came out highest
# up to here, a head's rows asked for (a healing constraint's allowed tokens) are computed in fp32
# from their dequantized weights rather than by the 8-bit pass over all rows: the 626 tokens that
# begin "se" take 3.3 ms, 1,343 ("re") 6.7 ms, against 9.5-10.8 ms for the default model's whole
# head (AMD EPYC Zen 1 class, 2 cores, 2026-12-06; `python -m fimgate.bench.micro.quant_head`):
# the two meet near 1,800 rows
EXACT_ROWS = 1536


class QuantWeight:
    def __init__(self, parts: list[QuantMatrix], refine_top: int = 0, screen: QuantMatrix | None = None) -> None:
        """refine_top: for each row of x, the outputs that came out highest, that many, are
        computed again in fp32 from the dequantized weight rows (an output head: above).
        screen: a smaller copy of the one part (screen_copy) whose pass picks the rows refined."""
        self.packed = QuantParts(parts)  # what the kernel (and the fused step) reads
        self.refine_top = refine_top if len(parts) == 1 else 0
        self.screen = QuantParts([screen]) if screen is not None and self.refine_top else None
        self.shape = (self.packed.rows, self.packed.cols)

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.packed.parts)

    @property
    def formats(self) -> list[str]:
        return [p.format_name for p in self.packed.parts]

    def __call__(self, x: torch.Tensor, refine: bool = True) -> torch.Tensor:
        """refine False: the one 8-bit pass only (the caller refines each row itself: refine())."""
        flat = x.reshape(-1, self.shape[1]).float()
        y = quant_linear(flat, self.screen or self.packed)
        if refine:
            for i in range(flat.shape[0]):
                self.refine(y[i], flat[i])
        return y.reshape(*x.shape[:-1], self.shape[0])

    def exact_rows(self, rows: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Outputs `rows` of x (cols,) in fp32, from the dequantized weight rows (one part only)."""
        return embedding(self.packed.parts[0], rows) @ x.float()

    def refine(self, y: torch.Tensor, x: torch.Tensor, among: torch.Tensor | None = None) -> None:
        """y (rows,) from x (cols,): the highest refine_top of the rows `among` (all by default;
        a healing constraint's allowed tokens, whose best may lie below the head's overall top
        rows) computed again in fp32, in place."""
        if not self.refine_top or (among is not None and not among.numel()):
            return
        if among is None:
            rows = y.topk(min(self.refine_top, y.numel())).indices
        else:
            rows = among[y[among].topk(min(self.refine_top, among.numel())).indices]
        y[rows] = self.exact_rows(rows, x)


def screen_copy(w: QuantMatrix, chunk: int = 16384) -> QuantMatrix:
    """W in Q4_0 (4 bits and an fp16 scale per 32 values, rounded as ggml rounds them), from its
    dequantized rows: a head's screening pass then reads half the bytes of Q8_0 (~1 s to make
    for the default model's head on 2 cores)."""
    qs, ds = [], []
    for a in range(0, w.rows, chunk):
        x = dequantize(w, rows=(a, min(w.rows, a + chunk))).view(-1, 32)
        d = x.gather(1, x.abs().argmax(1, keepdim=True)) / -8.0  # the largest value, signed, is -8 d
        inv = torch.where(d != 0, 1.0 / torch.where(d != 0, d, 1.0), 0.0)
        qs.append((x * inv + 8.5).floor_().clamp_(0, 15).to(torch.uint8).view(-1, w.cols))
        ds.append(d.view(-1, w.cols // 32).half())
    return QuantMatrix.from_parts(Q4_0, torch.cat(qs).numpy(), d=torch.cat(ds).numpy())
