"""The embedded engine on the real bundled model (SmolLM2-135M)."""

import threading

import torch

from fimgate.backend.base import CancelToken, FimPlan, Finished, HealingConstraint, SamplingParams, TextDelta
from fimgate.backend.embedded.engine import AT_ONCE_TOKENS
from fimgate.backend.model.llama import KVBuffer
from fimgate.kernels.rope import cos_sin, rerotate

CODE = "def fibonacci(n):\n    if n < 2:\n        return n\n    return"


def _run(engine, ids, user="u", cancel=None, **kw):
    plan = FimPlan(prompt_ids=tuple(ids), user_id=user, session_id="s", sampling=SamplingParams(**kw))
    events = list(engine.generate(plan, cancel))
    return events[-1], events


def test_prefix_hit_gives_the_same_logits_as_a_full_prefill(engine):
    model, tok = engine.model, engine.tokenizer
    ids = tok.encode(open(__file__, encoding="utf-8").read())[:300]
    full = KVBuffer.empty(model.cfg, 512)
    want = model.forward(torch.tensor(ids), torch.arange(len(ids)), full)
    hit = KVBuffer.empty(model.cfg, 512)
    model.forward(torch.tensor(ids[:250]), torch.arange(250), hit)
    got = model.forward(torch.tensor(ids[250:]), torch.arange(250, len(ids)), hit)
    diff = (want - got).abs().max().item()
    assert diff < 1e-3, diff  # fp32 noise; measured ~1e-5 with logits of magnitude ~30


def test_rerotating_layer0_keys_equals_computing_them_at_the_new_position(engine):
    model = engine.model
    cfg = model.cfg
    ids = torch.tensor(engine.tokenizer.encode(CODE))
    w = model.layers[0]
    h = model._norm(model.embed[ids], w["attn_norm"])
    k = torch.nn.functional.linear(h, w["k"]).view(len(ids), cfg.num_kv_heads, cfg.head_dim).transpose(0, 1)
    from fimgate.kernels.rope import apply_rope

    pos = torch.arange(len(ids)) + 7
    delta = torch.full((len(ids),), 1234)
    at_p = apply_rope(k, *cos_sin(pos, model.inv_freq), cfg.rope)
    at_pd = apply_rope(k, *cos_sin(pos + delta, model.inv_freq), cfg.rope)
    diff = (rerotate(at_p, delta, model.inv_freq, cfg.rope) - at_pd).abs().max().item()
    assert diff < 1e-4, diff


def test_second_request_hits_the_cache_and_gives_the_same_text(engine):
    """The same prompt again: its slot kept the state after its last token (slot.py), so nothing
    is computed, not even that token; from the tree alone (the slot taken by another prompt), the
    last token is computed again. The text is the same every time."""
    ids = engine.tokenizer.encode(CODE)
    first, _ = _run(engine, ids, user="cache-a", max_tokens=8)
    second, _ = _run(engine, ids, user="cache-a", max_tokens=8)
    assert first.usage.prefix_cached_tokens == 0 and first.usage.prefilled_tokens == len(ids)
    assert second.usage.prefix_cached_tokens == len(ids) and second.usage.prefilled_tokens == 0
    for s in engine._slots:  # the slots forget it; the user's tree still holds its blocks
        s.clear()
    third, _ = _run(engine, ids, user="cache-a", max_tokens=8)
    assert third.usage.prefix_cached_tokens == len(ids) - 1 and third.usage.prefilled_tokens == 1
    assert first.text == second.text == third.text and first.text.strip()


