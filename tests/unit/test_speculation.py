"""Speculative decoding in the shared loop (fimgate/backend/embedded/decode_loop.py) with prompt-lookup
drafts (fimgate/backend/embedded/drafts.py), on a scripted model: drafts change how many forwards
run, never what is decoded; the rows after a rejected draft are discarded, so the sequence's K/V
are what plain decoding leaves."""

import contextlib

import torch

from fimgate.backend.base import CancelToken, FimPlan, HealingConstraint, SamplingParams
from fimgate.backend.embedded.constraint import TextPrefixIndex
from fimgate.backend.embedded.decode_loop import NextToken, decode
from fimgate.backend.embedded.drafts import PromptLookup

VOCAB = [b"<eos>", b"a", b"b", b"c", b"d", b"\n", b"e", b"ab"]
EOS = 0


def _model(script: list[int]):
    """Logits that pick script[i] after the i-th token of output (position-keyed: a row's logits
    depend only on how many tokens precede it, as a real model's depend on its prefix)."""

    def logits(i: int) -> torch.Tensor:
        x = torch.zeros(len(VOCAB))
        x[script[min(i, len(script) - 1)]] = 10.0
        return x

    return logits


def _run(script, prompt, previous=(), max_draft=4, max_tokens=16, drafts_run=None, **plan_kw):
    """Decode `script` as an engine would: a NextToken's draft rows run (or the first
    `drafts_run` of them) and the sequence is kept as the engine keeps slot.tokens."""
    plan = FimPlan(
        prompt_ids=tuple(prompt), user_id="u", session_id="s", sampling=SamplingParams(max_tokens=max_tokens), **plan_kw
    )
    logits = _model(script)
    drafter = PromptLookup(prompt, previous, max_draft) if max_draft else None
    heal = plan.healing.text.encode()
    events = decode(plan, logits(0), VOCAB, TextPrefixIndex(VOCAB, {EOS}), EOS, max_tokens + len(heal), CancelToken(), drafter)
    fed: list[int] = []  # tokens whose rows ran and are kept: the engine's slot.tokens past the prompt
    forwards, text, reply = 0, "", None
    while True:
        try:
            ev = events.send(reply)
        except StopIteration as done:
            out = done.value
            break
        reply = None
        if isinstance(ev, NextToken):
            del fed[len(fed) - ev.discard :]
            draft = ev.draft[:drafts_run] if drafts_run is not None else ev.draft
            rows = [ev.token, *draft]
            reply = [logits(len(fed) + 1 + j) for j in range(len(rows))] if ev.draft else logits(len(fed) + 1)
            fed += rows
            forwards += 1
        else:
            text += ev.text
    del fed[len(fed) - out.discard :]
    return out, text, fed, forwards


SCRIPT = [1, 2, 3, 4, 1, 2, 3, 4, 5, 0]  # "abcdabcd\n" then end


def test_drafts_decode_the_same_text_in_fewer_forwards():
    plain, plain_text, plain_fed, plain_fwd = _run(SCRIPT, [6, 6], max_draft=0)
    spec, spec_text, spec_fed, spec_fwd = _run(SCRIPT, [6, 6], previous=(1, 2, 3, 4, 1, 2, 3, 4, 5))
    assert spec_text == plain_text == "abcdabcd\n" and spec.text == plain.text
    assert spec_fed == plain_fed  # the K/V left behind are the sequence plain decoding leaves
    assert (plain.num_out, plain.finish) == (spec.num_out, spec.finish)
    assert spec_fwd < plain_fwd and spec.accepted > 0 and spec.drafted >= spec.accepted


def test_a_wrong_draft_costs_no_token_and_its_rows_are_discarded():
    # the previous suggestion says "abce...", the model says "abcd...": the draft's "e" is refused
    spec, text, fed, _ = _run(SCRIPT, [6], previous=(1, 2, 3, 6, 6, 6))
    plain, plain_text, plain_fed, _ = _run(SCRIPT, [6], max_draft=0)
    assert text == plain_text and fed == plain_fed
    assert spec.drafted > spec.accepted and spec.refused >= 1  # (what the draft policy learns from)


def test_fewer_draft_rows_run_than_asked_and_limits_hold():
    spec, text, fed, _ = _run(SCRIPT, [6], previous=tuple(SCRIPT[:-1]), drafts_run=1)
    plain, plain_text, plain_fed, _ = _run(SCRIPT, [6], max_draft=0)
    assert text == plain_text and fed == plain_fed
    # max_tokens cuts inside an accepted draft: the same tokens, no row beyond them kept
    spec, text, fed, _ = _run(SCRIPT, [6], previous=tuple(SCRIPT[:-1]), max_tokens=3)
    plain, plain_text, plain_fed, _ = _run(SCRIPT, [6], max_draft=0, max_tokens=3)
    assert (text, fed, spec.num_out) == (plain_text, plain_fed, plain.num_out) == ("abc", plain_fed, 3)


