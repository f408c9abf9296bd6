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

    def __init__(self, tok):
        self.tokenizer = tok

    def generate(self, plan, cancel=None):
        if len(plan.prompt_ids) > 100_000:
            raise ValueError("prompt too long")
        yield TextDelta("x = 1")
        yield Finished("x = 1", UsageReport(prompt_tokens=len(plan.prompt_ids), prefilled_tokens=len(plan.prompt_ids),
                                            completion_tokens=1, finish_reason="stop"))


def _app():
    from fimgate.backend.model.bundled import bundled_model_path
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
