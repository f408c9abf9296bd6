"""The output head of a greedy step: screen every row with an int8 copy, then compute exactly
only the rows that can still be the argmax.

A one-token step's head is the largest single read of the step: SmolLM2's 49,152 x 576 fp32
matrix is 113 MB, ~4.5 ms of a ~27 ms step with the layers' weights evicting it from cache.
Greedy decoding needs only the argmax. An int8 copy of the head (28 MB, one bf16 scale per
row) gives every logit to within a bound known row by row:

    approx_r = bf16( sum_j q_rj * s_r * bf16(x_j) )        q_rj = round(w_rj / s_r), |q| <= 127
    |exact_r - approx_r| <= s_r * |x|_1 * (1/2          weight rounding, |w - q s| <= s/2
                                           + 127 u      x rounded to bf16, u = 2^-8
                                           + 127 n e)   fp32 accumulation of n terms, e = 2^-24
                            + 2u |approx_r|             the kernel's bf16 output

A row whose upper bound (approx + bound) is below the best lower bound (max of approx - bound)
cannot be the argmax; the rest - a median of 11 rows of 49,152 on real hidden states, at most
~200 - are computed in fp32 from the fp32 rows and written over their screened values. The
screen runs in C where fimgate/kernels/int8_gemv.c is built (product, bounds and rows in one call):
one greedy step's head, cold, ~3.4 ms against 4.9 ms for the fp32 head. The
argmax of the returned logits is then the fp32 head's (up to fp32 rounding between two rows
within ~1e-6 of each other, the level at which a full prefill and a decode step already differ).
The other entries are the screened approximations: right for the argmax, not for sampling or a
constrained choice, so the engine asks for it only in greedy, unconstrained steps.
"""

from __future__ import annotations

import torch

from fimgate.kernels.int8_gemv import int8_linear, int8_screen, int8_screen_batch, quantize_rows

_BF16_U = 2.0**-8
_FP32_U = 2.0**-24


class ScreenedHead:
    def __init__(self, w: torch.Tensor) -> None:
        """w: the (vocab, hidden) fp32 head on CPU."""
        self.fp32 = w.detach().float().contiguous()
        self.int8 = quantize_rows(self.fp32)
        n = self.fp32.shape[1]
        self.bound_per_l1 = self.int8.scales_f32 * (0.5 + 127 * _BF16_U * (1 + _BF16_U) + 127 * (n + 2) * _FP32_U * 1.01)

    def screen(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (hidden,) fp32 -> (approximate logits, their error bounds), both (vocab,) fp32."""
        approx = int8_linear(x[None], self.int8)[0]
        return approx, self._bound(x, approx)

    def _bound(self, x: torch.Tensor, approx: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.bound_per_l1 * x.abs().sum(), approx.abs(), torch.tensor(2 * _BF16_U))

    def __call__(self, x: torch.Tensor, allowed: list[int] | None = None) -> torch.Tensor:
        """x: (hidden,) fp32 -> (vocab,) logits whose argmax is the fp32 head's; with `allowed`,
        whose argmax over those ids is (the other entries are -inf)."""
        done = int8_screen(x, self.int8, self.bound_per_l1, 2 * _BF16_U)  # C: one call
        if done is not None and allowed is None:
            approx, rows = done
        else:
            approx, bound = self.screen(x) if done is None else (done[0], self._bound(x, done[0]))
            if allowed is not None:
                keep = torch.tensor(allowed, dtype=torch.long)
                masked = torch.full_like(approx, float("-inf"))
                masked[keep] = approx[keep]
                approx = masked
            rows = torch.nonzero(approx + bound >= (approx - bound).max())[:, 0]
        approx[rows] = self.fp32.index_select(0, rows) @ x
        return approx

    def batch(self, xs: torch.Tensor) -> list[torch.Tensor] | None:
        """Unconstrained greedy heads of several steps, xs (m, hidden): what __call__ gives for each
        row alone, the int8 head read once for all. None without the C kernel."""
        done = int8_screen_batch(xs, self.int8, self.bound_per_l1, 2 * _BF16_U)
        if done is None:
            return None
        out = []
        for x, (approx, rows) in zip(xs, done):
            approx = approx.clone()
            approx[rows] = self.fp32.index_select(0, rows) @ x
            out.append(approx)
        return out
