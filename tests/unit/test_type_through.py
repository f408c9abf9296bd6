"""Type-through's memory: what it keeps per session is bounded in bytes (digests of the document,
not the document), and it still answers exactly when the person types the suggestion's beginning."""

from fimgate.backend.base import Finished, SamplingParams
from fimgate.efim.planner import EditorState
from fimgate.gateway import type_through
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
