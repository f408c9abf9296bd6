"""`fimgate bench engine --batch N`: aggregate decode speed with N people decoding at once.

Each of N people has their own prompt (real source text, `context` tokens, cached by a
warm-up first); then all N ask at the same moment and decode `tokens` tokens greedily. The
embedded engine runs them as `fimgate serve` does - request threads waiting, the scheduler's
loop on the main thread (fimgate/backend/embedded/scheduler.py), every running request's next
token in one batched step. llama.cpp runs the same prompts as N parallel sequences in one
context, one `llama_decode` per step (llama-server `--parallel N`;
fimgate/bench/peers/llama_cpp_parallel.py). Aggregate tokens/s = tokens decoded by everyone /
wall time; `vs_one` = that over the same engine's one-stream figure.
"""

from __future__ import annotations

import threading
import time

from fimgate.backend.base import FimPlan, SamplingParams, last_finished
from fimgate.backend.main_thread import MainThreadRunner
from fimgate.bench.engine.speed import _source_tokens


def prompts_for(tok, people: int, context: int) -> list[list[int]]:
    """`people` different prompts of `context` tokens each (consecutive stretches of source)."""
    ids = _source_tokens(tok, context * people + 1)
    return [ids[i * context : (i + 1) * context] for i in range(people)]


def _plan(ids: list[int], user: str, max_tokens: int) -> FimPlan:
    return FimPlan(prompt_ids=tuple(ids), user_id=user, session_id="batch", sampling=SamplingParams(max_tokens=max_tokens))


def fimgate_streams(engine, prompts: list[list[int]], tokens: int) -> dict:
    """All prompts decoded together through the engine's scheduler, driven on this (main) thread."""
    for i, ids in enumerate(prompts):  # each person's prompt cached, as a typing person's would be
        last_finished(engine.generate(_plan(ids, f"batch{i}", 0)))
    runner = MainThreadRunner()
    engine.drive_on(runner)
    counts = [0] * len(prompts)
    start = threading.Barrier(len(prompts) + 1)

    def person(i: int) -> None:
        start.wait()
        counts[i] = last_finished(engine.generate(_plan(prompts[i], f"batch{i}", tokens))).usage.completion_tokens

    threads = [threading.Thread(target=person, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    runner.serve_forever(until=lambda: not any(t.is_alive() for t in threads))
    seconds = time.perf_counter() - t0
    runner.stop()
    engine.drive_on(None)
    engine.reset()
    return {"seconds": seconds, "tokens": sum(counts)}


def measure_batches(run, sizes: list[int], prompts: list[list[int]], tokens: int) -> dict:
    """run(prompts, tokens) -> {seconds, tokens}, at each size; aggregate tokens/s and vs one."""
    out = {}
    for n in sizes:
        r = run(prompts[:n], tokens)
        out[str(n)] = {"streams": n, "tokens": r["tokens"], "aggregate_tokens_per_s": round(r["tokens"] / r["seconds"], 1)}
    one = out[str(sizes[0])]["aggregate_tokens_per_s"] if sizes[0] == 1 else None
    for v in out.values():
        v["vs_one"] = round(v["aggregate_tokens_per_s"] / one, 2) if one else None
    return out


def run(engine, sizes: list[int], tokens: int = 64, context: int = 256, llama_cpp_path: str | None = None) -> dict:
    prompts = prompts_for(engine.tokenizer, max(sizes), context)
    result = {
        "tokens_per_stream": tokens,
        "context_tokens": context,
        "fimgate": measure_batches(lambda p, t: fimgate_streams(engine, p, t), sizes, prompts, tokens),
    }
    if llama_cpp_path is not None:
        from fimgate.bench.peers.llama_cpp_parallel import LlamaCppParallel

        peer = LlamaCppParallel(llama_cpp_path, threads=engine.governor.threads, sequences=max(sizes))
        try:
            result["llama.cpp"] = measure_batches(peer.decode_streams, sizes, prompts, tokens)
        finally:
            peer.close()
        result["fimgate_vs_llama.cpp"] = {
            n: round(result["fimgate"][n]["aggregate_tokens_per_s"] / result["llama.cpp"][n]["aggregate_tokens_per_s"], 2)
            for n in result["fimgate"]
        }
    return result
