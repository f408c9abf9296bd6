"""Character offsets: Python code points (what the planner uses) and LSP's UTF-16 positions.

LSP counts a line's characters in UTF-16 code units, so a character outside the BMP (an emoji)
counts 2. Lines end at "\\n", "\\r\\n" or "\\r". Out-of-range positions clamp, as LSP asks.
"""

from __future__ import annotations

import bisect
import re

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in _LINE_BREAK.finditer(text)]


def _utf16_len(s: str) -> int:
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def position_to_offset(text: str, line: int, character: int) -> int:
    """LSP (line, UTF-16 character) -> code-point offset."""
    starts = line_starts(text)
    if line < 0:
        return 0
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    content = text[start:end].rstrip("\r\n")
    units = 0
    for i, ch in enumerate(content):
        if units >= character:
            return start + i
        units += 2 if ord(ch) > 0xFFFF else 1
    return start + len(content)


def offset_to_position(text: str, offset: int) -> tuple[int, int]:
    """Code-point offset -> LSP (line, UTF-16 character)."""
    offset = max(0, min(offset, len(text)))
    starts = line_starts(text)
    line = bisect.bisect_right(starts, offset) - 1
    return line, _utf16_len(text[starts[line] : offset])


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset)
