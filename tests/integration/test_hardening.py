"""`fimgate serve` (real HTTP, the bundled model) against what a buggy or hostile client sends.
Each test is one finding of the hardening issue, and failed before its fix. Time bounds here are
generous ceilings on what used to take minutes, not benchmarks."""

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from fimgate.bench.common.served import start_serve

COUNTING = "numbers = [" + ", ".join(str(i) for i in range(40)) + ", "  # the model keeps counting


@pytest.fixture(scope="module")
def url():
    proc, base = start_serve("--read-timeout-s", "2")
    yield base
    proc.terminate()
    proc.wait(timeout=10)


def _small(url, **extra):
    t0 = time.perf_counter()
    r = httpx.post(
        url + "/v1/completions",
        json={"prompt": "def add(a, b):\n    return ", "suffix": "\n", "max_tokens": 4, "user": "bystander", **extra},
        timeout=120,
    )
    return r, time.perf_counter() - t0


def test_repetitive_context_does_not_wedge_the_server(url):
    """Finding 1: the planner's reuse hints (difflib) on the event loop took 96 s at 5k tokens."""
    for digit in "23":
        body = {
            "input_prefix": "def f(x):\n    return ",
            "input_suffix": "\n",
            "n_predict": 2,
            "user": "ctx",
            "filename": "b.py",
            "input_extra": [{"filename": "a.py", "text": f"q = {digit}\n" * 2000}],
        }
        work = threading.Thread(target=httpx.post, args=(url + "/infill",), kwargs={"json": body, "timeout": 120})
        work.start()
        t0 = time.perf_counter()
        assert httpx.get(url + "/health", timeout=5).status_code == 200  # the event loop is free meanwhile
        assert time.perf_counter() - t0 < 2
        work.join(timeout=60)
        assert not work.is_alive()


def test_healing_is_bounded_whatever_the_prompt_ends_with(url):
    """Finding 2: "x" * 256 with max_tokens 1 held the engine 52 s (every x healed, one step each)."""
    for run in ("x" * 256, "x" * 1_000_000):
        r, took = _small(url, prompt=run, suffix="", max_tokens=1, user="healer", raw=True)
        assert r.status_code == 200, r.text
        assert took < 15
        assert r.json()["usage"]["completion_tokens"] <= 1


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_vanishes_does_not_delay_the_next_user(url, stream):
    """Finding 3: a disconnected client's generation ran to its end while others waited."""
    body = {"prompt": COUNTING, "suffix": "]\n", "max_tokens": 2048, "raw": True, "user": "vanisher", "stream": stream}
    if stream:
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
            for i, _ in enumerate(r.iter_lines()):
                if i == 5:
                    break  # a few tokens in, the client goes away (closing the connection)
    else:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(url + "/v1/completions", json=body, timeout=1.5)
    r, took = _small(url)
    assert r.status_code == 200
    assert took < 8  # 2,048 tokens of counting take ~40 s here
    cancelled = [line for line in httpx.get(url + "/metrics").text.splitlines() if line.startswith("fimgate_cancelled_total")]
    assert cancelled and float(cancelled[0].split()[-1]) >= 1


def test_a_chunked_body_is_held_to_the_size_limit(url):
    """Finding 4: the 8 MiB limit read only Content-Length; a chunked 100 MB body was accepted."""

    def chunks():
        yield b'{"prompt": "'
        for _ in range(10):
            yield b"a" * (1024 * 1024)
        yield b'"}'

    r = httpx.post(url + "/v1/completions", content=chunks(), timeout=60)
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
    body = {"input_prefix": "x", "input_extra": [{"filename": f"{i}.py", "text": "y" * 200_000} for i in range(6)]}
    r = httpx.post(url + "/infill", json=body, timeout=60)
    assert r.status_code == 400 and "input_extra" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    "extra",
    [
        {"temperature": 1e-38},
        {"temperature": 1.0, "top_p": 1e-38},
        {"seed": 2**64},
        {"max_tokens": "10"},
        {"max_tokens": True},
        {"stream": "yes"},
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_odd_values_are_a_4xx_or_an_answer_never_a_500(url, extra, stream):
    """Findings 6 and 8: tiny temperatures and huge seeds were 500s; strings and booleans were
    taken as numbers; streamed failures were a 200 with an empty stream."""
    body = {"prompt": "def add(a, b):\n    return ", "suffix": "\n", "max_tokens": 4, "stream": stream, **extra}
    r = httpx.post(url + "/v1/completions", json=body, timeout=60)
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        assert r.json()["error"]["message"]
    elif stream:
        assert r.text.rstrip().endswith("data: [DONE]") and '"text"' in r.text
    coerced = ("max_tokens" in extra and not isinstance(extra["max_tokens"], int)) or extra.get("max_tokens") is True
    if coerced or "seed" in extra or "stream" in extra:
        assert r.status_code == 400


@pytest.mark.parametrize("field", ["filename", "text"])
def test_lone_surrogates_in_input_extra_are_a_clear_400(url, field):
    """Finding 6: a lone surrogate in input_extra was a 500 (the tokenizer cannot encode it)."""
    chunk = {"filename": "a.py", "text": "a = 1", field: "a\ud800b"}
    body = json.dumps({"input_prefix": "x = ", "n_predict": 2, "input_extra": [chunk]})  # escaped: \\ud800
    r = httpx.post(url + "/infill", content=body.encode(), timeout=60)
    assert r.status_code == 400 and f"input_extra.0.{field}" in r.json()["error"]["message"]


def test_a_form_content_type_is_read_as_json(url):
    """`curl -d` sends application/x-www-form-urlencoded; llama-server reads the JSON anyway."""
    r = httpx.post(
        url + "/v1/completions",
        content=json.dumps({"prompt": "x = ", "max_tokens": 2}),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=60,
    )
    assert r.status_code == 200, r.text


def test_half_sent_headers_and_bodies_are_dropped(url):
    """Finding 7: connections with half-sent headers were held indefinitely."""
    host, port = url.removeprefix("http://").split(":")
    idle = socket.create_connection((host, int(port)))
    idle.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # and never the rest
    slow = socket.create_connection((host, int(port)))
    slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    idle.settimeout(10)
    slow.settimeout(10)
    t0 = time.perf_counter()
    assert idle.recv(1024) == b""  # closed by the server after --read-timeout-s 2
    assert b" 408 " in slow.recv(1024).split(b"\r\n")[0] + b" "
    assert time.perf_counter() - t0 < 6


def test_a_busy_port_is_an_error_exit(url):
    port = url.rsplit(":", 1)[1]
    r = subprocess.run([sys.executable, "-m", "fimgate", "serve", "--port", port], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "cannot listen" in r.stderr and "serving" not in r.stderr


def test_sigterm_stops_a_busy_server_within_seconds():
    proc, base = start_serve()
    body = {"prompt": COUNTING, "max_tokens": 2048, "raw": True, "user": "long"}
    threading.Thread(target=lambda: httpx.post(base + "/v1/completions", json=body, timeout=120), daemon=True).start()
    time.sleep(2)  # it is generating
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert time.perf_counter() - t0 < 4
