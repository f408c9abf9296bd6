"""Context from other files for `fimgate lsp`: the lines around where the person last edited in
each other open document, oldest touched first (the order the planner shows them in, so moving
to another file changes the end of the context, not its start), within a character budget.

Documents matching a secret pattern (the VS Code extension's list: .env, keys, credentials,
~/.ssh, ...) or one of the person's `contextExclude` globs are never used as context, and get
no completions (nor a pre-warm) themselves.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import unquote

from fimgate.efim.templates import ContextChunk

# keep equal to SECRET_PATTERNS in vscode-extension/src/logic.ts
SECRET_PATTERNS = (
    ".env", ".env.*", "*.env", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".npmrc", ".pypirc", ".netrc", ".git-credentials",
    ".htpasswd", "*credential*", "*secret*", ".ssh/*", ".aws/*", ".gnupg/*", ".docker/config.json", ".kube/config",
)  # fmt: skip
RADIUS_LINES = 16  # a chunk: this many lines above and below the last edit


@lru_cache(maxsize=256)
def _glob(glob: str) -> re.Pattern:
    body = re.escape(glob).replace(r"\*\*/", "\0").replace(r"\*\*", "\1").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
    return re.compile("(^|/)" + body.replace("\0", "(.*/)?").replace("\1", ".*") + "$", re.IGNORECASE)


def is_secret(uri: str, exclude: tuple[str, ...] = ()) -> bool:
    """Whether a document (a path or file URI) matches a secret pattern or one of `exclude`."""
    path = unquote(re.sub(r"^file://", "", uri)).replace("\\", "/")
    return any(_glob(g).search(path) for g in (*SECRET_PATTERNS, *exclude))


def chunk_lines(line: int, line_count: int, radius: int = RADIUS_LINES) -> tuple[int, int]:
    first = max(0, min(line - radius, line_count - 1 - 2 * radius))
    return first, min(line_count - 1, first + 2 * radius)


class Touched:
    """Which open documents the person edited, in order, and the last line edited in each."""

    def __init__(self) -> None:
        self._line: dict[str, int] = {}  # uri -> last edited line; insertion order = touch order

    def touch(self, uri: str, line: int) -> None:
        self._line.pop(uri, None)
        self._line[uri] = line

    def forget(self, uri: str) -> None:
        self._line.pop(uri, None)

    def chunks(
        self, current: str, texts: dict[str, str], budget_chars: int, exclude: tuple[str, ...] = ()
    ) -> tuple[ContextChunk, ...]:
        """Chunks of the other documents (uri -> text, the open ones), oldest touched first; the
        newest that fit `budget_chars` are kept."""
        out: list[ContextChunk] = []
        used = 0
        for uri in reversed(list(self._line)):
            if uri == current or uri not in texts or is_secret(uri, exclude):
                continue
            lines = texts[uri].split("\n")
            first, last = chunk_lines(self._line[uri], len(lines))
            text = "\n".join(lines[first : last + 1])[:budget_chars]
            if not text.strip() or used + len(text) > budget_chars:
                break
            out.append(ContextChunk(uri.rsplit("/", 1)[-1], text))
            used += len(text)
        return tuple(reversed(out))
