"""Raw engine speed: `fimgate bench engine`.

- prefill tok/s: a cold prompt of N tokens (real source text), N / time-to-first-token;
- decode tok/s: greedy decoding at short context and at the cached-prompt length;
- 1-token append: a prompt of M tokens is cached, then the same prompt plus one token is asked
  for; its time to first token is compared with one decode step (goal: within 2 steps).
- a moved prompt (the embedded engine): the M cached tokens asked for again behind 3 new ones, as
  after an edit right after the cursor in a layout that shows that text first; time to first
  token with the cached K/V placed re-rotated (suffix-KV correction), shift only and with the
  served recompute share, against a full prefill of the same prompt.
Medians of a few repeats; each measurement uses a fresh user so nothing is shared by accident.
"""

from __future__ import annotations

import statistics

from fimgate.backend.base import FimPlan, ReuseHint, SamplingParams, last_finished
from fimgate.bench.common.checkout import package_sources

REPEATS = 3


def _source_tokens(tok, n: int) -> list[int]:
    text = "".join(p.read_text(encoding="utf-8") for p in package_sources())
    ids = tok.encode(text)
    while len(ids) < n:
        ids = ids + ids
    return ids[:n]


def _run(engine, ids, user: str, max_tokens: int):
    plan = FimPlan(prompt_ids=tuple(ids), user_id=user, session_id="bench", sampling=SamplingParams(max_tokens=max_tokens))
    return last_finished(engine.generate(plan)).usage


def measure(engine, prefill_tokens: int = 1000, cached_tokens: int = 2000) -> dict:
    tok = engine.tokenizer
    ids = _source_tokens(tok, max(prefill_tokens, cached_tokens) + 1)
    _run(engine, ids[:64], "warmup", 4)
    prefill = [prefill_tokens / (_run(engine, ids[:prefill_tokens], f"p{i}", 1).ttft_ms / 1000) for i in range(REPEATS)]
    short = [_run(engine, ids[:32], f"d{i}", 64).decode_tokens_per_s for i in range(REPEATS)]
    long_ = []
    append = []
    prefilled = []
    for i in range(REPEATS):
        user = f"a{i}"
        _run(engine, ids[:cached_tokens], user, 0)
        u = _run(engine, ids[: cached_tokens + 1], user, 32)
        prefilled.append(u.prefilled_tokens)  # 1 on the embedded engine; vLLM caches whole blocks only
        append.append(u.ttft_ms)
        long_.append(u.decode_tokens_per_s)
    decode_step_ms = 1000 / statistics.median(long_)
    return {
        "model": engine.model_name,
        "threads": getattr(engine, "threads", None) or __import__("torch").get_num_threads(),
        "prefill_tokens": prefill_tokens,
        "prefill_tokens_per_s": round(statistics.median(prefill), 1),
        "decode_tokens_per_s_at_32": round(statistics.median(short), 1),
        f"decode_tokens_per_s_at_{cached_tokens}": round(statistics.median(long_), 1),
        "cached_tokens": cached_tokens,
        "append_1_token_ttft_ms": round(statistics.median(append), 1),
        "append_prefilled_tokens": max(prefilled),
        "decode_step_ms_at_cached": round(decode_step_ms, 1),
        "append_ttft_in_decode_steps": round(statistics.median(append) / decode_step_ms, 2),
    }


def read_bandwidth_now(engine) -> float | None:
    from fimgate.kernels.membw import read_bandwidth

    return read_bandwidth(getattr(engine, "threads", None))


def memory_floor(engine, result: dict, samples: list[float | None]) -> dict | None:
    """What memory bandwidth allows a decode step at the cached length: the bytes the step reads
    (every weight of the layers and the head once, the K/V of the context) over the read
    bandwidth (the mean of `samples`, measured right before and right after the decode figures:
    on a shared VM it moves from hour to hour), beside the step measured. None for engines
    fimgate does not hold."""
    model = getattr(engine, "model", None)
    samples = [b for b in samples if b]
    if model is None or not hasattr(model, "weight_bytes") or not samples:
        return None
    bandwidth = sum(samples) / len(samples)
    cfg = model.cfg
    kv_bytes = 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * result["cached_tokens"] * 4
    step_bytes = model.weight_bytes + kv_bytes
    floor_ms = step_bytes / bandwidth * 1000
    return {
        "bytes_per_step": step_bytes,
        "weight_bytes": model.weight_bytes,
        "kv_bytes_at_cached": kv_bytes,
        "read_bandwidth_gb_s": round(bandwidth / 1e9, 1),
        "read_bandwidth_samples_gb_s": [round(b / 1e9, 1) for b in samples],
        "floor_step_ms": round(floor_ms, 2),
        "floor_tokens_per_s": round(1000 / floor_ms, 1),
        "decode_step_over_floor": round(result["decode_step_ms_at_cached"] / floor_ms, 2),
    }


MOVED_BY = 3  # tokens inserted in front of the cached text


def moved_prompt(engine, cached_tokens: int, share: float) -> dict:
    """Time to first token of a cached prompt asked for again MOVED_BY tokens later."""
    ids = _source_tokens(engine.tokenizer, cached_tokens + MOVED_BY)
    old, new = tuple(ids[MOVED_BY:]), tuple(ids)

    def ask(user: str, share: float | None) -> float:
        hints = (ReuseHint(0, MOVED_BY, len(old)),) if share is not None else ()
        plan = FimPlan(
            prompt_ids=new,
            user_id=user,
            session_id="bench",
            sampling=SamplingParams(max_tokens=1),
            reuse_hints=hints,
            hint_prompts=(("", old),) if hints else (),
            recompute_share=share,
        )
        return last_finished(engine.generate(plan)).usage.ttft_ms

    out: dict[str, list[float]] = {"shift_only": [], f"recompute_{share:g}": [], "full_prefill": []}
    for i in range(REPEATS):
        for name, s in (("shift_only", 0.0), (f"recompute_{share:g}", share), ("full_prefill", None)):
            _run(engine, old, f"m{i}{name}", 0)
            out[name].append(ask(f"m{i}{name}", s))
    return {"tokens": len(new), "moved_by": MOVED_BY, "ttft_ms": {k: round(statistics.median(v), 1) for k, v in out.items()}}


def compare(ours: dict, peer: dict) -> dict:
    """The issue's ratios: append TTFT ours/peer (goal <= 1.5), prefill and decode ours/peer
    (goals >= 1 and >= 0.5)."""
    ratio = lambda a, b: round(a / b, 2) if a and b else None  # noqa: E731
    long_key = f"decode_tokens_per_s_at_{ours['cached_tokens']}"
    return {
        "append_1_token_ttft": ratio(ours["append_1_token_ttft_ms"], peer["append_1_token_ttft_ms"]),
        "prefill_tokens_per_s": ratio(ours["prefill_tokens_per_s"], peer["prefill_tokens_per_s"]),
        "decode_tokens_per_s_at_32": ratio(ours["decode_tokens_per_s_at_32"], peer["decode_tokens_per_s_at_32"]),
        long_key: ratio(ours[long_key], peer.get(long_key)),
    }
