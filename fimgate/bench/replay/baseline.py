"""The baseline every strategy is compared with: what editors send today.

llama.vscode-style window: 256 lines before the cursor line, the cursor line split at the
cursor, 64 lines after, re-cut on every request, laid out PSM (`<PRE> P <SUF> S <MID>`). With
exact prefix caching (vLLM, SGLang) everything from the cursor onwards is prefilled again on
every keystroke, and every Enter deep in a file moves the window's head.
"""

from __future__ import annotations

from fimgate.backend.base import Tokenizer
from fimgate.efim.templates import FimTemplate

PREFIX_LINES = 256
SUFFIX_LINES = 64


def psm_window(text: str, cursor: int) -> tuple[str, str]:
    line_start = text.rfind("\n", 0, cursor) + 1
    start = line_start
    for _ in range(PREFIX_LINES):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    end = cursor
    for _ in range(SUFFIX_LINES + 1):
        nl = text.find("\n", end)
        if nl == -1:
            end = len(text)
            break
        end = nl + 1
    return text[start:cursor], text[cursor:end]


def psm_prompt(tok: Tokenizer, template: FimTemplate, text: str, cursor: int) -> tuple[int, ...]:
    """PSM prompt ids; for a family without FIM tokens, its file separator marks the three parts."""
    prefix, suffix = psm_window(text, cursor)
    pre, suf, mid = (
        (template.prefix, template.suffix, template.middle)
        if template.prefix
        else (template.file_sep, template.file_sep, template.file_sep)
    )
    ids = [tok.token_id(pre)] + tok.encode(prefix) + [tok.token_id(suf)] + tok.encode(suffix) + [tok.token_id(mid)]
    return tuple(ids)
