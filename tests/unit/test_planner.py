"""The EFIM planner on edits a person makes, with the bundled model's real tokenizer."""

import pytest

from fimgate.backend.base import ReuseClass
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.templates import TEMPLATES, FimTemplate
from fimgate.efim.window import WindowConfig

DOC = "import os\n\n\ndef area(w, h):\n    return w * h\n\n\ndef main():\n    print(area(2, 3))\n"


@pytest.fixture
def planner(smol_tok):
    return EfimPlanner(smol_tok, TEMPLATES["smollm2"], WindowConfig(prefix_tokens=256, suffix_tokens=64))


def _type(planner, text, cursor, typed, user="u", doc="d"):
    """Type `typed` one character at a time at `cursor`; return the plans."""
    plans = []
    for ch in typed:
        text = text[:cursor] + ch + text[cursor:]
        cursor += 1
        plans.append(planner.plan(EditorState(user, doc, text, cursor)))
    return text, cursor, plans


def _prompt_text(tok, plan):
    return tok.decode(list(plan.prompt_ids)) + plan.healing.text


def test_typing_is_an_efim_append_whose_prompt_extends_the_last(planner, smol_tok):
    cursor = DOC.index("\n\ndef main")
    first = planner.plan(EditorState("u", "d", DOC, cursor))
    assert first.reuse_class is ReuseClass.COLD
    text, cursor, plans = _type(planner, DOC, cursor, "\n\ndef perimeter(w, h):\n    return 2 * (w")
    assert all(p.reuse_class is ReuseClass.EFIM_APPEND for p in plans)
    prev = first
    for i, p in enumerate(plans):
        if text[: cursor - len(plans) + i + 1].endswith("  "):
            # at a run of spaces the last is healed and the rest prompted (fragment.py), so a
            # space typed there re-tokenizes the run: all but the prompt's last token are a hit
            assert p.prompt_ids[: len(prev.prompt_ids) - 1] == prev.prompt_ids[:-1]
        else:
            assert p.prompt_ids[: len(prev.prompt_ids)] == prev.prompt_ids  # an exact prefix hit
        prev = p
    last = _prompt_text(smol_tok, plans[-1])
    assert last.endswith(text[:cursor][-40:])  # prompt + heal spell the text up to the cursor
    assert text[cursor:] in last  # the suffix is in front of the model


def test_prompt_equals_a_fresh_tokenization_of_the_same_text(planner, smol_tok):
    cursor = DOC.index("w * h") + 3
    _, _, plans = _type(planner, DOC, cursor, " + 1  # area plus one")
    fresh = EfimPlanner(smol_tok, TEMPLATES["smollm2"], planner.window)
    text = DOC[:cursor] + " + 1  # area plus one" + DOC[cursor:]
    cold = fresh.plan(EditorState("u", "d", text, cursor + 21))
    assert _prompt_text(smol_tok, plans[-1]) == _prompt_text(smol_tok, cold)


def test_backspace_inside_inc_stays_an_append(planner):
    cursor = DOC.index("\n\n\ndef area")
    planner.plan(EditorState("u", "d", DOC, cursor))
    text, cursor, _ = _type(planner, DOC, cursor, "\nx = 1")
    text = text[: cursor - 1] + text[cursor:]
    p = planner.plan(EditorState("u", "d", text, cursor - 1))
    assert p.reuse_class is ReuseClass.EFIM_APPEND


@pytest.mark.parametrize("edit", ["jump", "delete-above", "edit-suffix", "paste-far"])
def test_edits_outside_inc_reanchor_with_correct_text_and_hints(planner, smol_tok, edit):
    cursor = DOC.index("(2, 3)")
    planner.plan(EditorState("u", "d", DOC, cursor))
    text = DOC
    if edit == "jump":
        cursor = DOC.index("w * h")
    elif edit == "delete-above":
        text = DOC.replace("import os\n", "")
        cursor -= len("import os\n")
    elif edit == "edit-suffix":
        text = DOC[:cursor] + DOC[cursor:].replace("3", "4")
    else:
        text = "# header\n" * 3 + DOC
        cursor += len("# header\n") * 3
    p = planner.plan(EditorState("u", "d", text, cursor))
    assert p.reuse_class is ReuseClass.REANCHOR
    prompt = _prompt_text(smol_tok, p)
    assert prompt.endswith(text[:cursor])  # the whole (short) document before the cursor, then the hole
    assert text[cursor:] in prompt
    for h in p.reuse_hints:
        assert h.num_tokens >= 8 and h.delta == h.new_start - h.old_start


