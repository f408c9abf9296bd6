"""Decoding stops once nothing more can be shown (a multi-line suggestion's block ended): the
text shown is the same as decoding on to max_tokens, with fewer tokens decoded. Real model,
HumanEval multi-line infilling problems."""

from dataclasses import replace

import pytest

from fimgate.backend.base import SamplingParams
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.templates import TEMPLATES
from fimgate.gateway.service import CompletionService, Shape
from tests.conftest import humaneval_or_skip

N = 12


@pytest.fixture(scope="module")
def problems():
    return humaneval_or_skip("multi-line", N)


def test_stopping_when_shown_changes_no_suggestion_and_decodes_less(served_engine, problems):
    engine = served_engine  # the precision `fimgate serve` runs
    planner_args = (engine.tokenizer, TEMPLATES["smollm2"])
    eager = CompletionService(engine, EfimPlanner(*planner_args), stop_when_shown=True)
    full = CompletionService(engine, EfimPlanner(*planner_args), stop_when_shown=False)
    sampling = SamplingParams(max_tokens=64)
    saved = 0
    for i, p in enumerate(problems):
        text, cursor = p.prompt + p.suffix, len(p.prompt)
        state = EditorState(user_id=f"u{i}", document_id=p.task_id, text=text, cursor=cursor, path="x.py")
        a = full.complete(state, sampling, Shape(multiline=True))
        b = eager.complete(replace(state, user_id=f"v{i}"), sampling, Shape(multiline=True))
        assert b.text == a.text, p.task_id
        assert b.usage.completion_tokens <= a.usage.completion_tokens
        saved += a.usage.completion_tokens - b.usage.completion_tokens
    assert saved > 0  # some suggestion's block ended before max_tokens
