"""When the backend's servers fail, the editor gets a clear 502/503 and the gateway keeps serving."""

import pytest
from fastapi.testclient import TestClient

from fimgate.backend.base import BackendError, BackendUnavailableError, Finished, TextDelta, UsageReport
from fimgate.backend.model.registry import bundled_model_path
from fimgate.efim.planner import EfimPlanner
from fimgate.efim.templates import TEMPLATES
from fimgate.gateway.app import create_app
from fimgate.gateway.service import CompletionService

pytestmark = pytest.mark.skipif(bundled_model_path() is None, reason="bundled model not installed")


class FlakyBackend:
    model_name = "stand-in"
    context_tokens = 2048

    def stats(self) -> dict:
        return {}

    def __init__(self, tok):
        self.tokenizer = tok
        self.fail: Exception | None = None

    def generate(self, plan, cancel=None):
        if self.fail is not None:
            raise self.fail
        yield TextDelta("x = 1")
        yield Finished("x = 1", UsageReport(prompt_tokens=len(plan.prompt_ids), completion_tokens=1, finish_reason="stop"))


@pytest.mark.parametrize(
    "error,status",
    [(BackendUnavailableError("no vLLM server is answering"), 503), (BackendError("vLLM refused the request: bad regex"), 502)],
)
def test_backend_failure_is_a_clear_error_then_the_gateway_serves_again(error, status):
    from fimgate.backend.model.weights import load_tokenizer

    tok = load_tokenizer(bundled_model_path())
    backend = FlakyBackend(tok)
    client = TestClient(create_app(CompletionService(backend, EfimPlanner(tok, TEMPLATES["smollm2"]))))
    body = {"prompt": "def f():\n    return ", "suffix": "\n", "max_tokens": 4, "raw": True}
    backend.fail = error
    r = client.post("/v1/completions", json=body)
    assert r.status_code == status and str(error) in r.json()["error"]["message"]
    streamed = client.post("/v1/completions", json={**body, "stream": True})  # failed before its first event:
    assert streamed.status_code == status and str(error) in streamed.json()["error"]["message"]  # a status, not 200
    backend.fail = None
    r = client.post("/v1/completions", json=body)
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == "x = 1"
