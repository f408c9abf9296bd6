"""Type-through's memory: what it keeps per session is bounded in bytes (digests of the document,
not the document), and it still answers exactly when the person types the suggestion's beginning."""

from fimgate.backend.base import FimPlan, Finished, SamplingParams, TextDelta, UsageReport
from fimgate.efim.planner import EditorState
from fimgate.gateway import type_through
from fimgate.gateway.service import CompletionService
from fimgate.gateway.type_through import TypeThrough

GREEDY = SamplingParams(max_tokens=16, temperature=0.0)


def _state(doc: str, before: str, after: str) -> EditorState:
    return EditorState("u", doc, before + after, len(before))


def test_a_typed_beginning_gets_the_rest_and_anything_else_does_not():
    tt = TypeThrough()
    before, after = "x = ", "\nprint(x)\n"
    tt.remember(("u", "d"), _state("d", before, after), GREEDY, "compute(1)")
    got = tt.answer(("u", "d"), _state("d", before + "comp", after), GREEDY)
    assert [e.text for e in got if isinstance(e, Finished)] == ["ute(1)"]
    assert tt.answer(("u", "d"), _state("d", before + "comp", after + "#"), GREEDY) is None  # after the cursor changed
    assert tt.answer(("u", "d"), _state("d", "y = comp", after), GREEDY) is None  # before it changed
    assert tt.answer(("u", "d"), _state("d", before + "cx", after), GREEDY) is None  # typed something else


def test_sessions_with_huge_documents_hold_digests_and_a_bounded_total(monkeypatch):
    """25 requests with a 3.5M-character prompt and suffix, a new document each: each raised RSS by
    ~11 MB (the whole text before and after the cursor was kept)."""
    monkeypatch.setattr(type_through, "MAX_CHARS", 50_000)
    tt = TypeThrough()
    huge = "a" * 3_500_000
    for i in range(25):
        tt.remember(("u", f"d{i}"), _state(f"d{i}", huge, huge), GREEDY, "z" * 3000)
    assert tt.held_chars <= 50_000 and tt.held_chars == sum(len(m.text) for m in tt._made.values())
    assert all(isinstance(m.before, bytes) and len(m.before) == 16 for m in tt._made.values())
    assert tt.answer(("u", "d24"), _state("d24", huge + "zz", huge), GREEDY) is not None


class _OneAnswer:
    """A backend that answers every plan with the same line and counts the model calls."""

    model_name = "stand-in"
    context_tokens = 2048

    def __init__(self, text: str) -> None:
        self.text, self.calls = text, 0

    def generate(self, plan, cancel=None):
        self.calls += 1
        yield TextDelta(self.text)
        yield Finished(self.text, UsageReport(prompt_tokens=len(plan.prompt_ids), finish_reason="stop"))


class _Planner:
    def plan(self, state, sampling):
        return FimPlan(prompt_ids=(1, 2, 3), user_id=state.user_id, session_id=state.document_id, sampling=sampling)


def test_the_service_answers_a_typed_beginning_where_the_place_changed_its_stop():
    """The first request sits on an empty last line (one line: decoding stops at a newline); after
    typing `y = ` the cursor ends a line of code, where the next line may come (no newline
    stop). The person asked the same thing: the rest comes without a model call (it did not: the
    sampling with the place's stop was compared, 6 of 40 HumanEval holes declined)."""
    backend = _OneAnswer("y = x + 1")
    svc = CompletionService(backend, _Planner())
    before = "x = 1\n"
    first = EditorState("u", "d.py", before, len(before), path="d.py")
    assert svc.complete(first, GREEDY).text == "y = x + 1"
    typed = EditorState("u", "d.py", before + "y = ", len(before) + 4, path="d.py")
    again = svc.complete(typed, GREEDY)
    assert again.usage.type_through and again.text == "x + 1" and backend.calls == 1
