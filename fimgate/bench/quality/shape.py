"""`fimgate bench shape`: are suggestions shaped as editors show them, per language?

Holes are cut from real files at block-opening lines (a line ending in ":" or "{" whose next line
is indented deeper): the block's body is removed, as if the person had just typed the opening line.

    end-of-line   the cursor at the end of the opening line (`if x > 0:|`)
    blank-line    the cursor on a new, unindented line right after it (the person pressed Enter)

and at the end of any other line of code whose next line (code too) is removed, as if the person
had just finished the line and the next one is what is missing:

    next-line     `total = sum(xs)|` with `return total / len(xs)` taken out below it

The model writes up to `max_tokens` with no line rule (one generation per hole); the same raw text
is then shaped by today's rules (efim/postprocess.py) and by the rules before block openers were
known ("before": mid-line means one line; a blank line's block is as deep as the cursor), so the
two columns differ only in shaping. Reported per language and hole kind:

    non_empty   the share of holes with a suggestion to show
    in_scope    of the multi-line suggestions shown, the share whose lines all stay deeper than the
                opening line (a suggestion that runs on past its block is out of scope)
    first_line_exact  (next-line) the share whose first shown line of text is the removed line;
                "raw" beside it: the model's own first line of text, no rule applied
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from fimgate.backend.base import SamplingParams, last_finished
from fimgate.efim.languages import language_of
from fimgate.efim.planner import EditorState
from fimgate.efim.postprocess import OPENERS, tidy

KINDS = ("end-of-line", "blank-line", "next-line")
COMMENTS = ("#", "//", "*", "/*")


@dataclass(frozen=True)
class Hole:
    """A cut of `source` (shared by every hole of a file, not copied: a 400 KB header has ten
    thousand of them): source[:head] + middle + source[tail:], the cursor in it."""

    path: str
    source: str
    head: int
    middle: str
    tail: int
    cursor: int
    opener_indent: int
    kind: str
    expected: str = ""  # next-line: the removed line, stripped

    @property
    def text(self) -> str:
        return self.source[: self.head] + self.middle + self.source[self.tail :]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def first_text_line(text: str) -> str:
    return next((line.strip() for line in text.split("\n") if line.strip()), "")


def _starts(lines: list[str]) -> list[int]:
    """Each line's offset in "\n".join(lines), and one past the end."""
    out, at = [], 0
    for line in lines:
        out.append(at)
        at += len(line) + 1
    return out + [at - 1]


def next_line_holes(path: str, text: str) -> list[Hole]:
    lines = text.split("\n")
    start = _starts(lines)
    out = []
    for i, (line, nxt) in enumerate(zip(lines[:-2], lines[1:-1])):
        if not line.strip() or not nxt.strip() or line.rstrip().endswith(OPENERS):
            continue
        if line.lstrip().startswith(COMMENTS) or nxt.lstrip().startswith(COMMENTS):
            continue
        head = start[i] + len(line.rstrip(" \t"))
        out.append(Hole(path, text, head, "\n", start[i + 2], head, _indent(line), "next-line", nxt.strip()))
    return out


def holes_in(path: str, text: str, kind: str) -> list[Hole]:
    if kind == "next-line":
        return next_line_holes(path, text)
    lines = text.split("\n")
    start = _starts(lines)
    out = []
    for i, line in enumerate(lines[:-1]):
        if not line.strip() or not line.rstrip().endswith(OPENERS[:2]) or line.lstrip().startswith(COMMENTS):
            continue
        body_end = i + 1
        while body_end < len(lines) and (not lines[body_end].strip() or _indent(lines[body_end]) > _indent(line)):
            body_end += 1
        if body_end == i + 1:
            continue  # not a block here
        head = start[i] + len(line.rstrip())
        tail = min(start[body_end], len(text))
        if kind == "end-of-line":
            out.append(Hole(path, text, head, "\n", tail, head, _indent(line), kind))
        else:
            out.append(Hole(path, text, head, "\n\n", tail, head + 1, _indent(line), kind))
    return out


