"""Shape a raw completion into what a person should see.

- Single- or multi-line, by context: at the start of an empty block (the line before ends with
  ":" or an opening bracket, or, for Python, tree-sitter finds an empty block or an unclosed
  construct at the cursor) a whole body is wanted; mid-line, only the rest of the line.
- A multi-line completion stops where the enclosing block ends, by indentation.
- Text that the document already has right after the cursor is dropped, not repeated.
- Trailing whitespace is trimmed.
Pure text in, text out; tree-sitter is used when its Python grammar is installed.
"""
from __future__ import annotations

from functools import lru_cache

OPENERS = (":", "{", "(", "[")


@lru_cache(maxsize=1)
def _python_parser():
    try:
        import tree_sitter
        import tree_sitter_python
    except ImportError:
        return None
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def wants_multiline(text: str, cursor: int, language: str = "python") -> bool:
    line_start = text.rfind("\n", 0, cursor) + 1
    if text[line_start:cursor].strip():
        return False  # mid-line: finish this line
    before = text[:line_start].rstrip()
    if before.endswith(OPENERS):
        return True
    parser = _python_parser() if language == "python" else None
    if parser is None:
        return False
    data = text.encode("utf-8")
    cursor_byte = len(text[:cursor].encode("utf-8"))
    tree = parser.parse(data)
    row = text.count("\n", 0, cursor)
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "block" and node.named_child_count == 0 and abs(node.start_point[0] - row) <= 1:
            return True
        if node.type == "ERROR" and node.start_byte <= cursor_byte <= node.end_byte:
            return True
        stack.extend(node.children)
    return False


def cut_at_block_end(completion: str, text: str, cursor: int) -> str:
    """Keep lines while they stay inside the block the cursor is in."""
    line_start = text.rfind("\n", 0, cursor) + 1
    base = _indent(text[line_start:cursor]) if not text[line_start:cursor].strip() else _indent(text[line_start:])
    lines = completion.split("\n")
    kept = [lines[0]]
    for line in lines[1:]:
        if line.strip() and _indent(line) < base:
            break
        kept.append(line)
    return "\n".join(kept)


def tidy(completion: str, text: str, cursor: int, multiline: bool | None = None, language: str = "python") -> str:
    """The completion as shown: multiline None decides by context."""
    if multiline is None:
        multiline = wants_multiline(text, cursor, language)
    out = cut_at_block_end(completion, text, cursor) if multiline else completion.split("\n", 1)[0]
    out = "\n".join(line.rstrip() for line in out.split("\n")).rstrip()
    if not out.strip():
        return ""
    suffix = text[cursor:]
    rest_of_line = suffix.split("\n", 1)[0].strip()
    if rest_of_line and out.endswith(rest_of_line):
        out = out[: len(out) - len(rest_of_line)].rstrip()  # the line already ends with it
    next_line = suffix.split("\n", 1)[1].lstrip("\n").split("\n", 1)[0].strip() if "\n" in suffix else ""
    if multiline and next_line and "\n" in out and out.split("\n")[-1].strip() == next_line:
        out = out[: out.rfind("\n")].rstrip()  # the last line repeats the file's next line
    if suffix.startswith(out):
        return ""  # the whole suggestion is already there
    return out
