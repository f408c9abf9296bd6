"""Linears that multiply in a cheaper precision than the model's fp32 weights, chosen by how many
tokens they see at once (CPU). Each is measured with `fimgate bench quality --compare-dtype`
(`--compare-step-dtype`, `--compare-prefill-dtype`).

One-token steps, `--dtype int8` (decoding, a keystroke's 1-token append). A decode step reads
every weight once, and on a 2-core VM it is bound by that read: fp32 SmolLM2-135M is ~540 MB per
token. The layers' linears keep a per-output-channel int8 copy (a quarter of the bytes,
fimgate/kernels/int8_gemv.py), multiplied by fp32 activations in a small C kernel (sixth session; torch's
int8 weight-only kernel, which rounds activations and outputs to bf16, is the fallback without a
C compiler); norms, attention, K/V and the residual stream stay fp32. The 120 linears of one
step (`python -m fimgate.bench.micro.int8_gemv`, one run): fp32 25.4 ms, torch's int8 kernel 15.1 ms, the C
kernel 11.8 ms; int8 with fp32 activations through torch ~30 ms (no fast path);
fbgemm's dynamic int8 (int8 activations too) 5.5 ms, but only 30% of HumanEval completions stayed
identical to fp32 (activation outliers), so it is not used. The output head is not quantized
here: an int8 head's rounding flips near-tied greedy choices (85.0% of completions identical to
fp32 with it, 89.0% without); greedy steps screen it in int8 and decide in fp32 instead
(fimgate/backend/model/screened_head.py), which keeps the fp32 argmax.

One-token steps, `--step-dtype bfloat16`: the bf16 copy prompts use (made for steps alone
where prompts stay fp32), widened exactly to fp32 in the same C kernel (bf16_gemv): half the
bytes of fp32, and only the weights are rounded - activations and sums stay fp32.

Prompts, `--prefill-dtype bfloat16` (more than MAX_STEP_ROWS tokens: a cold prompt, a re-anchor,
a warm-up). A prefill is bound by its matmuls, and on a CPU with AMX a bf16 GEMM is ~7x an fp32
one (`python -m fimgate.bench.micro.cpu_matmul`: 1,000 x 576 x 1,536 in 7.4 ms fp32, 1.0 ms bf16). The layers'
linears keep a bf16 copy for prompts; x is rounded to bf16 into it and the product returns to
fp32, so attention, K/V and the residual stream stay fp32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fimgate.backend.model.quant_linear import QuantWeight
from fimgate.kernels.int8_gemv import Int8Rows, bf16_linear, int8_linear, quantize_rows

MAX_STEP_ROWS = 4  # at most this many tokens at once are a "step"; more are a prompt


class MixedWeight:
    """An (out, in) fp32 weight, with a copy for steps (`step`: "int8", per-row int8 with bf16
    scales, or "bfloat16") and/or a bf16 copy for prompts (one bf16 copy serves both)."""

    def __init__(self, w: torch.Tensor, step: str | None = None, prompt_bf16: bool = False) -> None:
        if step not in (None, "int8", "bfloat16"):
            raise ValueError(f"step copies are int8 or bfloat16, not {step}")
        self.fp32 = w.detach().float().contiguous()
        self.shape = tuple(self.fp32.shape)
        self.bf16 = self.fp32.to(torch.bfloat16) if prompt_bf16 or step == "bfloat16" else None
        self.prompt_bf16 = prompt_bf16
        self.step: Int8Rows | torch.Tensor | None = None  # what one-token steps multiply by (FusedStep too)
        if step == "int8":
            self.step = quantize_rows(self.fp32)
        elif step == "bfloat16":
            self.step = self.bf16

    @property
    def step_bytes(self) -> int:
        """What a one-token step reads of this weight."""
        if isinstance(self.step, Int8Rows):
            return self.step.q.numel() + 4 * self.step.scales_f32.numel()
        w = self.fp32 if self.step is None else self.step
        return w.numel() * w.element_size()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        if flat.shape[0] <= MAX_STEP_ROWS:
            if self.step is None:
                return F.linear(x, self.fp32)
            mul = int8_linear if isinstance(self.step, Int8Rows) else bf16_linear
            return mul(flat, self.step).reshape(*x.shape[:-1], self.shape[0])
        if not self.prompt_bf16:
            return F.linear(x, self.fp32)
        return F.linear(x.to(torch.bfloat16), self.bf16).float()


def linear(x: torch.Tensor, w: "torch.Tensor | MixedWeight | QuantWeight", bias: torch.Tensor | None = None) -> torch.Tensor:
    if isinstance(w, (MixedWeight, QuantWeight)):
        y = w(x)
        return y if bias is None else y + bias
    return F.linear(x, w, bias)
