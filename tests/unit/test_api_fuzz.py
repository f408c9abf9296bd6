"""Fuzz the HTTP API from its own OpenAPI schema (schemathesis): whatever a client sends, the
answer is never a 5xx and never a traceback. The backend here is a stand-in that answers
instantly (the real model is exercised in tests/integration); the planner, tokenizer,
validation and error handling are the real ones."""

import schemathesis
from hypothesis import HealthCheck, settings

from fimgate.backend.base import Finished, TextDelta, UsageReport
from fimgate.efim.planner import EfimPlanner
from fimgate.efim.templates import TEMPLATES
from fimgate.gateway.app import create_app
from fimgate.gateway.service import CompletionService

CASES = {"n": 0}


class InstantBackend:
    model_name = "stand-in"
    context_tokens = 2048

    def stats(self) -> dict:
        return {}

    def __init__(self, tok):
        self.tokenizer = tok

    def generate(self, plan, cancel=None):
        if len(plan.prompt_ids) > 100_000:
            raise ValueError("prompt too long")
        yield TextDelta("x = 1")
        yield Finished(
            "x = 1",
            UsageReport(
                prompt_tokens=len(plan.prompt_ids),
                prefilled_tokens=len(plan.prompt_ids),
                completion_tokens=1,
                finish_reason="stop",
            ),
        )


def _app():
    from fimgate.backend.model.registry import bundled_model_path
    from fimgate.backend.model.weights import load_tokenizer

    tok = load_tokenizer(bundled_model_path())
    return create_app(CompletionService(InstantBackend(tok), EfimPlanner(tok, TEMPLATES["smollm2"])))


schema = schemathesis.openapi.from_asgi("/openapi.json", _app())


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_gets_a_5xx_or_a_traceback(case):
    response = case.call()
    CASES["n"] += 1
    assert response.status_code < 500, response.text
    assert "Traceback" not in response.text
    if response.status_code >= 400:
        assert response.json()["error"]["message"]


def test_the_fuzzer_really_ran():
    print(f"fuzzer cases: {CASES['n']}")
    assert CASES["n"] >= 60, CASES


HOSTILE = [  # what the hardening probe sent: each was a 500, a hang or a silent coercion
    ("/v1/completions", {"prompt": "x = ", "temperature": 1e-38}),
    ("/v1/completions", {"prompt": "x = ", "temperature": 1.0, "top_p": 1e-38}),
    ("/v1/completions", {"prompt": "x = ", "seed": 2**64}),
    ("/v1/completions", {"prompt": "x = ", "seed": -(2**63) - 1}),
    ("/v1/completions", {"prompt": "x = ", "max_tokens": "10"}),
    ("/v1/completions", {"prompt": "x = ", "max_tokens": True}),
    ("/v1/completions", {"prompt": "x = ", "stop": ["\n"] * 100}),
    ("/v1/completions", {"prompt": "x" * 300, "max_tokens": 1, "stream": True}),
    ("/infill", {"input_prefix": "x", "input_extra": [{"filename": "a.py", "text": "q = 1\n" * 200_000}]}),
    ("/infill", {"input_prefix": "x", "input_extra": [{"filename": "a" * 5000, "text": ""}]}),
    ("/infill", {"input_prefix": "x", "n_indent": -1}),
    ("/infill", {"input_prefix": "x", "stream": True, "n_predict": 2}),
]


def test_hostile_bodies_are_a_4xx_or_an_answer():
    from fastapi.testclient import TestClient

    client = TestClient(_app())
    for path, body in HOSTILE:
        r = client.post(path, json=body)
        assert r.status_code < 500, (path, body, r.text)
        assert "Traceback" not in r.text
        if r.status_code >= 400:
            assert r.json()["error"]["message"], (path, body)
        elif body.get("stream"):
            assert r.text.rstrip().endswith("data: [DONE]")
