"""The context the VS Code extension sends, for replayed people: its ring of chunks
(vscode-extension/src/logic.ts, ContextRing, and extension.ts, `switched`), rebuilt from a
person's requests. Leaving a file adds the lines around its last cursor (16 above and below),
oldest first; a chunk overlapping an earlier one of the same file replaces it; at most 8 chunks
and `budget_chars` characters (the oldest go first); the current file's own chunks stay out.
"""

from __future__ import annotations

from dataclasses import replace

from fimgate.bench.workloads.trace import TraceRequest
from fimgate.efim.templates import ContextChunk
from fimgate.lsp.context import chunk_lines

MAX_CHUNKS = 8


def _chunk(text: str, cursor: int) -> tuple[int, int, str]:
    lines = text.split("\n")
    first, last = chunk_lines(text.count("\n", 0, cursor), len(lines))
    return first, last, "\n".join(lines[first : last + 1])


class Ring:
    """The extension's ring of chunks for one person: `left(file, text, cursor)` when they leave a
    file; `chunks(file)` what is sent with a request in `file`."""

    def __init__(self, budget_chars: int) -> None:
        self.budget_chars = budget_chars
        self.ring: list[tuple[str, int, int, str]] = []  # (file, first line, last line, text), oldest first

    def left(self, file: str, text: str, cursor: int) -> None:
        if self.budget_chars <= 0:
            return
        first, end, chunk = _chunk(text, cursor)
        chunk = chunk[: self.budget_chars]
        if not chunk.strip():
            return
        self.ring = [c for c in self.ring if not (c[0] == file and c[1] <= end and first <= c[2]) and c[3] != chunk]
        self.ring.append((file, first, end, chunk))
        while len(self.ring) > MAX_CHUNKS or sum(len(c[3]) for c in self.ring) > self.budget_chars:
            self.ring.pop(0)

    def chunks(self, file: str) -> tuple[ContextChunk, ...]:
        return tuple(ContextChunk(f, t) for f, _, _, t in self.ring if f != file)


def with_context(part: list[TraceRequest], budget_chars: int) -> list[TraceRequest]:
    """One person's requests, each with the chunks the extension would have sent with it."""
    if budget_chars <= 0:
        return part
    ring = Ring(budget_chars)
    out, last = [], None
    for r in part:
        if last is not None and r.file != last.file:
            ring.left(last.file, last.text, last.cursor)
        out.append(replace(r, context=ring.chunks(r.file)))
        last = r
    return out
