"""A new anchor mid-line puts the line's typed text after <MID> (efim/planner.py:
line_after_middle): a FIM model is healed there and continues the word, where at the end of P it
re-spelt it (`for idx, elem in e` -> ` enumerate(...)`, Qwen2.5-Coder-0.5B)."""

from fimgate.backend.base import ReuseClass
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.templates import TEMPLATES
from tests.unit.test_templates import qwen_tokenizer

PREFIX = "def f(numbers):\n    for idx, elem in e"
DOC = PREFIX + "\n        print(idx)\n"


def _text(tok, plan):
    return tok.decode(list(plan.prompt_ids)) + plan.healing.text


def test_a_cold_prompt_mid_line_has_the_line_after_middle_healed_and_the_next_key_appends():
    tok = qwen_tokenizer()
    planner = EfimPlanner(tok, TEMPLATES["qwen2.5-coder"])
    cold = planner.plan(EditorState("u", "d", DOC, len(PREFIX)))
    text = _text(tok, cold)
    assert text.endswith("<|fim_middle|>    for idx, elem in e")
    assert "<|fim_prefix|>def f(numbers):\n<|fim_suffix|>\n        print(idx)\n" in text
    assert cold.healing.text == " e"  # the partial word is re-spelt by the model, not fed cut
    typed = DOC[: len(PREFIX)] + "n" + DOC[len(PREFIX) :]
    nxt = planner.plan(EditorState("u", "d", typed, len(PREFIX) + 1))
    assert nxt.reuse_class is ReuseClass.EFIM_APPEND
    assert nxt.prompt_ids[: len(cold.prompt_ids)] == cold.prompt_ids and _text(tok, nxt).endswith("elem in en")


def test_the_plain_prompt_and_a_line_start_keep_p_at_the_cursor():
    tok = qwen_tokenizer()
    plain = EfimPlanner(tok, TEMPLATES["qwen2.5-coder"], line_after_middle=False).plan(EditorState("u", "d", DOC, len(PREFIX)))
    assert _text(tok, plain).startswith("<|fim_prefix|>" + PREFIX + "<|fim_suffix|>")
    at_start = DOC.index("    for")
    p = EfimPlanner(tok, TEMPLATES["qwen2.5-coder"]).plan(EditorState("u", "d", DOC, at_start))
    assert _text(tok, p).endswith("<|fim_middle|>")  # nothing typed on the line: nothing after <MID>
    long_line = "x = " + "a + " * 30
    p = EfimPlanner(tok, TEMPLATES["qwen2.5-coder"]).plan(EditorState("u", "d", long_line, len(long_line)))
    assert _text(tok, p).endswith("<|fim_middle|>")  # over TYPED_LINE_CHARS: P ends at the cursor