def test_no_drafts_while_healing_or_sampling():
    # the constraint "ab" is re-spelled by "a" then "b" (or "ab"): those picks are restricted, no drafts
    spec, text, fed, _ = _run(SCRIPT, [6], previous=tuple(SCRIPT[:-1]), healing=HealingConstraint("ab"))
    plain, plain_text, plain_fed, _ = _run(SCRIPT, [6], max_draft=0, healing=HealingConstraint("ab"))
    assert text == plain_text and fed == plain_fed
    plan_kw = {"sampling": SamplingParams(max_tokens=8, temperature=0.7, seed=3)}
    plan = FimPlan(prompt_ids=(6,), user_id="u", session_id="s", **plan_kw)
    events = decode(
        plan, _model(SCRIPT)(0), VOCAB, TextPrefixIndex(VOCAB, {EOS}), EOS, 8, CancelToken(), PromptLookup([6], tuple(SCRIPT))
    )
    first = next(e for e in events if isinstance(e, NextToken))
    assert first.draft == ()


def test_the_step_that_gives_the_first_new_text_after_healing_runs_without_drafts():
    """The re-spelled constraint shows nothing; the next pick is the first text an editor shows,
    so its step runs one row; drafts come back after it."""
    plan = FimPlan(
        prompt_ids=(6,), user_id="u", session_id="s", sampling=SamplingParams(max_tokens=8), healing=HealingConstraint("a")
    )
    logits = _model(SCRIPT)
    events = decode(
        plan, logits(0), VOCAB, TextPrefixIndex(VOCAB, {EOS}), EOS, 9, CancelToken(), PromptLookup([6], tuple(SCRIPT))
    )
    steps, texts, reply, fed = [], [], None, 0
    while len(steps) < 3:
        ev = events.send(reply)
        if isinstance(ev, NextToken):
            steps.append((ev.token, ev.draft, "".join(texts)))
            fed += 1 + len(ev.draft)
            reply = [logits(fed - len(ev.draft) + j) for j in range(1 + len(ev.draft))] if ev.draft else logits(fed)
        else:
            texts.append(ev.text)
            reply = None
    (heal, heal_draft, shown_before), (first, first_draft, shown_after), _ = steps
    assert (VOCAB[heal], heal_draft, shown_before) == (b"a", (), "")  # the healing re-spelled: nothing new shown yet
    assert (VOCAB[first], first_draft[:1], shown_after) == (b"b", (3,), "b")  # after the first new text: drafts again


def test_prompt_lookup_proposes_what_followed_the_latest_tokens():
    look = PromptLookup([9, 1, 2, 3, 4, 5, 9, 9], previous=(), max_draft=3)
    assert look.propose([1, 2, 3]) == [4, 5, 9]  # 3 tokens matched in the prompt
    assert look.propose([7, 2]) == []  # runs shorter than MIN_NGRAM_PROMPT do not count in the prompt
    prev = PromptLookup([9], previous=(5, 6, 7, 8), max_draft=2)
    assert prev.propose([6]) == [7, 8]  # the last suggestion: one token is enough
    assert prev.propose([8]) == []  # nothing follows it
    assert prev.propose([6], limit=1) == [7]
    # a match must be whole tokens: ids whose bytes straddle two tokens are not a match
    # (256, 0) packs as 00 01 00 00 00 00 00 00: token 1's bytes 01 00 00 00 sit inside it, one byte in
    assert PromptLookup([5], previous=(256, 0, 7), max_draft=2).propose([1]) == []
    assert PromptLookup([5], previous=(256, 0, 1, 7), max_draft=2).propose([1]) == [7]


class _Rows:
    """A Compute that records the rows each step ran and answers each row with its own logits."""

    num_layers = 1

    def __init__(self):
        self.steps: list[list[int]] = []

    def run_steps(self, works):
        self.steps.append([1 + len(w.draft or ()) for w in works])
        return [[torch.zeros(1)] * (1 + len(w.draft)) if w.draft is not None else torch.zeros(1) for w in works]

    def prefill_by_layer(self, work, end):
        yield
        return torch.zeros(1)

    def free_slots(self):
        return 4

    def stoppable_steps(self):
        return contextlib.nullcontext(None)


def test_draft_rows_run_only_in_a_step_of_one_request():
    import threading
    import time

    from fimgate.backend.embedded.scheduler import BatchScheduler, StepWork

    def request(steps: int, draft: tuple[int, ...]):
        for _ in range(steps):
            reply = yield StepWork(1, 0, None, True, None, draft)
            assert isinstance(reply, list)  # asked with a draft: a list, whatever ran
        return

    class Idle:  # a runner that runs nothing: this test iterates the loop itself, both requests queued
        stopped = False

        def submit(self, fn, priority=0.0):
            pass

    compute = _Rows()
    sched = BatchScheduler(compute, threading.Lock())
    sched.drive_on(Idle())
    gens = [sched.run(request(1, (7, 8)), CancelToken(), 1.0), sched.run(request(3, (7, 8, 9)), CancelToken(), 2.0)]
    threads = [threading.Thread(target=lambda g=g: list(g)) for g in gens]
    for t in threads:
        t.start()
    while sched.state()["waiting"] < 2:
        time.sleep(0.001)
    while sched.has_work():
        sched.iterate()
    for t in threads:
        t.join(10)
    assert compute.steps[0] == [1, 1]  # together: no draft rows, each still answered as a list
    assert compute.steps[1:] == [[4], [4]]  # alone again: its 3 draft rows ran
