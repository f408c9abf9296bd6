"""`fimgate complete` and `fimgate models` as a user runs them: real model, real process."""

import json
import subprocess
import sys

import pytest


def fimgate(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "fimgate", *args], capture_output=True, text=True, timeout=timeout)


def test_complete_prints_a_completion_with_its_usage(tmp_path):
    src = tmp_path / "fib.py"
    src.write_text("def fibonacci(n):\n    if n < 2:\n        return n\n    return \n\nprint(fibonacci(10))\n")
    offset = src.read_text().index("return \n") + len("return ")
    r = fimgate("complete", "--file", str(src), "--offset", str(offset), "--max-tokens", "12", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["completion"].strip()
    assert out["usage"]["prompt_tokens"] > 10 and out["usage"]["prefilled_tokens"] == out["usage"]["prompt_tokens"]


def test_complete_shows_what_the_gateway_shows(tmp_path):
    """The issue's case: `complete` repeated the code after the cursor (`a + b\n\nprint(add(1, 2))`)."""
    import httpx

    from fimgate.bench.common.served import start_serve

    text = "def add(a, b):\n    return \n\nprint(add(1, 2))\n"
    src = tmp_path / "add.py"
    src.write_text(text)
    offset = text.index("return ") + len("return ")
    r = fimgate("complete", "--file", str(src), "--offset", str(offset), "--max-tokens", "16", "--json")
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)["completion"]
    assert shown.strip() and "print(add" not in shown and "\n" not in shown
    proc, url = start_serve()
    try:
        body = {"prompt": text[:offset], "suffix": text[offset:], "max_tokens": 16, "document": "add.py"}
        assert httpx.post(url + "/v1/completions", json=body, timeout=60).json()["choices"][0]["text"] == shown
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_bench_engine_runs_bf16_prompts_and_says_so():
    r = fimgate(
        "bench",
        "engine",
        "--model",
        "smollm2-135m",
        "--prefill-dtype",
        "bfloat16",
        "--dtype",
        "int8",
        "--prefill-tokens",
        "100",
        "--cached-tokens",
        "120",
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["precision"] == "int8+bfloat16-prompts"
    assert out["prefill_tokens_per_s"] > 0 and out["append_prefilled_tokens"] == 1


@pytest.mark.parametrize(
    "case,needle",
    [
        ("empty", "is empty"),
        ("offset", "outside"),
        ("binary", "not UTF-8"),
        ("model", "does not exist"),
        ("missing", "no such file"),
    ],
)
def test_bad_input_is_a_clear_error_not_a_traceback(tmp_path, case, needle):
    f = tmp_path / "x.py"
    f.write_text("x = 1\n")
    args = ["complete", "--file", str(f)]
    if case == "empty":
        f.write_text("")
    elif case == "offset":
        args += ["--offset", "99"]
    elif case == "binary":
        f.write_bytes(b"x = '\xff\xfe'\n")
    elif case == "model":
        args += ["--model", str(tmp_path / "nope.gguf")]
    else:
        args = ["complete", "--file", str(tmp_path / "absent.py")]
    r = fimgate(*args)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_models_lists_each_model_by_name_with_where_it_lives():
    r = fimgate("models")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "qwen2.5-coder-0.5b (default)" in r.stdout and "smollm2-135m" in r.stdout and ".gguf" in r.stdout
    assert "qwen2.5-coder-1.5b" in r.stdout and "Apache-2.0" in r.stdout


def test_an_unknown_model_name_is_one_line_naming_the_known_ones():
    r = fimgate("complete", "--file", __file__, "--offset", "0", "--model", "qwen9-coder")
    assert r.returncode == 2 and "unknown model 'qwen9-coder'" in r.stderr and "qwen2.5-coder-0.5b" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args,needle",
    [
        (["bench", "engine", "--peers", "llama.cpp,ollama"], "unknown peer 'ollama'"),
        (["bench", "replay", "x.jsonl", "--typing-first", "--warmup-yield-ms", "500"], "give one of them"),
        (
            ["bench", "replay", "x.jsonl", "--strategies", "efim+correction", "--peers", "llama.cpp"],
            "add one of them to --strategies",
        ),
        (["bench", "quality", "--compare-dtype", "auto"], "precision already measured"),
        (["bench", "quality", "--strategies", "no-cache,served", "--perturb", "edit-above"], "cold request"),
        (["bench", "replay", "x.jsonl", "--dump-outcomes", "/nonexistent/dir/out.jsonl"], "--dump-outcomes"),
        (["bench", "lsp", "--json", "/proc/fimgate-no/editor.json"], "--json /proc/fimgate-no/editor.json"),
    ],
)
def test_bad_benchmark_flags_are_clear_errors(args, needle):
    r = fimgate(*args)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr


def test_bench_replay_dumps_every_request_and_names_what_its_slowest_are(tmp_path):
    from tests.conftest import HEAD_TRACE as trace

    dump = tmp_path / "outcomes.jsonl"
    r = fimgate(
        "bench",
        "replay",
        trace,
        "--limit-requests",
        "12",
        "--strategies",
        "efim",
        "--users",
        "2",
        "--max-tokens",
        "1",
        "--time-scale",  # gaps wide enough that some requests run before the next key on a slow CPU
        "20",  # (AVX2 only, 2 cores: at the trace's pace every request was superseded before it ran)
        "--pin-policy",
        "lru-only,pin",
        "--dump-outcomes",
        str(dump),
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    for label in ("efim@lru-only", "efim@pin"):
        mine = [row for row in rows if row["strategy"] == label]
        assert len([row for row in mine if not row["prewarm"]]) == out[label]["requests"]
        ran = [row for row in mine if not row["prewarm"] and not row["dropped"]]
        assert len(ran) == out[label]["ran"] and all(row["queued_ms"] >= 0 for row in ran)
        slow = out[label]["slowest_1pct"]
        assert slow["requests"] == 1 and sum(slow["causes"].values()) == 1
        assert slow["ttft_ms_from"] == round(max(row["ttft_ms"] for row in ran), 1)


def test_serve_builds_its_kernels_before_it_takes_requests(tmp_path, monkeypatch):
    """A first start compiled the one-token step's kernel (~4 s) at the first step, inside the
    person's first keys; now `serve` is up only once every kernel it steps with is built."""
    from fimgate.bench.common.served import start_serve

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no kernel built yet
    proc, _ = start_serve("--model", "smollm2-135m")
    try:
        built = sorted(p.name.split("-")[0] for p in (tmp_path / "fimgate" / "kernels").glob("*.so"))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "llama_step" in built and "quant_gemv" in built, built
