"""Speculative decoding on the real model, through the service `fimgate serve` runs: greedy
suggestions with drafts are the plain greedy ones token for token, for a first request (drafts
from the prompt) and for the next one after the person typed half of it (drafts from the last
suggestion too). HumanEval single-line infilling: FIMGATE_SPECULATION_ALL=1, every problem; else
a spread 30. Twice: at fp32 (the exact engine the other tests share; the first 10 of them, each
costs ~2x there) and at the precision `fimgate serve` runs by default (`--prefill-dtype auto
--step-dtype auto`: bf16 copies on a CPU with bf16 products), where draft rows go through the
same bf16 step as plain decoding."""

import os
from dataclasses import replace

import pytest

from fimgate.backend.base import SamplingParams
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.templates import TEMPLATES
from fimgate.gateway.service import CompletionService
from tests.conftest import humaneval_or_skip

N = None if os.environ.get("FIMGATE_SPECULATION_ALL") == "1" else 30


@pytest.fixture(scope="module")
def problems():
    return humaneval_or_skip("single-line", N)


def _ask(engine, svc, state, speculate: int):
    engine.speculate = speculate
    r = svc.complete(state, SamplingParams(max_tokens=48))
    return r, engine._last_outputs[(state.user_id, state.document_id)]


@pytest.mark.parametrize("which", ["engine", "served_engine"])
def test_speculation_changes_no_greedy_suggestion(which, problems, request):
    engine = request.getfixturevalue(which)
    if which == "engine" and N is not None:
        problems = problems[:10]
    svc = CompletionService(engine, EfimPlanner(engine.tokenizer, TEMPLATES["smollm2"]), type_through=False)
    was = engine.speculate
    compared = drafted = accepted = 0
    differ = []
    # every step drafts what it can, whether or not drafts have paid here lately (draft_policy.py)
    engine.draft_policy.length = lambda max_draft, threads: max_draft
    try:
        for i, p in enumerate(problems):
            text, cursor = p.prompt + p.suffix, len(p.prompt)
            first = EditorState(user_id=f"plain{i}", document_id=p.task_id, text=text, cursor=cursor, path="x.py")
            plain, plain_ids = _ask(engine, svc, first, 0)
            spec, spec_ids = _ask(engine, svc, replace(first, user_id=f"spec{i}"), 4)
            pairs = [(plain, plain_ids, spec, spec_ids)]
            k = len(plain.text) // 2
            if k:  # the person typed half of it: the next request's drafts read the last suggestion
                typed = replace(first, text=text[:cursor] + plain.text[:k] + text[cursor:], cursor=cursor + k)
                pairs.append((*_ask(engine, svc, typed, 0), *_ask(engine, svc, replace(typed, user_id=f"spec{i}"), 4)))
            for a, a_ids, b, b_ids in pairs:
                compared += 1
                drafted += b.usage.draft_tokens
                accepted += b.usage.accepted_draft_tokens
                n = min(len(a_ids), len(b_ids))  # tokens decoded past what is shown may differ in number (early stop)
                if a.text != b.text or a_ids[:n] != b_ids[:n]:
                    differ.append((p.task_id, a.text, b.text))
    finally:
        engine.speculate = was
        del engine.draft_policy.length
    same = compared - len(differ)
    print(f"\n{which} ({engine.step_dtype} steps): {same}/{compared} identical; drafted {drafted}, accepted {accepted}")
    assert not differ, differ[:5]
    assert accepted > 0 and drafted >= accepted  # usage says what the drafts did
