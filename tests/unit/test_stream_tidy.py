"""Streamed completions are cleaned exactly as whole ones: whatever pieces the text arrives in,
what a client concatenates equals tidy() of the whole (the issue: a stream showed `r ** 2)` where
the plain answer said `r ** 2`)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from fimgate.efim.postprocess import MARKERS, StreamTidy, tidy

DOCS = [
    ("def area(r):\n    return 3.14 * (", ")\n"),
    ("total = compute(", "a, b)\n"),
    ("def f():\n    ", "\n    return 1\n"),
    ("def area(w, h):\n    ", "\n\nprint(area(2, 3))\n"),
    ("class A:\n    def f(self):\n        ", "\n\nx = A()\n"),
    ("x = ", ""),
    ("def f(x):\n    if x:\n", "        return False\n    return False\n"),  # HumanEval/92/L3
    ("def f(x):\n    if x > 0:", "\n    return 0\n"),  # the end of a block-opening line
    ("function f(xs) {", "\n}\n"),
    ("call(x, ", "x, y)\n"),  # the line's rest repeats itself: `x, x, y)` ends with it
    ("def f(x):\n    if x:\n        ", "\n        return x\n"),  # a body whose last line may be the next
    ("x = compute(1)", "\n\nprint(x)\n"),  # the end of a line: the next line may come
    ("def f(x):\n    y = x + 1", "\n    return y\n"),  # ... and may only repeat the file's next line
    ("def f(xs):\n    total = 0\n    ", "\n    return total\n"),  # between statements: up to an empty line
    ("def f(xs):\n    total = 0\n", "\n    return total\n"),  # ... at column 0: the first line sets the depth
    ("def f(x):\n    if x:\n", "\n            return y\n"),  # ... above a body the file has: up to its opener
]
PIECES = [
    "r",
    " ** 2",
    ")",
    "\n",
    "    ",
    "return 1",
    "a, b)",
    "  ",
    "x = 1",
    "\n\n",
    "print(",
    "2, 3))",
    "\t",
    "y",
    "return False",
    "        ",
    "return True",
    "}",
    "\n  return xs;",
    "\n        return x",
    "x",
    ", ",
    "x, y)",
    "ret",
    "urn x",
    "```",
    "`",
    "\n```python\n",
    "<|im_",
    "end|>",
    "<|endoftext|>",
    "    if y:",
    "    return y",
    "    returned = 1",
    "        if y:",
    "\n    ret",
]


@settings(max_examples=600, deadline=None)
@given(
    doc=st.sampled_from(DOCS),
    pieces=st.lists(st.sampled_from(PIECES), max_size=12),
    multiline=st.booleans(),
    min_indent=st.sampled_from([0, 4, 8]),
)
def test_streamed_text_is_the_plain_text(doc, pieces, multiline, min_indent):
    prefix, suffix = doc
    text, cursor = prefix + suffix, len(prefix)
    stream = StreamTidy(text, cursor, multiline, min_indent)
    shown = "".join(stream.feed(p) for p in pieces)
    raw = "".join(pieces)
    shown += stream.finish(raw)
    assert shown == tidy(raw, text, cursor, multiline=multiline, min_indent=min_indent)
    # and never a chat or FIM marker, nor a Markdown fence (an Instruct model's "```" and prose)
    assert not any(m in shown for m in MARKERS) and not any(line.lstrip().startswith("```") for line in shown.split("\n"))


def test_the_reported_case_and_that_text_streams_before_the_end():
    text = "def area(r):\n    return 3.14 * ()\n"
    cursor = text.index(")\n")
    stream = StreamTidy(text, cursor, multiline=False)
    early = stream.feed("r") + stream.feed(" ** 2") + stream.feed(")")
    assert early.startswith("r")  # shown before the end: not all held back
    assert early + stream.finish("r ** 2)") == "r ** 2"


def test_the_first_words_show_as_soon_as_nothing_can_take_them_back():
    # mid-line before `, y)`: `total` cannot become the text the line already has, so it shows at once
    text = "z = f(, y)\n"
    stream = StreamTidy(text, text.index(", y)"), multiline=False)
    assert stream.feed("total") == "total"
    assert stream.feed(", y") == ""  # may be the line's own `, y)`: held
    assert stream.finish("total, y)") == ""
    # a body: its first line shows while the model writes it, not two lines later
    prefix, suffix = "def f(x):\n", "\n\nprint(f(1))\n"
    stream = StreamTidy(prefix + suffix, len(prefix), multiline=True)
    assert stream.feed("    y = x + 1") == "    y = x + 1"
    assert stream.feed("\n") + stream.feed("    return y") == "\n    return y"
    # ... but a last line that may still be the file's next line stays back until it is not
    prefix, suffix = "def f(x):\n", "\n    return x\n"
    stream = StreamTidy(prefix + suffix, len(prefix), multiline=True)
    assert stream.feed("    x += 1\n    return") == "    x += 1"
    assert stream.feed(" x + 1") == ""  # it begins as the file's next line does: the file's line, rewritten
    assert stream.done and stream.finish("    x += 1\n    return x + 1") == ""
    stream = StreamTidy(prefix + suffix, len(prefix), multiline=True)
    assert stream.feed("    x += 1\n    ret") == "    x += 1"
    assert stream.feed("ry(x)") == "\n    retry(x)"  # another word: not the file's line
