"""Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX): only then are bf16 copies of
the linears a faster prefill (2.1x at 1,000 tokens on an AMD EPYC with AVX512-BF16, 2026-12-02, at a468bb9).
Without them torch emulates bf16 products, slower than fp32, so `--prefill-dtype auto` stays fp32;
`--step-dtype auto` follows the same rule (the step kernel's bf16 loads are plain AVX-512 either
way, but a CPU without bf16 products is one this default was never measured on)."""

from __future__ import annotations

import functools

NATIVE_FLAGS = ("avx512_bf16", "amx_bf16")


@functools.cache
def native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return any(flag in line.split() for flag in NATIVE_FLAGS)
    except OSError:  # not Linux: no way to tell, so the exact default
        pass
    return False


def resolve_prefill_dtype(prefill_dtype: str, device: str = "cpu", dtype: str = "float32") -> str:
    """What `--prefill-dtype` means here: "auto" is bfloat16 for fp32/int8 weights on a CPU that
    multiplies bf16 natively, float32 otherwise."""
    if prefill_dtype != "auto":
        return prefill_dtype
    return "bfloat16" if device == "cpu" and dtype != "bfloat16" and native_bf16() else "float32"


def resolve_step_dtype(step_dtype: str, device: str = "cpu", dtype: str = "float32") -> str:
    """What `--step-dtype` means here: "int8" with `--dtype int8` (its own step copies), else as
    `--prefill-dtype`: "auto" is bfloat16 on a CPU that multiplies bf16 natively."""
    return "int8" if dtype == "int8" else resolve_prefill_dtype(step_dtype, device, dtype)
