"""The small things a probe of the HTTP API found: every number bounded the same way on both
endpoints, OpenAI fields fimgate does not do refused with a 400 that says so (not silently
ignored), NaN called what it is, and the status endpoints behind a key when asked."""

import pytest
from fastapi.testclient import TestClient

from fimgate.backend.model.registry import bundled_model_path
from fimgate.efim.planner import EfimPlanner
from fimgate.efim.templates import TEMPLATES
from fimgate.gateway.app import create_app
from fimgate.gateway.auth import ApiKeys
from fimgate.gateway.service import CompletionService
from tests.unit.test_gateway_backend_errors import FlakyBackend

pytestmark = pytest.mark.skipif(bundled_model_path() is None, reason="bundled model not installed")


def _client(keys=None, keyed_status=False):
    from fimgate.backend.model.weights import load_tokenizer

    tok = load_tokenizer(bundled_model_path())
    service = CompletionService(FlakyBackend(tok), EfimPlanner(tok, TEMPLATES["smollm2"]))
    return TestClient(create_app(service, keys, keyed_status=keyed_status))


@pytest.mark.parametrize(
    "path,extra,says",
    [
        ("/infill", {"t_max_predict_ms": 10**15}, "t_max_predict_ms"),
        ("/infill", {"id_slot": 10**30}, "id_slot"),
        ("/infill", {"t_max_prompt_ms": -(10**20)}, "t_max_prompt_ms"),
        ("/v1/completions", {"min_token_prob": 1.5}, "min_token_prob"),
        ("/v1/completions", {"min_token_prob": "0.3"}, "min_token_prob"),
        ("/v1/completions", {"n": 2}, "one completion per request"),
        ("/v1/completions", {"best_of": 3}, "one completion per request"),
        ("/v1/completions", {"logprobs": 5}, "log probabilities"),
        ("/v1/completions", {"echo": True}, "does not echo"),
    ],
)
def test_out_of_bounds_and_unsupported_fields_are_a_400_that_says_which(path, extra, says):
    body = {"prompt": "x = ", "input_prefix": "x = ", "max_tokens": 2, "n_predict": 2, **extra}
    r = _client().post(path, json=body)
    assert r.status_code == 400 and says in r.json()["error"]["message"]


def test_nan_is_called_not_a_number_and_the_neutral_values_pass():
    client = _client()
    r = client.post("/v1/completions", content=b'{"prompt": "x", "temperature": NaN}')
    assert r.status_code == 400 and "finite number" in r.json()["error"]["message"]
    ok = {"prompt": "x = ", "max_tokens": 2, "n": 1, "best_of": 1, "echo": False, "logprobs": None}
    assert client.post("/v1/completions", json=ok).status_code == 200


def test_status_endpoints_need_a_key_when_asked():
    keys = ApiKeys({"k-alice": "alice"})
    open_status, keyed = _client(keys), _client(keys, keyed_status=True)
    for path in ("/health", "/metrics", "/props", "/v1/models"):
        assert open_status.get(path).status_code == 200
        assert keyed.get(path).status_code == 401
        assert keyed.get(path, headers={"authorization": "Bearer k-alice"}).status_code == 200
