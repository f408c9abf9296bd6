"""What a person sees of a completion."""

from fimgate.efim.postprocess import tidy, wants_multiline

BODY = "def area(w, h):\n    "
TEXT = BODY + "\n\nprint(area(2, 3))\n"


def test_block_start_wants_a_body_mid_line_wants_the_line():
    assert wants_multiline(TEXT, len(BODY)) is True
    mid = "x = compute("
    assert wants_multiline(mid + ")\n", len(mid)) is False


def test_tree_sitter_sees_an_empty_block_even_without_a_colon_on_the_line_before():
    text = "class A:\n    def f(self):  # todo\n        \n"
    cursor = text.index("        \n") + 8
    assert wants_multiline(text, cursor) is True


def test_multiline_stops_at_the_end_of_the_enclosing_block():
    raw = "area = w * h\n    return area\nprint('done')\n"
    assert tidy(raw, TEXT, len(BODY), multiline=True) == "area = w * h\n    return area"


def test_single_line_trims_and_drops_what_the_line_already_has():
    text = "total = compute(a, b)\n"
    cursor = text.index("a, b)")
    assert tidy("a, b)   \nmore", text, cursor, multiline=False) == ""  # all of it is already there
    assert tidy("x, a, b)", text, cursor, multiline=False) == "x,"


def test_last_line_repeating_the_next_line_of_the_file_is_dropped():
    text = "def f():\n    \n    return 1\n"
    cursor = text.index("    \n") + 4
    assert tidy("x = 1\n    return 1", text, cursor, multiline=True) == "x = 1"


def test_the_end_of_a_block_opening_line_gets_the_block_body():
    """The issue's cases: at `if x > 0:` or `function f(xs) {` the single-line rule answered ""."""
    for prefix, suffix, raw, shown in [
        ("def f(x):\n    if x > 0:", "\n    return 0\n", "\n        return x\n    return 0\n", "\n        return x"),
        ("function f(xs) {", "\n}\n", "\n  return xs.map(x => x * 2);\n}\n\nfunction g() {", "\n  return xs.map(x => x * 2);"),
    ]:
        text, cursor = prefix + suffix, len(prefix)
        assert wants_multiline(text, cursor, "") is True
        assert tidy(raw, text, cursor) == shown


def test_a_body_on_an_unindented_blank_line_stops_at_the_end_of_its_function():
    text = "def f(x):\n    if x > 0:\n\n    return 0\n"
    cursor = text.index("\n\n") + 1
    raw = "        return x\n    return 0\n\nprint(f(1))\nprint(f(2))\nprint("
    assert tidy(raw, text, cursor, multiline=True) == "        return x"


def test_the_end_of_a_line_of_code_gets_the_next_line():
    """A person finished a line; the model answers a newline and the missing line. The single-line
    rule cut it at that newline and showed nothing."""
    prefix = "def mean(xs):\n    total = sum(xs)"
    text = prefix + "\n\nprint(mean([1, 2]))\n"
    assert tidy("\n    return total / len(xs)\n\nprint(", text, len(prefix)) == "\n    return total / len(xs)"
    assert tidy("  # the sum\n    return total", text, len(prefix)) == "  # the sum"  # a first line with text: that line
    # a line that opens a block comes with its block
    raw = "\n    if not xs:\n        return 0\n    return total / len(xs)\n"
    assert tidy(raw, text, len(prefix)) == "\n    if not xs:\n        return 0"


def test_a_next_line_the_file_already_has_is_not_suggested():
    prefix = "def f(x):\n    y = x + 1"
    text = prefix + "\n\n    return y\n"
    assert tidy("\n    return y\n", text, len(prefix)) == ""
    assert tidy("\n    return y * 2\n", text, len(prefix)) == "\n    return y * 2"


def test_a_closing_bracket_deeper_than_the_one_below_is_the_missing_line():
    """`}` at 8 spaces before `}` at 4 closes the inner block: it is what is missing, not a repeat
    (llama.vscode's statusbar.ts; TypeScript's next-line holes lost these)."""
    prefix = "class A {\n    f() {\n        if (x) {\n            y();"
    text = prefix + "\n    }\n}\n"
    assert tidy("\n        }\n    }\n", text, len(prefix)) == "\n        }"
    assert tidy("\n    }\n}\n", text, len(prefix)) == ""  # the file's next lines, as they are


