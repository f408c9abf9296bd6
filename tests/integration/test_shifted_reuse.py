"""Suffix-KV correction on the real model: position is exact, full recompute equals a prefill."""

import torch

from fimgate.backend.base import FimPlan, Finished, SamplingParams
from fimgate.backend.model.llama import KVBuffer

CODE = open(__file__.replace("test_shifted_reuse.py", "test_engine.py"), encoding="utf-8").read()


def _prompts(tok):
    old = tuple(tok.encode(CODE)[:400])
    inserted = tuple(tok.encode("# an edit above the hole\n"))
    new = old[:100] + inserted + old[100:]
    return old, new, len(inserted)


def _run(engine, ids, user, share=None, hints=(), source=(), max_tokens=8, cancel=None):
    from fimgate.backend.base import ReuseHint

    plan = FimPlan(
        prompt_ids=ids,
        user_id=user,
        session_id="doc",
        sampling=SamplingParams(max_tokens=max_tokens),
        reuse_hints=tuple(ReuseHint(*h) for h in hints),
        hint_prompts=(("", tuple(source)),) if source else (),
        recompute_share=share,
    )
    return [e for e in engine.generate(plan, cancel) if isinstance(e, Finished)][0]


def test_full_recompute_gives_the_cold_completion(engine, monkeypatch):
    from dataclasses import replace

    monkeypatch.setattr(engine, "config", replace(engine.config, recompute_cap=0))  # no cap: all 299
    old, new, n = _prompts(engine.tokenizer)
    cold = _run(engine, new, "cold-ref")
    _run(engine, old, "shift-full")
    hot = _run(engine, new, "shift-full", share=1.0, hints=[(100, 100 + n, 300)], source=old)
    assert hot.usage.prefix_cached_tokens == 100
    assert hot.usage.recomputed_tokens == 299 and hot.usage.shifted_cached_tokens == 0
    assert hot.text == cold.text


def test_shift_only_reuses_with_exact_positions(engine):
    old, new, n = _prompts(engine.tokenizer)
    _run(engine, old, "shift-zero")
    hot = _run(engine, new, "shift-zero", share=0.0, hints=[(100, 100 + n, 300)], source=old)
    assert hot.usage.shifted_cached_tokens == 299 and hot.usage.recomputed_tokens == 0
    assert hot.usage.prefilled_tokens == n + 1
    # layer-0 keys depend on position only: the re-rotated ones equal a cold prefill's
    slot = next(s for s in engine._slots if s.user_id == "shift-zero")
    ref = KVBuffer.empty(engine.model.cfg, 512)
    engine.model.forward(torch.tensor(new), torch.arange(len(new)), ref)
    span = slice(100 + n, 399)
    assert (slot.kv.k[0, :, span] - ref.k[0, :, span]).abs().max().item() < 1e-4
    assert (slot.kv.k[5, :, span] - ref.k[5, :, span]).abs().max().item() > 1e-3  # upper layers: approximate


def test_a_reanchor_cut_short_by_the_next_key_keeps_what_it_computed(engine, monkeypatch):
    """A key typed while a re-anchor's prompt is prefilled cancels it between two chunks: what
    was placed and computed up to there stays cached, and the next key's request (an EFIM
    append, carrying the anchor's hints) goes on from there instead of starting over."""
    from dataclasses import replace

    from fimgate.backend.base import CancelToken
    from fimgate.backend.embedded import scheduler

    monkeypatch.setattr(scheduler, "PREFILL_CHUNK_ALONE", 64)
    monkeypatch.setattr(engine, "config", replace(engine.config, recompute_cap=0))  # all ~300 moved tokens
    old, new, n = _prompts(engine.tokenizer)
    hints = [(100, 100 + n, 300)]
    _run(engine, old, "cut-short", max_tokens=0)
    key = CancelToken()
    prefill = engine.prefill_by_layer

    def one_chunk_then_a_key(work, end):
        logits = yield from prefill(work, end)
        key.cancel()
        return logits

    monkeypatch.setattr(engine, "prefill_by_layer", one_chunk_then_a_key)
    cut = _run(engine, new, "cut-short", share=1.0, hints=hints, source=old, cancel=key)  # ~300 positions to run
    monkeypatch.setattr(engine, "prefill_by_layer", prefill)
    assert cut.usage.cancelled and cut.usage.prefix_cached_tokens == 100
    typed = new + tuple(engine.tokenizer.encode(" x"))
    nxt = _run(engine, typed, "cut-short", share=1.0, hints=hints, source=old)
    assert nxt.usage.prefix_cached_tokens > 100 + n + 32  # the cut one's placed and computed positions
    assert nxt.usage.prefilled_tokens + nxt.usage.recomputed_tokens < cut.usage.prefilled_tokens + cut.usage.recomputed_tokens


def test_a_context_chunk_from_the_file_just_left_is_reused_not_prefilled(engine):
    """Through the service serve runs: a person leaves a.py for b.py, whose context carries
    a.py's lines; those tokens come from a.py's cached prompt, re-rotated, for that person only."""
    from fimgate.efim.planner import EditorState, EfimPlanner
    from fimgate.efim.templates import TEMPLATES, ContextChunk
    from fimgate.gateway.service import CompletionService

    svc = CompletionService(engine, EfimPlanner(engine.tokenizer, TEMPLATES["smollm2"], recompute_share=0.15))
    a = "\n".join(CODE.split("\n")[:60]) + "\n"  # the person was typing at the end of a.py's line 60
    chunk = ContextChunk("a.py", "\n".join(a.split("\n")[20:60]))  # the ring's chunk: the lines around it
    b = "import a\n\n\ndef test_it():\n    "
    sampling = SamplingParams(max_tokens=1)
    svc.complete(EditorState("u-ctx", "a.py", a, len(a), path="a.py"), sampling)
    moved = svc.complete(EditorState("u-ctx", "b.py", b, len(b), path="b.py", context=(chunk,)), sampling).usage
    stranger = svc.complete(EditorState("v-ctx", "b.py", b, len(b), path="b.py", context=(chunk,)), sampling).usage
    chunk_tokens = len(engine.tokenizer.encode(chunk.text))
    assert stranger.shifted_cached_tokens == 0 and stranger.prefilled_tokens == stranger.prompt_tokens
    assert moved.shifted_cached_tokens + moved.recomputed_tokens >= 0.8 * chunk_tokens  # placed (some recomputed)
    assert moved.prefilled_tokens <= stranger.prefilled_tokens - 0.8 * chunk_tokens
