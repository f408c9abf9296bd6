"""The vLLM backend's own logic against a scripted HTTP transport (the real servers are in
tests/integration/test_vllm.py): request bodies, healing, salts, routing and failover."""

import json
import math
import re

import httpx
import pytest

from fimgate.backend.base import (
    BackendUnavailableError,
    ContextOverflowError,
    FimPlan,
    HealingConstraint,
    SamplingParams,
    last_finished,
)
from fimgate.backend.vllm.backend import VllmBackend, VllmConfig, healing_regex
from fimgate.backend.vllm.cache_salt import CacheSalts
from fimgate.backend.vllm.router import PrefixRouter


class _Tok:
    bos_id = None
    add_bos = False


def _sse(chunks: list[dict]) -> bytes:
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def _reply(texts: list[str], prompt: int, cached: int, finish: str = "length") -> bytes:
    chunks = [{"choices": [{"index": 0, "text": t, "finish_reason": None}]} for t in texts]
    chunks[-1]["choices"][0]["finish_reason"] = finish
    chunks.append(
        {
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": len(texts),
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
    )
    return _sse(chunks)


def _backend(handler, urls=("http://a", "http://b"), pins=False):
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return VllmBackend(VllmConfig(urls=urls, model="m", pins=pins), _Tok(), CacheSalts(b"secret"), client=client)


def _plan(user="alice", ids=tuple(range(100)), **kw):
    return FimPlan(prompt_ids=ids, user_id=user, session_id="doc.py", sampling=SamplingParams(max_tokens=8), **kw)


@pytest.mark.parametrize("text", ["fib", "  re", "(x", "a.b*c", "\n    ", "x[0]{1}", "ü$^|"])
def test_healing_regex_accepts_exactly_the_strings_that_start_with_the_text(text):
    pattern = re.compile(healing_regex(text))
    assert pattern.fullmatch(text + "whatever\n follows")
    assert not pattern.fullmatch("z" + text)


def test_salts_are_per_tenant_unguessable_and_stable():
    s = CacheSalts(b"k1", tenants={"bob": "team", "carol": "team"})
    assert s.salt_for("alice") != s.salt_for("bob")
    assert s.salt_for("bob") == s.salt_for("carol")  # one tenant shares its cache on purpose
    assert s.salt_for("alice") == CacheSalts(b"k1").salt_for("alice")
    assert s.salt_for("alice") != CacheSalts(b"k2").salt_for("alice")
    assert len(s.salt_for("alice")) == 43 and "alice" not in s.salt_for("alice")


def test_request_carries_token_ids_salt_healing_and_pin_and_cuts_the_healed_text():
    seen = []

    def handler(req: httpx.Request):
        seen.append(json.loads(req.content))
        return httpx.Response(200, content=_reply(["fib", "onacci(", "n)"], prompt=100, cached=64))

    b = _backend(handler, pins=True)
    final = last_finished(b.generate(_plan(healing=HealingConstraint("fib"), pin_tokens=80, stop_token_ids=(7,))))
    body = seen[0]
    assert body["prompt"] == list(range(100)) and body["cache_salt"] == CacheSalts(b"secret").salt_for("alice")
    assert body["structured_outputs"] == {"regex": "fib[\\s\\S]*"} and body["stop_token_ids"] == [7]
    assert body["kv_transfer_params"]["fimgate_pin"]["tokens"] == 80
    assert final.text == "onacci(n)"  # the backed-off text is not repeated
    assert (final.usage.prefix_cached_tokens, final.usage.prefilled_tokens) == (64, 36)


def test_context_overflow_is_a_clear_error():
    def handler(req):
        return httpx.Response(400, json={"error": {"message": "This model's maximum context length is 2048 tokens"}})

    with pytest.raises(ContextOverflowError, match="2048"):
        last_finished(_backend(handler).generate(_plan()))


def test_a_server_that_does_not_answer_is_taken_out_and_its_users_rerouted():
    calls = []

    def handler(req: httpx.Request):
        calls.append(req.url.host)
        if req.url.host == "a":
            raise httpx.ConnectError("refused")
        return httpx.Response(200, content=_reply(["x"], prompt=100, cached=0))

    b = _backend(handler)
    users = [f"user{i}" for i in range(8)]  # new users spread over both servers by a hash
    for user in users * 2:
        assert last_finished(b.generate(_plan(user))).text == "x"
    assert calls.count("a") == 1  # tried once, then out
    assert calls.count("b") == 16  # every request answered
    assert [s["up"] for s in b.router.stats()] == [False, True]


def test_all_servers_down_is_backend_unavailable():
    def handler(req):
        raise httpx.ConnectError("refused")

    with pytest.raises(BackendUnavailableError):
        last_finished(_backend(handler).generate(_plan()))


def test_router_keeps_a_user_on_the_server_with_their_blocks_until_queues_tip():
    r = PrefixRouter(["a", "b"], block_size=4, capacity_tokens=1024, balance_abs=2, balance_rel=1.5)
    prompt = tuple(range(40))
    home, _ = r.pick("alice", prompt)
    r.finished(home, 0)
    again, predicted = r.pick("alice", prompt + (99,))
    assert again == home and predicted == 40  # whole blocks only
    r.finished(again, 40)
    r.servers[home].inflight = 2  # a little busier: her blocks still win
    assert r.pick("alice", prompt)[0] == home
    r.servers[home].inflight = 6  # past both thresholds (6 - 0 > 2 and 6 > 1.5 x 0): the shortest queue
    assert r.pick("alice", prompt)[0] == 1 - home
    assert r.pick("nobody", (5, 6, 7))[1] == 0


def test_another_tenants_prompt_predicts_no_hit():
    r = PrefixRouter(["a"], block_size=4)
    r.pick("alice", tuple(range(40)))
    assert r.pick("bob", tuple(range(40)))[1] == 0


def test_tenant_and_secret_files(tmp_path, monkeypatch):
    (tmp_path / "tenants").write_text("# team\nbob team\ncarol team\n")
    (tmp_path / "secret").write_bytes(b"s3cret\n")
    s = CacheSalts.from_files(str(tmp_path / "secret"), str(tmp_path / "tenants"))
    assert s.salt_for("bob") == s.salt_for("carol") == CacheSalts(b"s3cret").salt_for("team")
    (tmp_path / "bad").write_text("bob\n")
    with pytest.raises(ValueError, match="bad:1: expected 'USER TENANT'"):
        CacheSalts.from_files(None, str(tmp_path / "bad"))
    monkeypatch.setenv("FIMGATE_SALT_SECRET", "from-env")
    assert CacheSalts.from_files(None, None).salt_for("x") == CacheSalts(b"from-env").salt_for("x")


def test_with_no_hit_anywhere_a_person_stays_home_and_new_people_spread():
    r = PrefixRouter(["a", "b"], block_size=4)
    first, _ = r.pick("alice", tuple(range(40)))
    r.finished(first, 0)
    other, _ = r.pick("bob", tuple(range(100, 140)))
    r.finished(other, 0)
    assert other != first  # the emptier cache
    moved, predicted = r.pick("alice", tuple(range(500, 540)))  # a new window: no blocks anywhere
    assert predicted == 0 and moved == first and r.moves == 0


def test_min_token_prob_asks_for_logprobs_and_ends_the_stream_before_an_unsure_token():
    """The embedded engine's rule on vLLM: the sampled tokens' log probabilities come with the
    stream, and the suggestion ends before the first the model gave less than the floor (once
    it holds more than white space); the stream is closed there."""
    seen = []

    def chunk(tokens, probs):
        lp = {"tokens": tokens, "token_logprobs": [math.log(p) for p in probs]}
        return {"choices": [{"index": 0, "text": "".join(tokens), "logprobs": lp, "finish_reason": None}]}

    def handler(req: httpx.Request):
        seen.append(json.loads(req.content))
        chunks = [chunk(["  ", "return"], [0.3, 0.9]), chunk([" a", " +"], [0.8, 0.4]), chunk([" b"], [0.9])]
        return httpx.Response(200, content=_sse(chunks))

    b = _backend(handler)
    plan = FimPlan(tuple(range(100)), "alice", "doc.py", sampling=SamplingParams(max_tokens=8, min_token_prob=0.5))
    final = last_finished(b.generate(plan))
    assert seen[0]["logprobs"] == 0
    assert final.text == "  return a" and final.usage.finish_reason == "stop"  # the unsure indent was kept
    whole = last_finished(b.generate(_plan()))
    assert whole.text == "  return a + b" and "logprobs" not in seen[1]


def test_a_piece_whose_tokens_do_not_spell_it_is_judged_whole_by_its_first_token():
    """Byte-level tokens ('Ġa') do not spell the text: the piece (vLLM's one token) is kept or
    cut as one."""
    from fimgate.backend.vllm.backend import _sure_part

    piece = {"text": " a", "logprobs": {"tokens": ["Ġa"], "token_logprobs": [math.log(0.3)]}}
    assert _sure_part(piece, "x =", "", 0.5) == ("", True)
    assert _sure_part(piece, "x =", "", 0.2) == (" a", False)
    assert _sure_part(piece, "  ", "", 0.5) == (" a", False)  # nothing but white space shown yet
