"""Int8 weights for one-token steps on CPU (`--dtype int8`): decoding and a keystroke's 1-token append.

A decode step reads every weight once, and on a 2-core VM it is bound by that read: fp32
SmolLM2-135M is ~540 MB per token. Here the layers' linears keep a per-output-channel int8 copy
(a quarter of the bytes), multiplied by torch's int8 weight-only kernel, whose fast path
takes bf16 activations: x is rounded to bf16 around the kernel only; norms, attention, K/V and the
residual stream stay fp32. Prompts of more than a few tokens (prefill) use the fp32 weights, where
the int8 kernel is 45x slower than fp32 GEMM.

Measured on 120 of the model's linears, one token, cold weights: fp32 14.0 ms, int8 + bf16
activations 5.8 ms; int8 with fp32 activations 30 ms (no fast path); fbgemm's dynamic int8 (int8
activations too) 5.5 ms, but only 30% of HumanEval completions stayed identical to fp32 (activation
outliers), so it is not used. The output head stays fp32: its rounding flips near-tied greedy
choices directly (20 problems: 80% identical with an int8 head, 85% without, same speed).
Quality: `fimgate bench quality --compare-dtype int8`.
"""
from __future__ import annotations

import torch

MAX_INT8_ROWS = 4  # at most this many tokens at once use the int8 copy


class Int8Weight:
    """An (out, in) weight in fp32 and as per-row int8 with bf16 scales."""

    def __init__(self, w: torch.Tensor) -> None:
        self.fp32 = w.detach().float().contiguous()
        scales = (self.fp32.abs().amax(dim=1) / 127.0).clamp(min=1e-12)
        self.int8 = torch.round(self.fp32 / scales[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
        self.scales = scales.to(torch.bfloat16)
        self.shape = tuple(self.fp32.shape)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        if flat.shape[0] > MAX_INT8_ROWS:
            return torch.nn.functional.linear(x, self.fp32)
        y = torch.ops.aten._weight_int8pack_mm(flat.to(torch.bfloat16), self.int8, self.scales)
        return y.float().reshape(*x.shape[:-1], self.shape[0])


def linear(x: torch.Tensor, w: "torch.Tensor | Int8Weight", bias: torch.Tensor | None = None) -> torch.Tensor:
    if isinstance(w, Int8Weight):
        y = w(x)
        return y if bias is None else y + bias
    return torch.nn.functional.linear(x, w, bias)