def _before_rules(raw: str, hole: Hole) -> str:
    """Shaping as it was before block openers were known: at the end of a line, one line; on a
    blank line, a block as deep as the cursor - today's rules on the text with the opener hidden."""
    if hole.kind == "next-line":  # one line, and the line had ended: nothing, unless the model went on it
        first = raw.split("\n", 1)[0].rstrip()
        return first if first.strip() else ""
    if hole.kind == "end-of-line":
        return tidy(raw, hole.text, hole.cursor, multiline=False)
    opener_end = hole.text.rfind("\n", 0, hole.cursor)  # the opening line ends right before the blank line
    hidden = hole.text[: opener_end - 1] + " " + hole.text[opener_end:]
    return tidy(raw, hidden, hole.cursor, multiline=True)


def in_scope(shown: str, hole: Hole) -> bool:
    return all(_indent(line) > hole.opener_indent for line in shown.split("\n")[1:] if line.strip())


def run(
    service,
    files: list[str],
    per_language: int = 30,
    max_tokens: int = 48,
    seed: int = 0,
    progress=print,
    kinds: tuple[str, ...] = KINDS,
) -> dict:
    """service: a CompletionService (its backend and planner run the holes, raw). Holes are picked
    for every kind, then only `kinds` run, so a kind's holes do not depend on which others run."""
    from fimgate.gateway.service import Shape

    rng = random.Random(seed)
    by_language: dict[str, list[Hole]] = {}
    for path in files:
        lang = language_of(path)
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        for kind in KINDS:
            by_language.setdefault(lang, []).extend(holes_in(path, text, kind))
    results = {}
    for lang, holes in sorted(by_language.items()):
        picked = {
            kind: rng.sample([h for h in holes if h.kind == kind], min(per_language, sum(h.kind == kind for h in holes)))
            for kind in KINDS
        }
        for kind, chosen in picked.items():
            if kind not in kinds:
                continue
            counts = {
                "holes": len(chosen),
                "before": {"non_empty": 0, "multi": 0, "in_scope": 0, "first_line_exact": 0},
                "after": {"non_empty": 0, "multi": 0, "in_scope": 0, "first_line_exact": 0},
                "raw": {"first_line_exact": 0},
                "per_hole": [],
            }
            for n, hole in enumerate(chosen):
                state = EditorState(f"shape/{lang}/{kind}/{n}", "hole", hole.text, hole.cursor, path=Path(hole.path).name)
                final = last_finished(service.start(state, SamplingParams(max_tokens=max_tokens), Shape(raw=True))[0])
                raw = final.text if final else ""
                counts["raw"]["first_line_exact"] += bool(hole.expected) and first_text_line(raw) == hole.expected
                shown_now = tidy(raw, hole.text, hole.cursor)
                counts["per_hole"].append(
                    {"path": hole.path, "cursor": hole.cursor, "expected": hole.expected, "raw": raw, "shown": shown_now}
                )
                for label, shown in (("before", _before_rules(raw, hole)), ("after", shown_now)):
                    c = counts[label]
                    c["non_empty"] += bool(shown.strip())
                    c["first_line_exact"] += bool(hole.expected) and first_text_line(shown) == hole.expected
                    if "\n" in shown.strip("\n") or (shown.startswith("\n") and shown.strip()):
                        c["multi"] += 1
                        c["in_scope"] += in_scope(shown, hole)
            for label in ("before", "after"):
                c = counts[label]
                c["non_empty_share"] = round(c["non_empty"] / max(1, counts["holes"]), 3)
                c["in_scope_share"] = round(c["in_scope"] / c["multi"], 3) if c["multi"] else None
            for label in ("before", "after", "raw"):
                c = counts[label]
                c["first_line_exact_share"] = round(c["first_line_exact"] / max(1, counts["holes"]), 3)
            results.setdefault(lang, {})[kind] = counts
            progress(f"{lang} {kind}: {counts}")
    return {"max_tokens": max_tokens, "per_language": per_language, "seed": seed, "results": results}