@pytest.mark.parametrize(
    "text",
    [
        "a = 1\r\nb = 2\r\nc = ",  # CRLF
        "def f():\n\tif x:\n\t\treturn ",  # tabs
        "s = 'naïve café 😀'\nt = '",  # non-ASCII, astral
        "x",  # shorter than any window
        "",
    ],
)
def test_any_document_gives_a_prompt_that_spells_it(planner, smol_tok, text):
    p = planner.plan(EditorState("u", "d", text, len(text)))
    assert _prompt_text(smol_tok, p).endswith(text)


def test_users_and_documents_are_separate_sessions(planner):
    a = planner.plan(EditorState("alice", "d", DOC, 5))
    b = planner.plan(EditorState("bob", "d", DOC, 5))
    c = planner.plan(EditorState("alice", "other", DOC, 5))
    assert a.reuse_class is b.reuse_class is c.reuse_class is ReuseClass.COLD
    assert b.user_id == "bob"


def test_bad_cursor_is_a_clear_error():
    with pytest.raises(ValueError, match="outside the document"):
        EditorState("u", "d", "abc", 4)


def test_long_file_window_moves_in_coarse_steps(smol_tok):
    lines = [f"value_{i} = compute({i}, {i + 1})\n" for i in range(600)]
    text = "".join(lines)
    planner = EfimPlanner(smol_tok, TEMPLATES["smollm2"], WindowConfig(prefix_tokens=1024, step_lines=64))
    starts = set()
    for line in range(300, 330):
        cursor = sum(len(x) for x in lines[:line])
        planner.forget("u", "d")
        planner.plan(EditorState("u", "d", text, cursor))
        prefix, _ = planner.session_anchor("u", "d")
        starts.add(text.count("\n", 0, cursor - len(prefix)))
    # a cursor-following window would start at 30 different lines; this one at few, on a coarse grid
    assert all(s % 32 == 0 for s in starts) and len(starts) <= 3


def test_a_new_file_reuses_text_the_same_person_has_in_another_file_and_nobody_elses(smol_tok):
    """A context chunk is text of the file the person just left: its tokens are hinted from that
    file's last prompt (ReuseHint.source), never from another user's, and not with hint_sessions 0."""
    from fimgate.efim.templates import ContextChunk

    def planner(**kw):
        return EfimPlanner(
            smol_tok, TEMPLATES["smollm2"], WindowConfig(prefix_tokens=256, suffix_tokens=64), recompute_share=0.15, **kw
        )

    chunk = ContextChunk("a.py", DOC[DOC.index("def area") : DOC.index("def main")])
    b = "from a import area\n\n\n"
    p = planner()
    a_plan = p.plan(EditorState("u", "a.py", DOC, len(DOC), path="a.py"))
    b_plan = p.plan(EditorState("u", "b.py", b, len(b), path="b.py", context=(chunk,)))
    assert b_plan.reuse_class is ReuseClass.COLD
    hinted = [h for h in b_plan.reuse_hints if h.source == "a.py"]
    assert sum(h.num_tokens for h in hinted) >= 0.8 * len(smol_tok.encode(chunk.text))
    for h in hinted:
        new = b_plan.prompt_ids[h.new_start : h.new_start + h.num_tokens]
        assert new == a_plan.prompt_ids[h.old_start : h.old_start + h.num_tokens]
    assert dict(b_plan.hint_prompts)["a.py"] == a_plan.prompt_ids  # the prompt the hints name travels with them
    other = p.plan(EditorState("v", "b.py", b, len(b), path="b.py", context=(chunk,)))
    assert other.reuse_hints == () and other.hint_prompts == ()  # v never had a.py: nothing of u's is offered
    off = planner(hint_sessions=0)
    off.plan(EditorState("u", "a.py", DOC, len(DOC), path="a.py"))
    assert off.plan(EditorState("u", "b.py", b, len(b), path="b.py", context=(chunk,))).reuse_hints == ()


