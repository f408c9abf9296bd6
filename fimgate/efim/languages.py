"""Which language a document is in: the editor's language id where it says, else the file's
extension; a request with no file name at all is taken as Python (the language most FIM clients
without a file name send). One answer for every front end."""

from __future__ import annotations

import os

EXTENSIONS = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".tsx": "tsx",
    ".java": "java",
    ".go": "go",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".md": "markdown",
    ".markdown": "markdown",
}
ALIASES = {"javascriptreact": "javascript", "typescriptreact": "tsx", "c++": "cpp"}


def language_of(path: str, language_id: str = "") -> str:
    """'python', 'javascript', ...; '' for a file of a language not listed."""
    if language_id:
        lid = language_id.lower()
        return ALIASES.get(lid, lid)
    if not path:
        return "python"
    return EXTENSIONS.get(os.path.splitext(path)[1].lower(), "")
