"""Where the cursor sits in the code's syntax, by tree-sitter, for the languages people use most.

    wants_body(text, cursor, language) -> True when the cursor is in an empty block
        (`def f():|`, `{ | }`) or inside a construct the parser could not close (an ERROR node):
        a whole body is wanted there, not the rest of a line

Grammars come from the tree-sitter-<language> wheels (pyproject dependencies); a language
without one answers False and the text rules (postprocess.py) decide alone. Parsing a file of a
few thousand lines takes a few milliseconds, off the event loop (the service plans in a worker
thread).
"""

from __future__ import annotations

from functools import lru_cache

# language -> (module, function returning the grammar, node types that hold a block's statements)
GRAMMARS = {
    "python": ("tree_sitter_python", "language", ("block",)),
    "javascript": ("tree_sitter_javascript", "language", ("statement_block", "class_body")),
    "typescript": ("tree_sitter_typescript", "language_typescript", ("statement_block", "class_body")),
    "tsx": ("tree_sitter_typescript", "language_tsx", ("statement_block", "class_body")),
    "java": ("tree_sitter_java", "language", ("block", "class_body", "constructor_body")),
    "go": ("tree_sitter_go", "language", ("block",)),
    "rust": ("tree_sitter_rust", "language", ("block", "declaration_list", "field_declaration_list")),
    "c": ("tree_sitter_c", "language", ("compound_statement", "field_declaration_list")),
    "cpp": ("tree_sitter_cpp", "language", ("compound_statement", "field_declaration_list")),
}


@lru_cache(maxsize=None)
def parser(language: str):
    """A tree-sitter parser for the language, or None where its grammar is not installed."""
    if language not in GRAMMARS:
        return None
    module, function, _ = GRAMMARS[language]
    try:
        import importlib

        import tree_sitter

        grammar = getattr(importlib.import_module(module), function)()
    except (ImportError, AttributeError):
        return None
    return tree_sitter.Parser(tree_sitter.Language(grammar))


def wants_body(text: str, cursor: int, language: str) -> bool:
    p = parser(language)
    if p is None:
        return False
    blocks = GRAMMARS[language][2]
    data = text.encode("utf-8", "replace")
    at = len(text[:cursor].encode("utf-8", "replace"))
    row = text.count("\n", 0, cursor)
    stack = [p.parse(data).root_node]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" and node.start_byte <= at <= node.end_byte:
            return True
        if node.type in blocks and not [c for c in node.named_children if "comment" not in c.type]:
            # Python's empty block ends where it starts (no braces): near the cursor's row
            if language == "python" and abs(node.start_point[0] - row) <= 1:
                return True
            if language != "python" and node.start_byte < at < node.end_byte:
                return True
        if language == "python" or node.start_byte <= at <= node.end_byte:  # braces: only around the cursor
            stack.extend(node.children)
    return False