def test_the_keys_after_a_jump_carry_the_anchors_hints_and_a_second_jump_offers_the_prompt_before_the_first(planner):
    """A key typed before a re-anchor's prefill ended cancels it; the next keys are EFIM appends on
    that anchor, and carry its hints and the prompts they name, so what moved is still taken from
    where it was cached instead of prefilled. Another jump then also looks in the prompt from
    before the first one (the last prompt's K/V may never have been computed)."""
    before = planner.plan(EditorState("u", "d", DOC, DOC.index("\n\ndef main")))
    at = DOC.index("w * h")
    jump = planner.plan(EditorState("u", "d", DOC, at))
    assert jump.reuse_class is ReuseClass.REANCHOR and jump.reuse_hints
    assert dict(jump.hint_prompts)[""] == before.prompt_ids
    text, _, keys = _type(planner, DOC, at, "2 ")
    anchor = len(planner._sessions[("u", "d")].fixed_ids)
    for p in keys:
        assert p.reuse_class is ReuseClass.EFIM_APPEND
        assert p.reuse_hints and p.hint_prompts == jump.hint_prompts
        assert all(h.new_start + h.num_tokens <= anchor for h in p.reuse_hints)
        for h in p.reuse_hints:
            old = dict(p.hint_prompts)[h.source]
            assert old[h.old_start : h.old_start + h.num_tokens] == p.prompt_ids[h.new_start : h.new_start + h.num_tokens]
    again = planner.plan(EditorState("u", "d", text, text.index("def area")))
    sources = dict(again.hint_prompts)
    assert sources[""] == keys[-1].prompt_ids and sources["earlier:1"] == before.prompt_ids


def test_a_reanchor_asked_again_carries_its_hints_where_moved_text_runs_into_the_typed_line(smol_tok):
    """A deletion just after the cursor (the suffix's first characters) re-anchors, and the rest of
    the suffix moved, up to <MID> and on into the line being typed after it (a PSM template: the
    typed line follows <MID>). When that request is cancelled before its prefill (VS Code asks
    again for the same text), the repeat is an EFIM append on the anchor: it still carries the
    hints, cut at the anchor's end, so the moved text is placed from the cache instead of
    prefilled (on the default model, flask's ctx.py: 3 tokens + 4 recomputed, not 28)."""
    psm = FimTemplate("psm-on-smollm2", "psm", "<filename>", "<gh_stars>", "<issue_start>", ("<|endoftext|>",))
    planner = EfimPlanner(smol_tok, psm, WindowConfig(prefix_tokens=256, suffix_tokens=64), recompute_share=0.15)
    at = DOC.index("ea(2, 3)")
    planner.plan(EditorState("u", "d", DOC, at))
    edited = DOC[:at] + DOC[at + 1 :]  # the "e" after the cursor deleted
    first = planner.plan(EditorState("u", "d", edited, at))
    anchor = len(planner._sessions[("u", "d")].fixed_ids)
    assert first.reuse_class is ReuseClass.REANCHOR and anchor < len(first.prompt_ids)
    assert any(h.new_start < anchor < h.new_start + h.num_tokens for h in first.reuse_hints)
    again = planner.plan(EditorState("u", "d", edited, at))
    assert again.reuse_class is ReuseClass.EFIM_APPEND and again.reuse_hints
    assert again.hint_prompts == first.hint_prompts
    for h in again.reuse_hints:
        assert h.new_start + h.num_tokens <= anchor
        old = dict(again.hint_prompts)[h.source]
        assert old[h.old_start : h.old_start + h.num_tokens] == again.prompt_ids[h.new_start : h.new_start + h.num_tokens]
