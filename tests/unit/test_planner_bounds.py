"""The planner's work is bounded by its budgets, never by what a client sends (issue: one
request must not stall the server). Each case here took seconds to minutes before."""

import difflib
import time

import pytest

from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.templates import TEMPLATES, ContextChunk
from fimgate.efim.window import WindowConfig

BOUND_S = 5.0  # what one plan may take here, at most; difflib took 96 s on the first case


@pytest.fixture
def planner(smol_tok):
    return EfimPlanner(smol_tok, TEMPLATES["smollm2"], WindowConfig())


def _timed_plan(planner, state):
    t0 = time.perf_counter()
    plan = planner.plan(state)
    return plan, time.perf_counter() - t0


def test_a_reanchor_between_long_repetitive_contexts_is_fast_and_its_hints_exact(planner):
    doc = "def f(x):\n    return x\n"
    for digit in "23":
        chunk = ContextChunk("a.py", f"q = {digit}\n" * 1500)
        plan, took = _timed_plan(planner, EditorState("u", "d", doc, len(doc) - 1, "b.py", (chunk,)))
    assert took < BOUND_S
    old = planner._sessions[("u", "d")].last_prompt  # this plan's prompt; hints refer to the previous one
    assert plan.reuse_hints, "the file's own text reappears after the changed context: it must be hinted"
    ends = [h.new_start + h.num_tokens for h in plan.reuse_hints]
    assert all(a <= b.new_start for a, b in zip(ends, plan.reuse_hints[1:]))  # no overlap in the new prompt
    assert old == plan.prompt_ids


def test_hints_are_runs_that_really_match_and_cover_text_moved_by_an_edit_above(planner, smol_tok):
    doc = "".join(f"def f{i}(x):\n    return x * {i}\n\n" for i in range(40))
    cursor = doc.index("return x * 30") + 7
    first = planner.plan(EditorState("u", "d", doc, cursor))
    edited = "import os\n" + doc
    second = planner.plan(EditorState("u", "d", edited, cursor + len("import os\n")))
    old, new = first.prompt_ids, second.prompt_ids
    for h in second.reuse_hints:
        assert old[h.old_start : h.old_start + h.num_tokens] == new[h.new_start : h.new_start + h.num_tokens]
    lcp = next(i for i, (a, b) in enumerate(zip(old, new)) if a != b)
    matcher = difflib.SequenceMatcher(None, old[lcp:], new[lcp:], autojunk=False)  # quadratic: the reference
    reference = sum(m.size for m in matcher.get_matching_blocks() if m.size >= 8)
    covered = sum(h.num_tokens for h in second.reuse_hints)
    assert covered >= reference > 0


def test_a_megabyte_context_chunk_is_left_out_without_tokenizing_it(planner):
    doc = "x = 1\n"
    chunk = ContextChunk("big.py", "y = 2\n" * 1_000_000)
    plan, took = _timed_plan(planner, EditorState("u", "d", doc, len(doc), "a.py", (chunk,)))
    assert took < BOUND_S
    assert len(plan.prompt_ids) < 200


def test_many_small_chunks_are_kept_within_the_context_budget(smol_tok):
    planner = EfimPlanner(smol_tok, TEMPLATES["smollm2"], WindowConfig(context_chars=1000))
    chunks = tuple(ContextChunk(f"c{i}.py", f"v{i} = {i}\n" * 20) for i in range(50))
    plan = planner.plan(EditorState("u", "d", "x = ", 4, "a.py", chunks))
    text = smol_tok.decode(list(plan.prompt_ids))
    assert "c49.py" in text and "c48.py" in text  # the newest chunks are kept
    assert "c0.py" not in text
    assert len(plan.prompt_ids) < 1000


@pytest.mark.parametrize("shape", ["one-line", "paste-at-cursor"])
def test_a_four_megabyte_document_plans_within_the_window(planner, shape):
    if shape == "one-line":
        doc = "a" * 4_000_000
        state = EditorState("u", "d", doc, 2_000_000)
    else:
        planner.plan(EditorState("u", "d", "def f():\n    return ", 20))
        doc = "def f():\n    return " + "z = 1; " * 600_000
        state = EditorState("u", "d", doc, len(doc))
    plan, took = _timed_plan(planner, state)
    assert took < BOUND_S
    assert len(plan.prompt_ids) <= 2 * (WindowConfig().prefix_tokens + WindowConfig().suffix_tokens)


def test_a_line_longer_than_was_measured_is_cut_even_when_its_measured_part_fits():
    """Qwen2.5 spells "x" * 8192 in exactly 1,024 tokens: the cursor line's last 8,192 characters
    (all that is measured) fit the 1,024-token budget, but the line goes on for a megabyte before
    them. The window kept all of it (a 125,003-token prompt, refused by the engine)."""
    from fimgate.efim.window import cut_window

    class EightCharTokens:
        def encode(self, text: str) -> list[int]:
            return [0] * -(-len(text) // 8)

    cfg = WindowConfig()
    text = "x" * 1_000_000
    w = cut_window(text, len(text), EightCharTokens(), cfg)
    assert len(EightCharTokens().encode(text[w.prefix_start : w.cursor])) <= cfg.prefix_tokens


def test_sessions_are_bounded_in_bytes_not_only_in_count(smol_tok):
    """4,096 sessions of large windows and context each held megabytes of prompts and text."""
    from fimgate.efim.planner import session_bytes

    planner = EfimPlanner(smol_tok, TEMPLATES["smollm2"], WindowConfig(), max_bytes=2_000_000)
    body = "".join(f"def handler_{i}(request):\n    return request.reply({i})\n" for i in range(300))
    for i in range(40):
        planner.plan(EditorState("u", f"doc{i}", body, len(body) // 2, context=(ContextChunk("a.py", body[:8000]),)))
    assert planner.held_bytes <= 2_000_000
    assert planner.held_bytes == sum(session_bytes(s) for s in planner._sessions.values())
    assert ("u", "doc39") in planner._sessions and ("u", "doc0") not in planner._sessions