def test_a_prompt_ending_inside_the_last_suggestion_runs_no_forward_for_what_it_decoded(engine):
    """A person typed the first tokens of the suggestion and asks again: the prompt ends inside what
    the last request decoded, whose states the slot kept, and the tokens it decodes again are
    read from there too. Only what comes after the last suggestion is computed; the text is what
    a fresh prompt gives."""
    tok = engine.tokenizer
    ids = tok.encode(CODE)
    first, _ = _run(engine, ids, user="inside", max_tokens=8)
    out = tok.encode(CODE + first.text)[len(ids) :]
    assert tok.encode(CODE + first.text)[: len(ids)] == ids and len(out) >= 4  # (the output re-tokenizes the same)
    steps = []
    real, speculate = engine.run_steps, engine.speculate
    engine.run_steps = lambda works: steps.append(len(works)) or real(works)
    engine.speculate = 0  # (a step a token)
    try:
        again, _ = _run(engine, ids + out[:2], user="inside", max_tokens=8)
    finally:
        del engine.run_steps
        engine.speculate = speculate
    assert again.usage.prefilled_tokens == 0
    # 8 tokens: the first decoded 8 and stepped 7 of them; 2 are the prompt's end now, the next 5
    # are read from their kept states, and the last 2 need a step each
    assert len(steps) == 2
    for s in engine._slots:
        s.clear()
    fresh, _ = _run(engine, ids + out[:2], user="inside-fresh", max_tokens=8)
    assert again.text == fresh.text and first.text.startswith(tok.decode(out[:2]) + again.text[:10])


def test_a_keys_few_new_tokens_run_in_one_call_and_give_a_fresh_prompts_text(engine):
    """A key whose prompt adds a few tokens to what its slot holds (a word and a space typed)
    runs them through the C step in one call (engine.AT_ONCE_TOKENS), not the torch layers, and
    the text is what a fresh prompt gives; a warm-up's do not (nothing pauses that call)."""
    ids = engine.tokenizer.encode(CODE)
    more = engine.tokenizer.encode(CODE + " n -")
    assert more[: len(ids)] == ids and 2 <= len(more) - len(ids) <= AT_ONCE_TOKENS
    _run(engine, ids, user="at-once", max_tokens=0)
    calls = []
    real = engine.model.forward_rows
    engine.model.forward_rows = lambda *a, **k: calls.append(len(a[0])) or real(*a, **k)
    try:
        got, _ = _run(engine, more, user="at-once", max_tokens=8)
        _run(engine, ids, user="at-once-warm", max_tokens=0)
        _run(engine, more, user="at-once-warm", max_tokens=0)
    finally:
        del engine.model.forward_rows
    assert calls == [got.usage.prefilled_tokens] and got.usage.prefilled_tokens >= 2
    fresh, _ = _run(engine, more, user="at-once-fresh", max_tokens=8)
    assert got.text == fresh.text


def test_a_long_prefill_takes_the_cores_that_free_up_while_it_runs(engine):
    """A warm-up after a cursor move starts while the editor still draws the move (a core busy:
    one thread), then the person reads and the editor idles: the prefill looks again before its
    layers and runs them on both cores. Its usage says what it started with; the text
    of the next request is the same as on one thread throughout."""
    g = engine.governor
    saved = (g.usable, g._load, g.threads, torch.get_num_threads())
    seen = []

    class EditorBusyFirst:  # what the other processes used since the last look
        def others_busy(self, min_interval_s=None):
            seen.append(torch.get_num_threads())
            return 1.0 if len(seen) == 1 else 0.0

    ids = engine.tokenizer.encode(CODE * 3)
    try:
        g.usable, g._load = 2, EditorBusyFirst()
        warm, _ = _run(engine, ids, user="refit", max_tokens=0)
        got, _ = _run(engine, ids + engine.tokenizer.encode(" n"), user="refit", max_tokens=8)
        g._load = type("Busy", (), {"others_busy": lambda self, min_interval_s=None: 1.0})()
        one, _ = _run(engine, ids + engine.tokenizer.encode(" n"), user="refit-one-thread", max_tokens=8)
    finally:
        g.usable, g._load, g.threads = saved[:3]
        torch.set_num_threads(saved[3])
    assert warm.usage.threads == 1 and warm.usage.prefilled_tokens == len(ids)
    assert seen[1] == 1 and seen[2] == 2  # the look before the first layer took the freed core
    assert len(seen) == 3  # and none after: all the cores are in use (a quiet machine never looks)
    assert one.usage.threads == 1 and got.text == one.text


