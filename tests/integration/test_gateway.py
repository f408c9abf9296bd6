"""The gateway over real HTTP on loopback, with the real bundled model."""

import json
import subprocess
import sys
import threading

import httpx
import pytest

from fimgate.bench.common.served import start_serve


@pytest.fixture(scope="module")
def url():
    proc, base = start_serve()
    yield base
    proc.terminate()
    proc.wait(timeout=10)


PREFIX = "def fibonacci(n):\n    if n < 2:\n        return n\n    return "
SUFFIX = "\n\n\nprint(fibonacci(10))\n"


def test_openai_client_with_suffix(url):
    from openai import OpenAI

    client = OpenAI(base_url=url + "/v1", api_key="unused")
    r = client.completions.create(
        model="fimgate", prompt=PREFIX, suffix=SUFFIX, max_tokens=12, temperature=0, user="oa", extra_body={"document": "fib.py"}
    )
    assert r.choices[0].text.strip()
    assert r.usage.prompt_tokens > 10
    again = client.completions.create(
        model="fimgate", prompt=PREFIX, suffix=SUFFIX, max_tokens=12, temperature=0, user="oa", extra_body={"document": "fib.py"}
    )
    assert again.choices[0].text == r.choices[0].text
    assert again.usage.prompt_tokens_details.cached_tokens >= again.usage.prompt_tokens - 1


