"""The shared decoding loop (fimgate/backend/embedded/decode_loop.py) on a scripted vocabulary: healing is
re-spelled and not repeated, stops end it, cancel ends it between tokens."""

import torch

from fimgate.backend.base import CancelToken, FimPlan, HealingConstraint, SamplingParams
from fimgate.backend.embedded.constraint import TextPrefixIndex
from fimgate.backend.embedded.decode_loop import decode, first_pick, stepped

VOCAB = [b"<eos>", b"ret", b"urn", b"return", b" x", b"\n", b" y", b"r"]
EOS = 0


def _run(script: list[int], cancel_after: int | None = None, **plan_kw):
    """Greedy decoding where the model 'prefers' the script's tokens in order."""
    plan = FimPlan(prompt_ids=(1,), user_id="u", session_id="s", **plan_kw)
    cancel = CancelToken()
    calls = []
    hints = []

    def logits_for(i: int) -> torch.Tensor:
        x = torch.zeros(len(VOCAB))
        x[script[min(i, len(script) - 1)]] = 10.0
        x[3] = 5.0  # "return": second choice everywhere
        return x

    def step(tok: int, argmax_only: bool, only_ids) -> torch.Tensor:
        calls.append(tok)
        hints.append((argmax_only, only_ids))
        if cancel_after is not None and len(calls) >= cancel_after:
            cancel.cancel()
        return logits_for(len(calls))

    heal = plan.healing.text.encode()
    gen = stepped(
        decode(plan, logits_for(0), VOCAB, TextPrefixIndex(VOCAB, {EOS}), EOS, plan.sampling.max_tokens + len(heal), cancel), step
    )
    deltas = []
    try:
        while True:
            deltas.append(next(gen).text)
    except StopIteration as done:
        _run.hints = hints
        return done.value, deltas, calls


def test_healing_text_is_respelled_but_not_repeated():
    # the prompt backed off "ret"; the model would say " x", but must start with "ret": it picks "return"
    out, deltas, _ = _run([4, 4, 5], healing=HealingConstraint("ret"), sampling=SamplingParams(max_tokens=4, stop=("\n",)))
    assert out.text == "urn x" and "".join(deltas) == out.text
    assert out.finish == "stop" and out.num_out == 2  # "return" (its "urn" is output), " x"; then "\n" stops


def test_eos_stops_and_is_not_output():
    out, _, _ = _run([4, 0], sampling=SamplingParams(max_tokens=8))
    assert (out.text, out.finish, out.num_out) == (" x", "stop", 1)


def test_max_tokens_and_cancel():
    out, _, calls = _run([4, 6, 4, 6], sampling=SamplingParams(max_tokens=3))
    assert (out.text, out.finish, len(calls)) == (" x y x", "length", 2)  # no step after the last token
    out, deltas, _ = _run([4, 6, 4, 6], cancel_after=1, sampling=SamplingParams(max_tokens=8))
    assert out.finish == "cancelled" and out.text == " x" and all(isinstance(d, str) for d in deltas)


def test_steps_say_what_the_next_pick_reads():
    # "ret" backs off a token: the first pick is among the tokens that spell it on ("ret",
    # "return") or begin it ("r"); only those entries of the prompt's logits are read
    index = TextPrefixIndex(VOCAB, {EOS})
    argmax_only, only_ids = first_pick(
        FimPlan(prompt_ids=(1,), user_id="u", session_id="s", healing=HealingConstraint("ret")), index
    )
    assert (argmax_only, sorted(only_ids)) == (True, [1, 3, 7])
    assert first_pick(FimPlan(prompt_ids=(1,), user_id="u", session_id="s"), index) == (True, None)
    # "return" healed as "ret" + "urn": the step after "ret" is restricted to "urn", the ones after are free
    out, _, _ = _run([1, 2, 4, 5], healing=HealingConstraint("return"), sampling=SamplingParams(max_tokens=4, stop=("\n",)))
    assert out.text == " x"
    assert _run.hints[0] == (True, [2]) and all(h == (True, None) for h in _run.hints[1:])
    # sampling reads every (allowed) entry: never argmax_only
    _run([4, 4, 5], sampling=SamplingParams(max_tokens=3, temperature=0.7, seed=1))
    assert _run.hints and all(h == (False, None) for h in _run.hints)


def test_a_time_budget_ends_after_a_complete_line_never_before():
    """llama.cpp's t_max_predict_ms: past the budget, decoding stops once a newline was generated."""
    script = [4, 6, 5, 4, 6, 5, 4, 6]  # " x y\n x y\n x y"
    out, _, _ = _run(script, sampling=SamplingParams(max_tokens=8, max_predict_ms=1e-6))
    assert out.text == " x y\n" and out.finish == "length"  # time was up at once; it ran to the line's end
    out, _, _ = _run(script, sampling=SamplingParams(max_tokens=8, max_predict_ms=60_000))
    assert out.text == " x y\n x y\n x y"  # a budget not reached changes nothing


def test_min_token_prob_ends_the_suggestion_before_the_first_token_the_model_is_unsure_of():
    """' x' sure, ' y' sure, then '\\n' at 40% (the rest spread over the others): with 0.5 the
    suggestion is what the model was sure of; without, all of it. A first token below it is kept."""

    def confident(tok: int, p: float) -> torch.Tensor:
        x = torch.full((len(VOCAB),), float(torch.log(torch.tensor((1 - p) / (len(VOCAB) - 1)))))
        x[tok] = float(torch.log(torch.tensor(p)))
        return x  # softmax: p on tok

    seq = [confident(4, 0.9), confident(6, 0.95), confident(5, 0.4), confident(4, 0.9)]

    def run(min_prob, first_p=0.9):
        seq[0] = confident(4, first_p)
        plan = FimPlan((1,), "u", "s", sampling=SamplingParams(max_tokens=4, min_token_prob=min_prob))
        calls = iter(seq[1:])
        gen = stepped(decode(plan, seq[0], VOCAB, TextPrefixIndex(VOCAB, {EOS}), EOS, 4, CancelToken()), lambda *a: next(calls))
        try:
            while True:
                next(gen)
        except StopIteration as done:
            return done.value

    sure = run(0.5)
    assert (sure.text, sure.finish, sure.num_out) == (" x y", "stop", 2)
    assert run(None).text == " x y\n x"
    assert run(0.5, first_p=0.3).text == " x y"  # the first token stays, however unsure
