"""Cut the document into the prompt's prefix and suffix windows, on line boundaries.

The prefix window's first line moves only in coarse steps (`step_lines`, 64 by default), never
per keystroke: a window whose head follows the cursor line turns every Enter deep in a file into
a full prefill. Budgets are in tokens; counting is done per line, which is close to (and never
far from) the count of the joined text, and only when a window is (re)cut, not per keystroke.
"""

from __future__ import annotations

from dataclasses import dataclass

from fimgate.backend.base import Tokenizer


@dataclass(frozen=True)
class WindowConfig:
    prefix_tokens: int = 1024
    suffix_tokens: int = 256
    inc_tokens: int = 256  # how far the increment may grow before the window is re-anchored
    step_lines: int = 64
    context_chars: int = 16_384  # other files' chunks shown before the anchor, newest kept first (~4k tokens)


@dataclass(frozen=True)
class Window:
    prefix_start: int  # offsets in the document (code points)
    cursor: int
    suffix_end: int


def _lines_with_ends(text: str, start: int, stop: int) -> list[tuple[int, int]]:
    """(start, end) offsets of the lines overlapping text[start:stop], ends including '\\n'."""
    out = []
    pos = start
    while pos < stop:
        nl = text.find("\n", pos, stop)
        end = stop if nl == -1 else nl + 1
        out.append((pos, end))
        pos = end
    return out


def cut_window(text: str, cursor: int, tok: Tokenizer, cfg: WindowConfig) -> Window:
    cursor = max(0, min(cursor, len(text)))
    # -- prefix: the earliest start, on a multiple of step_lines, that fits the budget ---------
    line_start = text.rfind("\n", 0, cursor) + 1
    # look back at most enough characters for the budget (a token is rarely under 1 char)
    reach = max(0, line_start - cfg.prefix_tokens * 8)
    reach = text.rfind("\n", 0, reach) + 1 if reach > 0 else 0
    lines = _lines_with_ends(text, reach, line_start)
    counts = [len(tok.encode(text[s:e])) for s, e in lines] if lines else []
    first_line_no = text.count("\n", 0, reach)
    # the cursor's own line, bounded: a line longer than the budget can hold is cut below anyway
    measured_from = max(line_start, cursor - cfg.prefix_tokens * 8)
    cur_tokens = len(tok.encode(text[measured_from:cursor]))
    fitting: list[tuple[int, int]] = []  # (line number, start offset), nearest first
    total = cur_tokens
    for i in range(len(lines) - 1, -1, -1):
        total += counts[i]
        if total > cfg.prefix_tokens:
            break
        fitting.append((first_line_no + i, lines[i][0]))
    start = line_start
    step = cfg.step_lines
    while step >= 1:  # the coarsest grid that has a fitting line, then its earliest line
        on_grid = [off for no, off in fitting if no % step == 0]
        if on_grid:
            start = on_grid[-1]
            break
        step //= 2
    if cur_tokens > cfg.prefix_tokens or measured_from > line_start:  # one enormous line: cut it by characters
        start = max(line_start, cursor - cfg.prefix_tokens * 2)
    # -- suffix: the rest of the cursor's line, then whole lines while the budget lasts --------
    end = cursor
    used = 0
    for s, e in _lines_with_ends(text, cursor, min(len(text), cursor + cfg.suffix_tokens * 8)):
        n = len(tok.encode(text[s:e]))
        if used + n > cfg.suffix_tokens and end > cursor:
            break
        if used + n > cfg.suffix_tokens:  # even the cursor's own line is too long
            end = min(e, cursor + cfg.suffix_tokens * 2)
            break
        used += n
        end = e
    return Window(prefix_start=start, cursor=cursor, suffix_end=end)
