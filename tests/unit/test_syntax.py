"""Single- or multi-line from the syntax around the cursor, in the languages people use: in an
empty block or an unclosed construct a whole body is wanted (not only the next statements, as
between two statements); mid-line, the rest of the line."""

import pytest

from fimgate.efim.postprocess import between_statements, wants_multiline
from fimgate.efim.syntax import GRAMMARS, parser

CURSOR = "|"
CASES = {  # language: (cursor in an empty body, cursor mid-line in a finished statement)
    "python": ("class A:\n    def f(self):  # todo\n        |\n", "x = compute(|a, b)\n"),
    "javascript": ("function f(xs) {\n  |\n}\n", "const y = f(|1);\n"),
    "typescript": ("class A {\n  m(): number {\n    |\n  }\n}\n", "let y: number = f(|1);\n"),
    "tsx": ("function C() {\n  |\n}\n", "const e = <div>{f(|1)}</div>;\n"),
    "java": ("class A {\n  int f() {\n    |\n  }\n}\n", "class A { int x = f(|1); }\n"),
    "go": ("package m\n\nfunc f() int {\n\t|\n}\n", "package m\n\nvar x = f(|1)\n"),
    "rust": ("fn f() -> i32 {\n    |\n}\n", "fn g() { let y = f(|1); }\n"),
    "c": ("int f(void) {\n  |\n}\n", "int y = f(|1);\n"),
    "cpp": ("struct S {\n  int f() {\n    |\n  }\n};\n", "int y = f(|1);\n"),
}


def _split(code: str) -> tuple[str, int]:
    return code.replace(CURSOR, ""), code.index(CURSOR)


@pytest.mark.parametrize("language", sorted(GRAMMARS))
def test_every_listed_language_has_its_grammar(language):
    assert parser(language) is not None


@pytest.mark.parametrize("language", sorted(CASES))
def test_an_empty_body_wants_lines_and_a_finished_statement_the_rest_of_its_line(language):
    body, mid = CASES[language]
    assert wants_multiline(*_split(body), language) is True
    assert between_statements(*_split(body), language) is False  # a body, not a paragraph
    assert wants_multiline(*_split(mid), language) is False


def test_a_brace_body_found_by_syntax_not_by_the_line_above():
    """The line above ends in a comment, not an opener: only the parse knows the block is empty."""
    text, cursor = _split("int f(void) { // the answer\n  |\n}\n")
    assert between_statements(text, cursor, "c") is False
    assert between_statements(text, cursor, "") is True  # no grammar: the text rules alone
