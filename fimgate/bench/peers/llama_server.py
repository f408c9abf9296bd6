"""llama.cpp's own llama-server, the server llama.vscode and llama.vim users run, as a peer.

`make peers-setup` (.ci/peers-setup) builds it from the llama.cpp tree inside llama-cpp-python's
source distribution (the version `fimgate[peers]` pins), so it is the same llama.cpp the in-process
peer (llama_cpp.py) binds. It is started as llama.vscode's README starts it on a CPU, on the
same GGUF file fimgate serves:

    llama-server -m MODEL --port P -ub 1024 -b 1024 --ctx-size 0 --cache-reuse 256

Where it is: $FIMGATE_LLAMA_SERVER, else this checkout's .peers/llama.cpp/build/bin/llama-server,
else `llama-server` on PATH.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Iterator

import httpx

from fimgate.bench.common.served import free_port, start_http, stop

README_FLAGS = ("-ub", "1024", "-b", "1024", "--ctx-size", "0", "--cache-reuse", "256")
BUILT = Path(__file__).resolve().parents[3] / ".peers" / "llama.cpp" / "build" / "bin" / "llama-server"


def llama_server_path() -> str | None:
    """The llama-server binary, or None where none was built or installed."""
    for candidate in (os.environ.get("FIMGATE_LLAMA_SERVER"), str(BUILT), shutil.which("llama-server")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


@contextlib.contextmanager
def llama_server(model_path: str, *flags: str, timeout_s: float = 180) -> Iterator[str]:
    """Its base URL, once /health answers 200 (the model loaded); it stops on exit. `flags` come
    after the README's (a later flag wins)."""
    binary = llama_server_path()
    if binary is None:
        raise RuntimeError("llama-server is not built here: run `make peers-setup` (or set FIMGATE_LLAMA_SERVER)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [binary, "-m", model_path, "--host", "127.0.0.1", "--port", str(port), *README_FLAGS, *flags]
    proc = start_http(cmd, url, "llama-server", timeout_s=timeout_s)
    try:
        yield url
    finally:
        stop(proc)


class LlamaServerPeer:
    """llama-server as a replay peer (`bench replay --peers llama-server`): every request is the
    /infill body llama.vscode 0.0.63 POSTs (llama_vscode.request_body, and the fields its
    createRequestPayload adds: id_slot 0, n_cmpl, top_k 40, top_p 0.99, the infill sampler,
    cache_prompt, stream false), timed over loopback HTTP. Not streamed, as llama.vscode asks: the
    suggestion arrives whole, so its first text is its end. What llama-server prefilled and reused
    is its own report (`timings.prompt_n`, `timings.cache_n`); `prompt_tokens` is the prompt the
    emulation (llama_vscode.server_prompt) builds, and `emulation_agrees` counts the requests
    whose llama-server prompt had as many tokens."""

    batches = False

    def __init__(self, url: str, tokenizer, model_name: str, n_cmpl: int = 3) -> None:
        self.url, self.tokenizer, self.model_name, self.n_cmpl = url, tokenizer, model_name, n_cmpl
        self._n_ctx: int | None = None
        self.bodies: dict[tuple[int, ...], dict] = {}  # emulated prompt -> the body (filled by InfillStrategy)
        self.agree = self.compared = 0
        self._http = httpx.Client(timeout=httpx.Timeout(600.0))

    @property
    def context_tokens(self) -> int | None:
        """The context llama-server runs with (its /props `n_ctx`; `--ctx-size 0`: the model's own)."""
        if self._n_ctx is None:
            props = self._http.get(self.url + "/props").json()
            self._n_ctx = props.get("default_generation_settings", {}).get("n_ctx") or props.get("n_ctx")
        return self._n_ctx

    def strategy(self, name: str, template):
        return InfillStrategy(self, template)

    def generate(self, plan, cancel=None):
        from fimgate.backend.base import Finished, TextDelta, UsageReport

        body = self.bodies.pop(plan.prompt_ids)
        payload = {
            **body,
            "id_slot": 0,
            "n_predict": plan.sampling.max_tokens,
            "n_cmpl": self.n_cmpl,
            "top_k": 40,
            "top_p": 0.99,
            "stream": False,
            "samplers": ["top_k", "top_p", "infill"],
            "cache_prompt": True,
            "t_max_prompt_ms": 500,
        }
        t0 = time.perf_counter()
        r = self._http.post(self.url + "/infill", json=payload)
        ms = (time.perf_counter() - t0) * 1000
        r.raise_for_status()
        data = r.json()
        first = data[0] if isinstance(data, list) else data  # llama.vscode shows the first of n_cmpl
        t = first.get("timings", {})
        evaluated = first.get("tokens_evaluated", 0)
        self.compared += 1
        self.agree += evaluated == len(plan.prompt_ids)
        text = first.get("content", "")
        usage = UsageReport(
            prompt_tokens=len(plan.prompt_ids),
            prefix_cached_tokens=t.get("cache_n", 0),
            prefilled_tokens=t.get("prompt_n", 0),
            completion_tokens=t.get("predicted_n", 0),
            ttft_ms=ms,
            total_ms=ms,
            finish_reason="length" if first.get("stop_type") == "limit" else "stop",
        )
        if text:
            yield TextDelta(text)
        yield Finished(text, usage)

    def emulation(self) -> dict:
        return {"requests": self.compared, "same_prompt_length": self.agree}


class InfillStrategy:
    """The replay's llama.vscode strategy (strategies.Strategy), each plan's /infill body kept
    for the peer to send."""

    def __init__(self, peer: LlamaServerPeer, template) -> None:
        from fimgate.bench.replay.strategies import Strategy

        self.peer = peer
        self.inner = Strategy("llama.vscode", peer.tokenizer, template)
        self.name = "llama.vscode"

    def request(self, state, sampling):
        return self.inner.request(state, sampling)

    def plan(self, user, state, sampling):
        body = self.inner.window_body(state)
        plan = self.inner.plan(user, state, sampling, body)
        self.peer.bodies[plan.prompt_ids] = {
            "input_prefix": body.input_prefix,
            "input_suffix": body.input_suffix,
            "prompt": body.prompt,
            "input_extra": [{"filename": c.filename, "text": c.text} for c in body.input_extra],
            "t_max_predict_ms": body.t_max_predict_ms,
            **({"n_indent": body.n_indent} if body.n_indent else {}),
        }
        return plan
