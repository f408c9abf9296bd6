"""`/infill` and `/props` as llama-server answers them, with the requests llama.vscode 0.0.63 sends
(src/llama-server.ts: createRequestPayload), over real HTTP with the bundled model."""

import httpx
import pytest

from fimgate.bench.common.served import start_serve

PREFIX_LINES = "import os\n\n\ndef area(w, h):\n"
LINE = "    return "
SUFFIX = "\n\n\nprint(area(2, 3))\n"


def llama_vscode_body(input_prefix, prompt, input_suffix, chunks=(), n_predict=128, **extra):
    """What llama.vscode posts for a completion (n_predict > 0) or a warm-up (n_predict 0)."""
    if n_predict == 0:
        return {
            "id_slot": 0,
            "input_prefix": input_prefix,
            "input_suffix": input_suffix,
            "input_extra": list(chunks),
            "prompt": prompt,
            "n_predict": 0,
            "samplers": [],
            "cache_prompt": True,
            "t_max_prompt_ms": 500,
            "t_max_predict_ms": 1,
            **extra,
        }
    return {
        "id_slot": 0,
        "input_prefix": input_prefix,
        "input_suffix": input_suffix,
        "input_extra": list(chunks),
        "prompt": prompt,
        "n_predict": n_predict,
        "n_cmpl": 3,
        "top_k": 40,
        "top_p": 0.99,
        "stream": False,
        "samplers": ["top_k", "top_p", "infill"],
        "cache_prompt": True,
        "n_indent": 4,
        "t_max_prompt_ms": 500,
        "t_max_predict_ms": 2500,
        **extra,
    }


@pytest.fixture(scope="module")
def url():
    proc, base = start_serve()
    yield base
    proc.terminate()
    proc.wait(timeout=10)


def _infill(url, body):
    r = httpx.post(url + "/infill", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_llama_vscode_request_gets_llama_servers_answer(url):
    out = _infill(url, llama_vscode_body(PREFIX_LINES, LINE, SUFFIX))
    assert out["content"].strip() and "\n" not in out["content"]
    assert isinstance(out["generation_settings"]["n_ctx"], int) and out["generation_settings"]["n_ctx"] > 1000
    for key in (
        "prompt_n",
        "prompt_ms",
        "prompt_per_token_ms",
        "prompt_per_second",
        "predicted_n",
        "predicted_ms",
        "predicted_per_token_ms",
        "predicted_per_second",
    ):
        assert key in out["timings"], key
    assert out["timings"]["predicted_n"] == out["tokens_predicted"] > 0
    assert out["truncated"] is False and out["stop_type"] in ("eos", "limit", "word")
    assert isinstance(out["tokens_cached"], int)


def test_response_fields_are_the_only_fields(url):
    out = _infill(url, llama_vscode_body(PREFIX_LINES, LINE, SUFFIX, response_fields=["content", "timings/prompt_n", "no/such"]))
    assert set(out) == {"content", "timings/prompt_n"}


def test_props_says_the_context_size(url):
    props = httpx.get(url + "/props", timeout=10).json()
    assert props["default_generation_settings"]["n_ctx"] > 1000


def test_files_without_names_keep_their_own_sessions(url):
    """llama.vscode sends no file name: switching between two files must not make every switch a
    full prefill (today's shared session did)."""
    a = ("import os\n\n\ndef area(w, h):\n", "    return ", "\n\n\nprint(area(2, 3))\n")
    b = ("class Stack:\n    def __init__(self):\n", "        self.items = ", "\n\n    def push(self, x):\n        pass\n")
    user = {"user": "nameless"}
    _infill(url, llama_vscode_body(*a, **user))
    _infill(url, llama_vscode_body(*b, **user))
    again = _infill(url, llama_vscode_body(a[0], a[1] + "w", a[2], **user))  # one more key in file a
    usage = again["fimgate"]
    assert usage["cached_tokens"]["prefix"] >= usage["prompt_tokens"] - 3, usage


def test_a_ring_buffer_warm_up_leaves_the_typing_session_alone(url):
    user = {"user": "ring"}
    _infill(url, llama_vscode_body(PREFIX_LINES, LINE, SUFFIX, **user))
    chunk = {"filename": "util.py", "text": "def helper(x):\n    return x * 2\n"}
    warm = _infill(url, llama_vscode_body("", "", "", chunks=[chunk], n_predict=0, **user))
    assert warm["content"] == ""
    typed = _infill(url, llama_vscode_body(PREFIX_LINES, LINE + "w", SUFFIX, **user))
    usage = typed["fimgate"]
    assert usage["cached_tokens"]["prefix"] >= usage["prompt_tokens"] - 3, usage  # still an EFIM append


def test_a_ring_that_moves_a_chunk_to_its_end_costs_no_prefill(url):
    """A client whose ring moves a chunk to its end, or that ranks snippets anew, sends the same
    chunks in a new order; the gateway shows them in the order they first came, so the next key
    is still a prefix hit."""
    user = {"user": "reorder"}
    a = {"filename": "util.py", "text": "def helper(x):\n    return x * 2\n"}
    b = {"filename": "shapes.py", "text": "class Square:\n    def __init__(self, side):\n        self.side = side\n"}
    first = _infill(url, llama_vscode_body(PREFIX_LINES, LINE, SUFFIX, chunks=[a, b], **user))
    typed = LINE + "zq"  # not how the suggestion starts: the model runs (no type-through)
    moved = _infill(url, llama_vscode_body(PREFIX_LINES, typed, SUFFIX, chunks=[b, a], **user))
    usage = moved["fimgate"]
    assert usage["prompt_tokens"] >= first["fimgate"]["prompt_tokens"]
    assert usage["cached_tokens"]["prefix"] >= usage["prompt_tokens"] - 3, usage
