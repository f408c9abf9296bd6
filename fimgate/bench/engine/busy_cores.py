"""`fimgate bench engine --background 0,1,2`: the engine beside N busy loops (other processes
each keeping a core busy, as a compiler or a test run does), with the thread count chosen per
request from the cores left free (the default) and fixed at every usable core (what torch and
llama.cpp do), and any --peers (llama.cpp: its own default threads), in one run. Per case: a
request as an editor sends it (a fresh ~600-token prompt, 8 tokens: time to first token and the
whole request), decode speed, and a 1-token append."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import time

from fimgate.bench.engine.speed import _run, _source_tokens

REPEATS = 5
PROMPT_TOKENS = 600  # ~2,000 characters of code
NEW_TOKENS = 8


@contextlib.contextmanager
def busy_loops(n: int):
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _case(engine, ids: list[int], tag: str) -> dict:
    _run(engine, ids[:64], f"{tag}-warm", 2)  # the governor looks at the load since its last request
    req = [_run(engine, ids[:PROMPT_TOKENS], f"{tag}-r{i}", NEW_TOKENS) for i in range(REPEATS)]
    _run(engine, ids[:PROMPT_TOKENS], f"{tag}-append", 0)
    append = [_run(engine, ids[: PROMPT_TOKENS + 1 + i], f"{tag}-append", 1).ttft_ms for i in range(REPEATS)]
    decode = [_run(engine, ids[:32], f"{tag}-d{i}", 32).decode_tokens_per_s for i in range(3)]
    return {
        "threads": engine.governor.threads if hasattr(engine, "governor") else getattr(engine, "threads", None),
        "request_ttft_ms": round(statistics.median(u.ttft_ms for u in req), 1),
        "request_total_ms": round(statistics.median(u.total_ms for u in req), 1),
        "decode_tokens_per_s": round(statistics.median(d for d in decode if d), 1),
        "append_1_token_ms": round(statistics.median(append), 1),
    }


def run(engines: dict, counts: list[int], progress=print) -> dict:
    """engines: name -> engine (same model; e.g. "auto" and "fixed")."""
    ids = _source_tokens(next(iter(engines.values())).tokenizer, PROMPT_TOKENS + REPEATS + 2)
    out: dict = {"prompt_tokens": PROMPT_TOKENS, "new_tokens": NEW_TOKENS, "cases": {}}
    for n in counts:
        with busy_loops(n):
            case = {}
            for name, engine in engines.items():
                case[name] = _case(engine, ids, f"{name}-{n}")
                progress(f"busy cores {n}, {name}: {case[name]}")
            out["cases"][str(n)] = case
    base = out["cases"].get("0")
    if base:
        for n, case in out["cases"].items():
            for name, r in case.items():
                r["request_total_vs_idle"] = round(r["request_total_ms"] / base[name]["request_total_ms"], 2)
                r["request_ttft_vs_idle"] = round(r["request_ttft_ms"] / base[name]["request_ttft_ms"], 2)
    return out
