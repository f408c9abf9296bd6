"""llama.cpp's llama-server, the server llama.vscode's users run, built by `make peers-setup` and
started as the benchmarks start it (llama.vscode's README flags, the default model's GGUF file):
it answers llama.vscode's own /infill request, the replay's emulation of the prompt it builds
(fimgate/bench/peers/llama_vscode.py) has its length, and `bench replay --peers llama-server` puts
it beside fimgate in one run. Skipped where it was not built, unless FIMGATE_REQUIRE_PEERS=1 (CI
builds it)."""

import json
import os

import pytest

from fimgate.backend.model.registry import resolve_model
from fimgate.backend.model.weights import load_tokenizer
from fimgate.bench.peers import llama_vscode
from fimgate.bench.peers.llama_server import InfillStrategy, LlamaServerPeer, llama_server, llama_server_path
from fimgate.efim.planner import EditorState
from fimgate.efim.templates import TEMPLATES
from tests.integration.test_cli import fimgate

if llama_server_path() is None and os.environ.get("FIMGATE_REQUIRE_PEERS") != "1":
    pytest.skip("llama-server is not built here: make peers-setup", allow_module_level=True)

SOURCE = "def fibonacci(n):\n    if n < 2:\n        return n\n    return \n\n\nprint(fibonacci(10))\n"


@pytest.fixture(scope="module")
def model():
    return resolve_model(None)


@pytest.fixture(scope="module")
def server(model):
    assert llama_server_path(), "llama-server is not built: make peers-setup"
    with llama_server(model) as url:
        yield url


def test_llama_server_completes_llama_vscodes_request_and_the_emulation_builds_its_prompt(server, model):
    tok = load_tokenizer(model)
    peer = LlamaServerPeer(server, tok, "qwen2.5-coder-0.5b")
    assert peer.context_tokens == 32768  # --ctx-size 0: Qwen2.5-Coder-0.5B's trained context, as its /props says
    strategy = InfillStrategy(peer, TEMPLATES["qwen2.5-coder"])
    state = EditorState("u", "fib.py", SOURCE, SOURCE.index("return \n") + len("return "), path="fib.py")
    sampling, _ = strategy.request(state, llama_vscode.sampling(llama_vscode.request_body(state.text, state.cursor)))
    plan = strategy.plan("u", state, sampling)
    events = list(peer.generate(plan))
    text, usage = events[-1].text, events[-1].usage
    assert "fibonacci(n - 1)" in text.replace("fibonacci(n-1)", "fibonacci(n - 1)"), text
    assert peer.emulation() == {"requests": 1, "same_prompt_length": 1}  # llama-server evaluated the emulated prompt's length
    assert usage.prefilled_tokens == usage.prompt_tokens and usage.prefix_cached_tokens == 0  # a cold server
    again = list(peer.generate(strategy.plan("u", state, sampling)))[-1].usage
    assert again.prefix_cached_tokens >= again.prompt_tokens - 1  # cache_prompt: the same prompt is reused


def test_bench_replay_puts_llama_server_beside_fimgate():
    from tests.conftest import HEAD_TRACE as trace

    r = fimgate(
        "bench",
        "replay",
        trace,
        "--limit-requests",
        "12",
        "--strategies",
        "efim,llama.vscode",
        "--max-tokens",
        "4",
        "--peers",
        "llama-server",
        timeout=900,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    row = out["llama-server/llama.vscode"]
    assert row["emulation"]["requests"] > 0
    assert row["emulation"]["same_prompt_length"] == row["emulation"]["requests"]
    assert "efim" in out and "llama.vscode" in out and "llama-server/efim" not in out
