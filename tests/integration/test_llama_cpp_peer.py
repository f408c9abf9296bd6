"""The llama.cpp peer (fimgate/bench/peers/llama_cpp.py) on the bundled GGUF: the same token prompts,
llama-server-style prompt reuse, fimgate's stops and healing. Skips without llama-cpp-python
(`make peers-setup` builds it), unless FIMGATE_REQUIRE_PEERS=1 (CI builds it)."""

import json
import os

import pytest

from fimgate.backend.base import FimPlan, HealingConstraint, SamplingParams, last_finished
from tests.conftest import frozen_texts
from tests.integration.test_cli import fimgate

if os.environ.get("FIMGATE_REQUIRE_PEERS") == "1":
    import llama_cpp  # noqa: F401  (CI built it: missing is a failure)
else:
    pytest.importorskip("llama_cpp")


@pytest.fixture(scope="module")
def peer(bundled_path, smol_tok):
    from fimgate.bench.peers.llama_cpp import LlamaCppPeer

    return LlamaCppPeer(bundled_path, smol_tok, "smollm2-135m")


def _run(peer, ids, user="u", **sampling):
    plan = FimPlan(prompt_ids=tuple(ids), user_id=user, session_id="s", sampling=SamplingParams(**sampling))
    return last_finished(peer.generate(plan))


def test_llama_cpp_reads_fimgates_token_ids(peer, smol_tok):
    text = frozen_texts(4)[0][:2000]
    assert peer._llm.tokenize(text.encode(), add_bos=False, special=False) == smol_tok.encode(text)


def test_prompt_reuse_is_the_longest_common_prefix_and_per_user(peer, smol_tok):
    ids = smol_tok.encode(frozen_texts(4)[1])[:400]
    cold = _run(peer, ids[:300], max_tokens=4).usage
    assert (cold.prefix_cached_tokens, cold.prefilled_tokens) == (0, 300)
    append = _run(peer, ids[:301], max_tokens=4).usage
    assert (append.prefix_cached_tokens, append.prefilled_tokens) == (300, 1)
    edited = _run(peer, ids[:100] + ids[150:301], max_tokens=4).usage  # text removed at token 100
    assert edited.prefix_cached_tokens == 100 and edited.prefilled_tokens == 151
    other = _run(peer, ids[:100] + ids[150:301], user="someone-else", max_tokens=4).usage
    assert other.prefix_cached_tokens == 0  # nobody reads another user's cache


def test_stops_and_healing_as_the_embedded_engine_applies_them(peer, smol_tok):
    prompt = smol_tok.encode("def fibonacci(n):\n    if n < 2:\n        return n\n    return fib")
    plan = FimPlan(
        prompt_ids=tuple(prompt),
        user_id="h",
        session_id="s",
        sampling=SamplingParams(max_tokens=16, stop=("\n",)),
        healing=HealingConstraint("onacci(n"),
    )
    out = last_finished(peer.generate(plan))
    assert out.text.startswith(" - 1)") and "\n" not in out.text  # after the re-spelled text, one line
    assert out.usage.finish_reason == "stop"


def test_bench_engine_puts_llama_cpp_beside_fimgate():
    # the small model: what is checked is the two rows side by side, not the default model's speed
    # (3 minutes on an AVX2-only CPU); docs/benchmarks.md holds those
    args = ("--model", "smollm2-135m", "--peers", "llama.cpp", "--prefill-tokens", "200", "--cached-tokens", "300")
    r = fimgate("bench", "engine", *args, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["llama.cpp"]["append_prefilled_tokens"] == 1 and out["fimgate"]["append_prefilled_tokens"] == 1
    assert out["llama.cpp"]["prefill_tokens_per_s"] > 0 and out["llama.cpp"]["decode_tokens_per_s_at_32"] > 0
    ratio = out["fimgate_vs_llama.cpp"]["append_1_token_ttft"]
    assert ratio == pytest.approx(out["fimgate"]["append_1_token_ttft_ms"] / out["llama.cpp"]["append_1_token_ttft_ms"], rel=0.02)


def test_bench_quality_compares_llama_cpps_completions_with_fimgates():
    import os

    from tests.conftest import SHARED

    data = os.path.join(SHARED, "data", "humaneval-infilling")
    if not os.path.isdir(data):
        pytest.skip("HumanEval infilling data (../shared) not here")
    r = fimgate(
        "bench",
        "quality",
        "--limit",
        "2",
        "--strategies",
        "no-cache,efim+correction",
        "--max-tokens",
        "16",
        "--data-dir",
        data,
        "--peers",
        "llama.cpp",
        "--prefill-dtype",
        "float32",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["fimgate"]) == {"no-cache", "efim+correction"} and set(out["llama.cpp"]) == {"no-cache"}
    row = out["llama.cpp"]["no-cache"]
    same = [v for k, v in row.items() if k.startswith("same_completion_as_fimgate_")]  # _gguf-blocks: the file's blocks
    assert row["problems"] == 2 and len(same) == 1 and same[0] in (0.0, 50.0, 100.0)  # of 2
    assert "completions" not in row and "completions" not in out["fimgate"]["no-cache"]


def test_bench_replay_peers_can_go_without_the_prewarms():
    from tests.conftest import HEAD_TRACE as trace

    r = fimgate(
        "bench",
        "replay",
        trace,
        "--limit-requests",
        "12",
        "--strategies",
        "efim",
        "--prewarm",
        "--max-tokens",
        "2",
        "--peers",
        "llama.cpp",
        "--peer-prewarm",
        "none",
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["efim"]["prewarm"]["requests"] > 0 and out["llama.cpp/efim"]["prewarm"]["requests"] == 0
    assert out["settings"]["peer_prewarm"] == "none"


def test_cache_reuse_moves_long_cached_runs_as_llama_server_does(peer, smol_tok):
    """--cache-reuse 256: text deleted above a run of >= 256 cached tokens moves the run, and the
    answer starts as a cold run of the same prompt's does. Only starts: the run's K/V saw the
    deleted text (shift-only reuse is approximate) - equal for 8 tokens on an AVX2 CPU, 5 on an
    AVX-512 one (' only one that can be created' vs ' only one that can be\n created.')."""
    ids = smol_tok.encode(frozen_texts(4)[2])[:700]
    head, body = ids[:120], ids[120:620]
    _run(peer, head + body, max_tokens=1)
    moved = _run(peer, head[:40] + head[90:] + body, max_tokens=8)  # 50 tokens deleted above the body
    assert moved.usage.prefix_cached_tokens == 40
    assert moved.usage.shifted_cached_tokens == len(head) - 90 + len(body) - 1  # all but the last token
    assert moved.usage.prefilled_tokens == 1
    cold = _run(peer, head[:40] + head[90:] + body, user="cold", max_tokens=8)
    assert cold.usage.prefilled_tokens == len(head) - 50 + len(body)
    assert moved.text.split()[:4] == cold.text.split()[:4], (moved.text, cold.text)
    short = _run(peer, head[:30] + head[40:] + body[:200], user="cold", max_tokens=1)  # a run under 256: prefilled
    assert short.usage.shifted_cached_tokens == 0
