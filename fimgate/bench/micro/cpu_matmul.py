"""Where CPU time could go down: a prefill-size matmul in fp32 against bf16, and RMSNorm.

    python -m fimgate.bench.micro.cpu_matmul     # run alone; prints ms per call (2 threads)

One 1,000-token x 576 x 1,536 matmul is an MLP projection of a 1,000-token prefill of the bundled
model; bf16 runs on AMX where the CPU has it (vLLM's CPU prefill does, hence its speed).
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F


def per_call_ms(fn, calls: int = 20) -> float:
    for _ in range(3):
        fn()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return round((time.perf_counter() - t) / calls * 1e3, 3)


def main() -> None:
    torch.set_num_threads(2)
    x, w = torch.randn(1000, 576), torch.randn(1536, 576)
    xb, wb = x.bfloat16(), w.bfloat16()
    print(
        f"matmul 1000x576x1536: fp32 {per_call_ms(lambda: F.linear(x, w))} ms, "
        f"bf16 {per_call_ms(lambda: F.linear(xb, wb))} ms, "
        f"bf16 with the casts {per_call_ms(lambda: F.linear(x.bfloat16(), wb).float())} ms"
    )
    row, norm_w = torch.randn(1, 576), torch.ones(576)
    composite = lambda: row * torch.rsqrt(row.pow(2).mean(-1, keepdim=True) + 1e-5) * norm_w  # noqa: E731
    print(
        f"RMSNorm of one row: composite {per_call_ms(composite, 2000)} ms, "
        f"F.rms_norm {per_call_ms(lambda: F.rms_norm(row, (576,), norm_w, 1e-5), 2000)} ms"
    )


if __name__ == "__main__":
    main()