def test_another_user_never_hits_my_cache(engine):
    ids = engine.tokenizer.encode(CODE + " # isolation")
    _run(engine, ids, user="iso-a", max_tokens=1)
    other, _ = _run(engine, ids, user="iso-b", max_tokens=1)
    assert other.usage.cached_tokens == 0


def test_healing_output_starts_after_the_backed_off_text(engine):
    ids = engine.tokenizer.encode(CODE)
    plan = FimPlan(
        prompt_ids=tuple(ids),
        user_id="heal",
        session_id="s",
        healing=HealingConstraint(" fib"),
        sampling=SamplingParams(max_tokens=6),
    )
    final = list(engine.generate(plan))[-1]
    assert final.text.startswith("onacci"), final.text


def test_stop_string_and_max_tokens(engine):
    ids = engine.tokenizer.encode(CODE)
    final, events = _run(engine, ids, user="stop", max_tokens=40, stop=("\n",))
    assert "\n" not in final.text and final.usage.finish_reason in ("stop", "length")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == final.text
    short, _ = _run(engine, ids, user="stop", max_tokens=2)
    assert short.usage.completion_tokens <= 2


def test_cancel_takes_effect_before_the_next_token(engine):
    ids = engine.tokenizer.encode(CODE)
    cancel = CancelToken()
    plan = FimPlan(prompt_ids=tuple(ids), user_id="cancel", session_id="s", sampling=SamplingParams(max_tokens=64))
    got = []
    for ev in engine.generate(plan, cancel):
        got.append(ev)
        if isinstance(ev, TextDelta) and not cancel.cancelled:
            cancel.cancel()
            n_at_cancel = len(got)
    final = got[-1]
    assert isinstance(final, Finished) and final.usage.cancelled
    assert len(got) == n_at_cancel + 1  # nothing but the final report after the cancel


def test_pool_budget_holds_under_many_users(engine):
    tok = engine.tokenizer
    for u in range(12):
        ids = tok.encode(f"# user {u}\n" + CODE * 8)
        _run(engine, ids, user=f"many{u}", max_tokens=1)
        assert engine.tree.num_used <= engine.tree.num_blocks


