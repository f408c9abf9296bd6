"""One query token's attention over the KV cache on CPU: the C kernel in decode_attention.c.

    out = decode_attention(q, keys, values, scale)   # q (heads, 1, d); keys, values (kv_heads, L, d)

Returns None where the kernel does not apply (no compiler, not fp32 on CPU, rows not contiguous)
and the caller runs its torch path. At long context a decode step is mostly this: at 2,800
tokens SmolLM2's 30 layers read 129 MB of fp32 K and V per token, which torch's two batched
matmuls (scores, then weights x values, with a softmax between) read at ~8 GB/s here; the kernel
reads each row once per kv head, in chunks split over the threads (`python -m fimgate.bench.micro.decode_attention`).
"""

from __future__ import annotations

import ctypes

import torch

from fimgate.kernels import cpu_build

_P, _I = ctypes.c_void_p, ctypes.c_int64
KERNEL = cpu_build.Kernel(
    "decode_attention",
    {
        "decode_attention": ([_P, _P, _P, _P, _P, _I, _I, _I, _I, _I, ctypes.c_float, ctypes.c_int], None),
        "decode_attention_workspace": ([_I, _I, _I], _I),
    },
)


def kernel_available() -> bool:
    return KERNEL.lib is not None


def decode_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scale: float) -> torch.Tensor | None:
    """q: (heads, 1, d); keys, values: (kv_heads, L, d) views whose rows are contiguous and whose
    heads share one stride (views into a KV buffer). Returns (heads, 1, d) fp32, or None."""
    if (
        q.device.type != "cpu"
        or q.dtype != torch.float32
        or keys.dtype != torch.float32
        or values.dtype != torch.float32
        or KERNEL.lib is None
    ):
        return None
    kv_heads, n, d = keys.shape
    if (
        keys.stride(2) != 1
        or keys.stride(1) != d
        or values.stride() != keys.stride()
        or n == 0
        or q.shape[0] % kv_heads
        or q.shape[-1] != d
    ):
        return None
    heads = q.shape[0]
    threads = torch.get_num_threads()
    q = q.reshape(heads, d).contiguous()
    out = torch.empty(heads, 1, d)
    ws = torch.empty(KERNEL.lib.decode_attention_workspace(heads, d, n))
    KERNEL.lib.decode_attention(
        q.data_ptr(),
        keys.data_ptr(),
        values.data_ptr(),
        out.data_ptr(),
        ws.data_ptr(),
        kv_heads,
        heads // kv_heads,
        d,
        n,
        keys.stride(0),
        scale,
        threads,
    )
    return out
