"""`--prefill-dtype auto` and `--step-dtype auto`: bf16 copies only where the CPU multiplies bf16 natively."""

from fimgate.backend.model import cpu_bf16


def test_auto_is_bfloat16_only_on_a_cpu_with_native_bf16(tmp_path, monkeypatch):
    with_bf16, without = tmp_path / "a", tmp_path / "b"
    with_bf16.write_text("processor : 0\nflags : fpu sse avx2 avx512f avx512_bf16 avx512_vnni\n")
    without.write_text("processor : 0\nflags : fpu sse avx2 avx512f avx512bw\n")
    assert cpu_bf16.native_bf16(str(with_bf16)) and not cpu_bf16.native_bf16(str(without))
    assert not cpu_bf16.native_bf16(str(tmp_path / "missing"))  # not Linux: the exact default
    monkeypatch.setattr(cpu_bf16, "native_bf16", lambda: True)
    assert cpu_bf16.resolve_prefill_dtype("auto") == "bfloat16"
    assert cpu_bf16.resolve_prefill_dtype("auto", device="cuda") == "float32"
    assert cpu_bf16.resolve_prefill_dtype("auto", dtype="bfloat16") == "float32"  # bf16 weights: nothing to copy
    assert cpu_bf16.resolve_prefill_dtype("float32") == "float32"
    assert cpu_bf16.resolve_step_dtype("auto") == "bfloat16"
    assert cpu_bf16.resolve_step_dtype("auto", dtype="int8") == "int8"  # int8 steps have their own copies
    assert cpu_bf16.resolve_step_dtype("auto", device="cuda") == "float32"
    monkeypatch.setattr(cpu_bf16, "native_bf16", lambda: False)
    assert cpu_bf16.resolve_prefill_dtype("auto") == "float32"
