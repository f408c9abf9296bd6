"""The accepting typist's rule: how much of a suggestion on screen a person takes, given what they
are about to type.

A person who sees ghost text that is what they were going to type takes it: all of it with Tab when
their next text starts with the whole suggestion; otherwise as many of VS Code's accept-word presses
(Ctrl+Right, `editor.action.inlineSuggest.acceptNextWord`) as stay within what they would type. Only
when that saves keys: the keys it covers (`keys`: how many of the person's keys the first n
characters of `upcoming` are - an editor's auto-indent is nobody's key) must outnumber the presses.
Nothing that the person would not have typed is ever accepted: accepted text is always a beginning
of `upcoming`.

One accept-word press takes, as VS Code's InlineCompletionsModel.acceptNextWord does, the word at the
start of the rest (VS Code's default word definition), or the run of other characters up to the next
word, or the white space up to its end where that comes first; a press that would take the whole rest
is a Tab. llama.vscode binds Ctrl+Right to its own acceptFirstWord instead (`space_word_end`: the
first line's leading spaces and what follows up to a space, once a suggestion: a second press
would insert the same word again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

# VS Code's DEFAULT_WORD_REGEXP (src/vs/editor/common/core/wordHelper.ts), which Python's language
# configuration keeps
WORD = re.compile(r"(-?\d*\.\d\w*)|([^`~!@#$%^&*()\-=+\[{\]}\\|;:'\",.<>/?\s]+)")
SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Accept:
    chars: int  # characters of the suggestion taken (a beginning of what the person would type)
    presses: int  # keys pressed to take them (Tab: 1; accept-word: one a press)
    kind: str  # "whole" (Tab) or "words"


def next_word_end(text: str) -> int:
    """How many characters of `text` one accept-word press takes (VS Code's acceptNextWord)."""
    m = WORD.search(text)
    if m is None:
        end = len(text)
    else:
        end = m.end() if m.start() == 0 else m.start()
    s = SPACE.search(text)
    if s is not None and s.end() < end:
        end = s.end()
    return max(1, end) if text else 0


def space_word_end(text: str) -> int:
    """How many characters of `text` llama.vscode's acceptFirstWord (Ctrl+Right) inserts."""
    lines = text.split("\n")
    first = lines[0]
    word = first[: len(first) - len(first.lstrip(" "))] + (first.lstrip(" ").split(" ")[0])
    if not word and len(lines) > 1:
        second = lines[1]
        return 1 + len(second) - len(second.lstrip(" ")) + len(second.lstrip(" ").split(" ")[0])
    return len(word)


@dataclass(frozen=True)
class WordRule:
    """An editor's accept-word: the characters one press takes, and how many presses a suggestion allows."""

    end: Callable[[str], int] = next_word_end
    max_presses: int | None = None


VSCODE = WordRule()
LLAMA_VSCODE = WordRule(space_word_end, max_presses=1)


def accept(shown: str, upcoming: str, keys: Callable[[int], int] = lambda n: n, words: WordRule = VSCODE) -> Accept | None:
    """What the person takes of `shown` when they are about to type `upcoming`; None: nothing."""
    if not shown or not shown.strip():
        return None
    if upcoming.startswith(shown):
        return Accept(len(shown), 1, "whole") if keys(len(shown)) > 1 else None
    taken = presses = 0
    while taken < len(shown) and (words.max_presses is None or presses < words.max_presses):
        step = words.end(shown[taken:])
        if step <= 0 or not upcoming.startswith(shown[: taken + step]):
            break
        taken += step
        presses += 1
    if keys(taken) > presses:
        return Accept(taken, presses, "words")
    return None