def test_llama_vscode_shaped_infill(url):
    body = {
        "input_prefix": PREFIX,
        "input_suffix": SUFFIX,
        "prompt": "fib",
        "input_extra": [{"filename": "util.py", "text": "def helper():\n    return 1\n"}],
        "n_predict": 12,
        "t_max_predict_ms": 1000,
        "cache_prompt": True,
        "id_slot": 0,
        "samplers": ["top_k", "top_p", "infill"],
        "top_k": 40,
        "top_p": 0.99,
        "stream": False,
    }
    r = httpx.post(url + "/infill", json=body, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["content"] and "tokens_predicted" in out and "timings" in out
    warm = httpx.post(url + "/infill", json={**body, "n_predict": 0}, timeout=120)
    assert warm.status_code == 200 and warm.json()["content"] == ""


def test_streaming_sends_sse_chunks_then_done(url):
    lines = []
    with httpx.stream(
        "POST",
        url + "/v1/completions",
        timeout=120,
        json={"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 16, "stream": True, "user": "st"},
    ) as r:
        for line in r.iter_lines():
            if line:
                lines.append(line)
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(x[6:]) for x in lines[:-1]]
    assert "".join(c["choices"][0]["text"] for c in chunks).strip()
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_a_new_request_cancels_the_one_in_flight(url):
    counting = "numbers = [" + ", ".join(str(i) for i in range(1, 30)) + ","  # greedy keeps counting
    first, started = {}, threading.Event()

    def slow():
        with httpx.stream(
            "POST",
            url + "/v1/completions",
            timeout=120,
            json={"prompt": counting, "suffix": "]\n", "max_tokens": 400, "stream": True, "user": "cp", "document": "same.py"},
        ) as r:
            lines = []
            for x in r.iter_lines():
                if x:
                    lines.append(x)
                    started.set()
            first["lines"] = lines

    t = threading.Thread(target=slow)
    t.start()
    assert started.wait(60)
    second = httpx.post(
        url + "/v1/completions",
        timeout=120,
        json={"prompt": counting + " 3", "suffix": "]\n", "max_tokens": 8, "user": "cp", "document": "same.py"},
    )
    t.join(timeout=120)
    assert second.status_code == 200 and not second.json()["fimgate"]["cancelled"]
    assert first["lines"][-1] == "data: [DONE]"
    final = json.loads(first["lines"][-2][6:])
    assert final["fimgate"]["cancelled"] is True
    assert final["fimgate"]["completion_tokens"] < 400


@pytest.mark.parametrize(
    "send,status",
    [
        (dict(content=b"{not json"), 400),
        (dict(json={"prompt": 5}), 400),
        (dict(json={"prompt": "x", "max_tokens": -1}), 400),
        (dict(json={"prompt": "x", "max_tokens": 10**9}), 400),
        (dict(content=b'{"prompt": "\xff\xfe"}', headers={"content-type": "application/json"}), 400),
        (dict(content=b'{"prompt": "' + b"a" * (10 * 1024 * 1024) + b'"}', headers={"content-type": "application/json"}), 413),
    ],
)
def test_bad_input_gets_a_json_error_and_the_server_keeps_serving(url, send, status):
    r = httpx.post(url + "/v1/completions", timeout=60, **send)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["message"] and "Traceback" not in r.text
    assert httpx.get(url + "/health", timeout=10).status_code == 200


def test_any_model_name_is_answered_by_the_model_served(url):
    """OpenAI clients send whatever model they were configured with (llama-server answers them too)."""
    served = httpx.get(url + "/v1/models").json()["data"][0]["id"]
    for name in ("default", "gpt-3.5-turbo-instruct", served):
        r = httpx.post(url + "/v1/completions", json={"prompt": "x = ", "max_tokens": 2, "model": name}, timeout=60)
        assert r.status_code == 200 and r.json()["model"] == served


def test_streamed_and_plain_answers_are_the_same_text(url):
    """The issue's case: the stream skipped the suffix clean-up and showed `r ** 2)`."""
    body = {"prompt": "def area(r):\n    return 3.14 * (", "suffix": ")\n", "max_tokens": 16, "user": "st"}
    plain = httpx.post(url + "/v1/completions", json=body, timeout=60).json()["choices"][0]["text"]
    with httpx.stream("POST", url + "/v1/completions", json={**body, "stream": True}, timeout=60) as r:
        pieces = [json.loads(line[6:])["choices"][0]["text"] for line in r.iter_lines() if line.startswith("data: {")]
    assert "".join(pieces) == plain
    assert not plain.endswith(")")


def test_models_and_metrics(url):
    assert httpx.get(url + "/v1/models").json()["data"][0]["id"].endswith(".gguf")
    text = httpx.get(url + "/metrics").text
    assert "fimgate_requests_total" in text and "fimgate_ttft_seconds_bucket" in text
    # how many compute threads run, and why (the cores other processes leave free)
    compute = httpx.get(url + "/health").json()["compute"]
    assert 1 <= compute["threads"] <= compute["usable_cores"] and "usable cores" in compute["why"]
    assert f"fimgate_threads {float(compute['threads'])}" in httpx.get(url + "/metrics").text


def test_time_budget_ends_a_multiline_suggestion_at_a_complete_line(url):
    # the end of a block opener asks for the body: several lines unbudgeted
    body = {"prompt": "class Point:\n    def __init__(self, x, y):\n", "suffix": "\n\np = Point(1, 2)\n", "max_tokens": 64}
    body |= {"multiline": True, "document": "point.py"}
    whole = httpx.post(url + "/v1/completions", json={**body, "user": "all"}, timeout=120).json()
    cut = httpx.post(url + "/v1/completions", json={**body, "user": "budget", "max_predict_ms": 1}, timeout=120).json()
    text, short = whole["choices"][0]["text"], cut["choices"][0]["text"]
    assert text.count("\n") >= 1, text
    assert short and text.startswith(short) and len(short) < len(text), (short, text)
    assert cut["usage"]["completion_tokens"] < whole["usage"]["completion_tokens"]
    bad = httpx.post(url + "/v1/completions", json={**body, "max_predict_ms": "200"}, timeout=30)
    assert bad.status_code == 400


def test_min_token_prob_shows_what_the_model_is_sure_of(url):
    """The same request with a probability floor: a beginning of the whole completion, shorter,
    never empty; the usage says fewer tokens ran."""
    body = {"prompt": "class Point:\n    def __init__(self, x, y):\n", "suffix": "\n\np = Point(1, 2)\n", "max_tokens": 48}
    body |= {"multiline": True, "document": "sure.py"}
    whole = httpx.post(url + "/v1/completions", json={**body, "user": "whole"}, timeout=120).json()
    sure = httpx.post(url + "/v1/completions", json={**body, "user": "sure", "min_token_prob": 0.999}, timeout=120).json()
    text, short = whole["choices"][0]["text"], sure["choices"][0]["text"]
    assert short and text.startswith(short) and len(short) < len(text), (short, text)
    assert sure["usage"]["completion_tokens"] < whole["usage"]["completion_tokens"]


UTIL = (
    "def clamp(value, low, high):\n    return max(low, min(value, high))\n\n\n"
    "def mean(values):\n    return sum(values) / len(values)\n"
)
MODELS = (
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
    "    def norm(self):\n        return (self.x ** 2 + self.y ** 2) ** 0.5\n"
)


def test_context_from_other_files_on_completions_is_reused_when_it_changes(url):
    """input_extra on /v1/completions reaches the prompt; typing keeps it a prefix hit; dropping a
    chunk re-anchors without a full prefill (the rest of the prompt is reused, shifted)."""

    def ask(prompt, extra, document="ctx.py"):
        body = {"prompt": prompt, "suffix": SUFFIX, "max_tokens": 4, "user": "ctx", "document": document, "input_extra": extra}
        r = httpx.post(url + "/v1/completions", json=body, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["fimgate"]

    chunks = [{"filename": "util.py", "text": UTIL}, {"filename": "models.py", "text": MODELS}]
    bare = ask(PREFIX, [], document="no-ctx.py")
    first = ask(PREFIX, chunks)
    assert first["prompt_tokens"] > bare["prompt_tokens"] + 60  # both files are in the prompt
    typed = ask(PREFIX + "fib", chunks)
    assert typed["cached_tokens"]["prefix"] >= first["prompt_tokens"] - 2 and typed["prefilled_tokens"] <= 8
    dropped = ask(PREFIX + "fib", chunks[1:])
    assert dropped["cached_tokens"]["shifted"] > 0
    assert dropped["prefilled_tokens"] < 0.5 * dropped["prompt_tokens"]


def test_context_over_its_budget_is_a_400(url):
    extra = [{"filename": f"f{i}.py", "text": "x" * 40_000} for i in range(30)]
    r = httpx.post(url + "/v1/completions", json={"prompt": "x", "input_extra": extra}, timeout=60)
    assert r.status_code == 400 and "input_extra" in r.json()["error"]["message"]


def test_acceptance_events_count_for_their_user_and_hold_no_code(url):
    def ask(user):
        body = {"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 8, "user": user, "document": "ev.py"}
        r = httpx.post(url + "/v1/completions", json=body, timeout=120).json()
        assert r["choices"][0]["text"]
        return r["id"], r["choices"][0]["text"]

    cid, text = ask("eva")
    for kind in ("view", "select"):
        r = httpx.post(url + "/v1/events", json={"type": kind, "completion_id": cid, "user": "eva"}, timeout=30)
        assert r.status_code == 200, r.text
    other = httpx.post(url + "/v1/events", json={"type": "dismiss", "completion_id": cid, "user": "mallory"}, timeout=30)
    assert other.status_code == 404  # another user cannot count (or probe) eva's completion
    bad = httpx.post(url + "/v1/events", json={"type": "liked", "completion_id": cid}, timeout=30)
    assert bad.status_code == 400
    eva = httpx.get(url + "/v1/events/summary", params={"user": "eva"}, timeout=30).json()
    assert eva["by_language"]["python"]["shown"] == 1 and eva["by_language"]["python"]["accepted"] == 1
    assert eva["total"]["accepted_chars"] == len(text)
    assert httpx.get(url + "/v1/events/summary", params={"user": "mallory"}, timeout=30).json()["total"]["shown"] == 0
    metrics = httpx.get(url + "/metrics", timeout=30).text
    assert "fimgate_suggestions_accepted_total" in metrics and "eva" not in metrics
    assert text.strip() not in metrics + json.dumps(eva)  # counts and labels, never code
    out = subprocess.run(
        [sys.executable, "-m", "fimgate", "stats", "--url", url, "--user", "eva"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "python" in out.stdout and "100%" in out.stdout, out.stdout + out.stderr


def test_acceptance_is_inferred_for_a_client_that_reports_none(url):
    """llama.vscode sends no events: taking the suggestion shows in the session's next request."""

    def infill(prefix):
        body = {"input_prefix": prefix, "input_suffix": SUFFIX, "n_predict": 8, "user": "llama", "filename": "inf.py"}
        return httpx.post(url + "/infill", json=body, timeout=120).json()["content"]

    text = infill(PREFIX)
    assert text.strip()
    infill(PREFIX + text)  # the person pressed Tab: the next request's text holds the suggestion
    got = httpx.get(url + "/v1/events/summary", params={"user": "llama"}, timeout=30).json()["total"]
    assert got["shown"] == 1 and got["accepted"] == 1 and got["accepted_chars"] == len(text)
    assert 'source="inferred"' in httpx.get(url + "/metrics", timeout=30).text


def test_alternatives_come_first_when_asked_and_the_text_is_the_same(url):
    """An editor asks for alternatives (fimgate/backend/embedded/alternatives.py): texts for keys
    that leave the suggestion, in an event of their own before its text; the text is unchanged."""
    body = {"prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 16, "user": "alt", "document": "alt.py"}
    plain = httpx.post(url + "/v1/completions", json=body, timeout=60).json()
    assert "fimgate_alternatives" not in plain
    with httpx.stream("POST", url + "/v1/completions", json={**body, "stream": True, "alternatives": 4}, timeout=60) as r:
        chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    alternatives = chunks[0]["fimgate_alternatives"]
    assert 1 <= len(alternatives) <= 4 and chunks[0]["choices"][0]["text"] == ""
    assert all(len(a) >= 2 and "\n" not in a for a in alternatives)
    assert len({a[0] for a in alternatives}) == len(alternatives)  # one per next character
    text = "".join(c["choices"][0]["text"] for c in chunks)
    assert text == plain["choices"][0]["text"] and text[:1] not in {a[0] for a in alternatives}
    assert sum("fimgate_alternatives" in c for c in chunks) == 1
