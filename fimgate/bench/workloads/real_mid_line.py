"""Holes that start mid-line in real files, for `fimgate bench quality --dataset real-mid-line`:
the person is halfway through typing a line of code people wrote.

A hole is a line of code (not blank, not a comment, at least MIN_TEXT characters of text) cut as
HumanEval's mid-line set cuts its lines (humaneval.mid_line): the indentation and the first half
of the text (at a character, mid-token as often as not) end the prompt, the rest of the line is
what is missing, and the file goes on after it. Files come from real_sources.py's folders, one
folder per language; holes are picked at random (seeded) and spread evenly over the languages.
No tests exist for these, so pass@1 is not reported: exact match and edit similarity are.

    python -m fimgate.bench.workloads.real_sources out/sources
    fimgate bench quality --dataset real-mid-line --sources out/sources --limit 280 --strategies raw,no-cache,efim
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from fimgate.bench.workloads.humaneval import Problem
from fimgate.efim.languages import EXTENSIONS, language_of

MIN_TEXT = 8  # characters of text a line needs (shorter ones are `}`, `end`, `pass`: nothing to finish)
COMMENTS = ("#", "//", "*", "/*", "--", ";")
MAX_FILE_CHARS = 400_000


def code_files(folders: list[str]) -> list[str]:
    """Every file of a known programming language under the folders, in a stable order."""
    out = []
    for folder in folders:
        for root, dirs, names in os.walk(folder):
            dirs.sort()
            out += sorted(
                os.path.join(root, n) for n in names if EXTENSIONS.get(os.path.splitext(n)[1].lower(), "markdown") != "markdown"
            )
    return out


def _holes_in(path: str, text: str) -> list[Problem]:
    holes, at = [], 0
    for number, line in enumerate(text.split("\n")):
        start, at = at, at + len(line) + 1
        body = line.strip()
        if len(body) < MIN_TEXT or body.startswith(COMMENTS) or at > len(text):
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        k = indent + len(line.rstrip()[indent:]) // 2
        holes.append(
            Problem(
                task_id=f"{path}:{number + 1}",
                prompt=text[: start + k],
                suffix=text[start + len(line) + 1 :],
                canonical=line[k:].rstrip() + "\n",
                test="",
                entry_point="",
                path=os.path.basename(path),
            )
        )
    return holes


def load(folders: list[str], limit: int, seed: int = 0) -> list[Problem]:
    """`limit` holes, as evenly over the languages found as their files allow."""
    by_language: dict[str, list[str]] = {}
    for path in code_files(folders):
        by_language.setdefault(language_of(path), []).append(path)
    if not by_language:
        raise ValueError("no source files of a known language under " + ", ".join(folders))
    rng = random.Random(seed)
    per = max(1, limit // len(by_language))
    out: list[Problem] = []
    for lang in sorted(by_language):
        holes = []
        for path in by_language[lang]:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
            if len(text) <= MAX_FILE_CHARS:
                holes += _holes_in(path, text)
        out += rng.sample(holes, min(per, len(holes)))
    return out[:limit]