def test_concurrent_requests_are_serialized_safely(engine):
    ids = engine.tokenizer.encode(CODE)
    out = []
    threads = [
        threading.Thread(target=lambda u=u: out.append(_run(engine, ids, user=f"t{u}", max_tokens=4)[0])) for u in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({f.text for f in out}) == 1


def test_screened_head_gives_the_full_heads_greedy_completions(engine):
    """Greedy steps screen the output head in int8 (fimgate/backend/model/screened_head.py); completions must be
    the full fp32 head's, token for token."""
    from tests.conftest import frozen_texts

    texts = frozen_texts(12)[:6]
    prompts = [engine.tokenizer.encode(t)[: 120 + 37 * i] for i, t in enumerate(texts)]
    model = engine.model
    real = model.screened_head
    assert real is not None
    calls = []

    class Counting:  # each row screened: one alone, or several in a batch (draft rows)
        def __call__(self, x):
            calls.append(1)
            return real(x)

        def batch(self, xs):
            calls.extend([1] * len(xs))
            return real.batch(xs)

    model.screened_head = Counting()
    try:
        screened = [_run(engine, ids, user=f"head-s{i}", max_tokens=24)[0] for i, ids in enumerate(prompts)]
    finally:
        model.screened_head = None
    try:
        full = [_run(engine, ids, user=f"head-f{i}", max_tokens=24)[0] for i, ids in enumerate(prompts)]
    finally:
        model.screened_head = real
    assert len(calls) >= sum(r.usage.completion_tokens for r in screened)  # the screen ran on every pick
    assert [r.text for r in screened] == [r.text for r in full]
    assert all(r.text for r in full)


def test_healing_picks_read_only_the_allowed_rows_and_match_the_full_head(engine):
    """A healing constraint restricts the first picks to the tokens that spell the backed-off
    text; the head then computes only those rows (fimgate/backend/model/llama.py, only_ids). Completions must
    be the full head's, token for token."""
    from tests.conftest import frozen_texts

    tok = engine.tokenizer
    cases = []
    for i, piece in enumerate(frozen_texts(12)[:6]):
        text = piece[: 600 + 97 * i]
        cut = text.rstrip()[:-3]  # back off into the last word: healing re-spells its end
        cases.append((tok.encode(cut[:-4]), cut[-4:]))
    cases += [(ids, " ") for ids, _ in cases[:3]]  # ~32k tokens start with a space: the screened head, restricted
    model = engine.model
    partial = model._partial_head  # where every path's logits for a partial pick are made
    restricted = []

    def full_head(h, argmax_only, only_ids):
        return model._head(h, False, None)  # every row, in full

    def counting(h, argmax_only, only_ids):
        restricted.append(only_ids is not None)
        return partial(h, argmax_only, only_ids)

    def run(user):
        return [
            last(
                engine.generate(
                    FimPlan(
                        prompt_ids=tuple(ids),
                        user_id=f"{user}{i}",
                        session_id="s",
                        healing=HealingConstraint(heal),
                        sampling=SamplingParams(max_tokens=12),
                    )
                )
            )
            for i, (ids, heal) in enumerate(cases)
        ]

    last = lambda events: list(events)[-1]  # noqa: E731
    model._partial_head = counting
    try:
        got = run("only")
    finally:
        model._partial_head = full_head
    try:
        want = run("full")
    finally:
        model._partial_head = partial
    assert sum(restricted) >= len(cases)  # every plan's first pick read only its allowed rows
    assert [r.text for r in got] == [r.text for r in want]
    assert all(r.text for r in want)


def test_fused_steps_give_the_torch_layers_completions(engine):
    """One-token steps run all layers in one C call (fimgate/backend/model/fused_step.py) where it is built;
    greedy completions must be the torch layers', token for token."""
    from fimgate.kernels.llama_step import KERNEL, kernel_available
    from tests.conftest import frozen_texts

    if not kernel_available():
        import pytest

        pytest.skip("no C compiler: every step runs the torch layers")
    texts = frozen_texts(12)[6:12]
    prompts = [engine.tokenizer.encode(t)[: 150 + 41 * i] for i, t in enumerate(texts)]
    fused = engine.model.fused_step
    calls = []  # per row: did the C step run it

    class Counting:
        def __call__(self, *a):
            out = fused(*a)
            calls.append(out is not None)
            return out

        def batch(self, tokens, *a):  # a step with draft rows (speculative decoding)
            out = fused.batch(tokens, *a)
            calls.extend([out is not None] * len(tokens))
            return out

        def stoppable(self):
            return fused.stoppable()

    engine.model.fused_step = Counting()
    try:
        got = [_run(engine, ids, user=f"fused{i}", max_tokens=24)[0] for i, ids in enumerate(prompts)]
        ran_fused = sum(calls)
        KERNEL.set_enabled(False)
        want = [_run(engine, ids, user=f"torch{i}", max_tokens=24)[0] for i, ids in enumerate(prompts)]
    finally:
        KERNEL.set_enabled(True)
        engine.model.fused_step = fused
    assert ran_fused >= sum(r.usage.completion_tokens - 1 for r in got)  # every decoding step was fused
    assert sum(calls) == ran_fused  # and none with the kernel off
    assert [r.text for r in got] == [r.text for r in want]
    assert all(r.text for r in want)