def test_fences_chat_markers_and_prose_never_reach_the_editor():
    """llama-server's /infill answered "fib(n-1) + fib(n-2)\\n```\\n\\nThis code defines ..." on an
    Instruct model."""
    prefix = "def fib(n):\n    if n < 2:\n        return n\n    return "
    text = prefix + "\n"
    raw = "fib(n-1) + fib(n-2)\n```\n\nThis code defines a function that computes Fibonacci numbers."
    assert tidy(raw, text, len(prefix), multiline=True) == "fib(n-1) + fib(n-2)"
    assert tidy("fib(n-1)<|im_end|>\n<|im_start|>user", text, len(prefix)) == "fib(n-1)"
    body = "def area(w, h):\n"
    assert tidy("    return w * h\n```\nThe function", body + "\n", len(body), multiline=True) == "    return w * h"
    # in Markdown a fence is what a person writes
    doc = "# Usage\n\n"
    assert tidy("```python\nimport fimgate\n```", doc, len(doc), multiline=True, fences=False).startswith("```python")


def test_a_block_stops_before_the_lines_the_file_already_has():
    """HumanEval single-line holes after a block opener: served showed the missing line and then
    the body's other lines again (pass@1 below the raw model's first line)."""
    prefix = "def xor(i, j):\n"
    text = prefix + "\n            return '0'\n        return '1'\n"
    raw = "        if i == j:\n            return '0'\n        return '1'\n"
    assert tidy(raw, text, len(prefix), multiline=True) == "        if i == j:"
    # an inner closing bracket deeper than the file's next `}` is not that line
    prefix = "function f(a) {\n"
    text = prefix + "\n}\n"
    raw = "    if (a) {\n        g();\n    }\n    return a;\n}\n"
    assert tidy(raw, text, len(prefix), multiline=True) == "    if (a) {\n        g();\n    }\n    return a;"


def test_between_statements_the_next_statements_show_up_to_an_empty_line():
    """A person pressed Enter after a statement: the next statements that belong together, not one
    line (HumanEval multi-line holes showed one line of several), and not the function's rest."""
    prefix = "def f(xs):\n    total = 0\n    "
    text = prefix + "\n    return total\n"
    cursor = len(prefix)
    assert wants_multiline(text, cursor) is True
    raw = "for x in xs:\n        total += x\n\n    print(total)\n"
    assert tidy(raw, text, cursor) == "for x in xs:\n        total += x"
    # shallower than the suggestion's first line: the block it is in ended
    assert tidy("total += 1\nprint(total)\n", text, cursor) == "total += 1"
    # the file's next line ends it too
    assert tidy("total = sum(xs)\n    return total\n", text, cursor) == "total = sum(xs)"


def test_between_statements_at_the_start_of_a_blank_line_the_first_line_sets_the_depth():
    """The cursor at column 0 of a blank line inside a function (an editor without auto-indent,
    and the bench's served HumanEval holes): the block is the suggestion's first line's."""
    prefix = "def f(xs):\n    total = 0\n"
    text = prefix + "\n    return total\n"
    raw = "    for x in xs:\n        total += x\nprint(f([1]))\n"
    assert tidy(raw, text, len(prefix)) == "    for x in xs:\n        total += x"


def test_a_body_after_an_opener_keeps_its_empty_lines():
    """Not between statements: a block's body may hold an empty line."""
    prefix = "def f(xs):\n    "
    text = prefix + "\n\nprint(f([1]))\n"
    raw = "total = 0\n\n    for x in xs:\n        total += x\n    return total\nprint("
    assert tidy(raw, text, len(prefix)) == "total = 0\n\n    for x in xs:\n        total += x\n    return total"


def test_between_statements_the_file_below_is_not_written_again():
    """Where the file goes on below the blank line, a suggestion stops after its line that opens the
    block the file's next line is the body of, and before its line that begins as the file's next
    line does at its depth: the model writing again what the file has (HumanEval single-line holes)."""
    prefix = "def f(s):\n    for c in s:\n"
    text = prefix + "\n            depth += 1\n    return depth\n"
    raw = "        if c == '(':\n            depth = max(depth, 1)\n        elif c == ')':\n"
    assert tidy(raw, text, len(prefix)) == "        if c == '(':"
    prefix = "def mean(xs):\n"
    text = prefix + "\n    return total / len(xs)\n"
    raw = "    total = sum(xs)\n    return total / max(1, len(xs))\n"
    assert tidy(raw, text, len(prefix)) == "    total = sum(xs)"
