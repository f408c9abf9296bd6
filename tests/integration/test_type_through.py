"""Server-side type-through: typing the first half of a suggestion and asking again gets its rest
without a model call; measured against the model's own greedy text at that place, which is the
same unless the typed characters' new tokenization sends greedy decoding down another branch.
Real model, HumanEval single-line infilling (FIMGATE_TYPE_THROUGH_ALL=1: every problem; else a
spread 40)."""

import os
from dataclasses import replace

import pytest

from fimgate.backend.base import SamplingParams
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.templates import TEMPLATES
from fimgate.gateway.service import CompletionService
from tests.conftest import humaneval_or_skip

N = None if os.environ.get("FIMGATE_TYPE_THROUGH_ALL") == "1" else 40


@pytest.fixture(scope="module")
def problems():
    return humaneval_or_skip("single-line", N)


def test_type_through_gives_what_the_model_gives(served_engine, problems):
    engine = served_engine  # the precision `fimgate serve` runs
    planner_args = (engine.tokenizer, TEMPLATES["smollm2"])
    fast = CompletionService(engine, EfimPlanner(*planner_args), type_through=True)
    plain = CompletionService(engine, EfimPlanner(*planner_args), type_through=False)
    sampling = SamplingParams(max_tokens=48)
    served = same = declined = 0
    differ = []
    for i, p in enumerate(problems):
        text, cursor = p.prompt + p.suffix, len(p.prompt)
        first = EditorState(user_id=f"f{i}", document_id=p.task_id, text=text, cursor=cursor, path="x.py")
        made = fast.complete(first, sampling).text
        if len(made) < 2:
            continue
        k = len(made) // 2  # the person typed the first half of it
        typed = replace(first, text=text[:cursor] + made[:k] + text[cursor:], cursor=cursor + k)
        quick = fast.complete(typed, sampling)
        if not quick.usage.type_through:  # declined: the place asks for another shape (a line, not a block)
            declined += 1
            continue
        assert quick.usage.prompt_tokens == 0 and quick.usage.completion_tokens == 0
        plain.complete(replace(first, user_id=f"p{i}"), sampling)  # the same session history, no type-through
        model = plain.complete(replace(typed, user_id=f"p{i}"), sampling)
        assert not model.usage.type_through
        served += 1
        same += quick.text == model.text
        if quick.text != model.text:
            differ.append((p.task_id, made[:k], quick.text, model.text))
    print(f"\ntype-through: {same}/{served} identical to the model's greedy text there ({declined} declined); {differ[:5]}")
    assert served >= len(problems) // 2
    assert same >= 0.9 * served, differ[:5]  # measured: `git show 6852a95:docs/benchmarks.md`, "Type-through"


def test_type_through_needs_the_same_place_and_greedy(engine):
    svc = CompletionService(engine, EfimPlanner(engine.tokenizer, TEMPLATES["smollm2"]))
    text = "def add(a, b):\n    return \n\nprint(add(1, 2))\n"
    cursor = text.index("return ") + len("return ")
    state = EditorState(user_id="t", document_id="add.py", text=text, cursor=cursor, path="add.py")
    made = svc.complete(state, SamplingParams(max_tokens=16)).text
    assert len(made) >= 2
    typed = replace(state, text=text[:cursor] + made[0] + text[cursor:], cursor=cursor + 1)
    assert svc.complete(typed, SamplingParams(max_tokens=16)).usage.type_through
    other = replace(typed, text=typed.text.replace("print(add(1, 2))", "print(add(3, 4))"))
    assert not svc.complete(other, SamplingParams(max_tokens=16)).usage.type_through  # the text after the cursor changed
    svc.complete(state, SamplingParams(max_tokens=16, temperature=0.7, seed=1))
    assert not svc.complete(typed, SamplingParams(max_tokens=16, temperature=0.7, seed=1)).usage.type_through
