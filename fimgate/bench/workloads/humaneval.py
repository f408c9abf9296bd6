"""HumanEval infilling problems (../shared/data/humaneval-infilling, MIT)."""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass

from fimgate.bench.common.checkout import SHARED

FILES = {"single-line": "HumanEval-SingleLineInfilling.jsonl.gz", "multi-line": "HumanEval-MultiLineInfilling.jsonl.gz"}


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str  # text before the hole
    suffix: str
    canonical: str
    test: str  # "": none (holes cut from real files: pass@1 is not reported)
    entry_point: str
    path: str = ""  # the file's name, where the hole is in a real file

    def program(self, completion: str) -> str:
        return f"{self.prompt}{completion}{self.suffix}\n{self.test}\ncheck({self.entry_point})\n"


def default_data_dir() -> str:
    return os.environ.get("FIMGATE_HUMANEVAL", str(SHARED / "data" / "humaneval-infilling"))


def mid_line(problem: Problem) -> Problem | None:
    """The single-line hole with the person halfway through typing it: the line's indentation and
    the first half of its text (cut at a character, mid-token as often as not) join the prompt; the
    rest of the line is the hole. None for a line with fewer than 2 characters of text."""
    line = problem.canonical.rstrip("\n")
    text = line.lstrip(" \t")
    if len(text) < 2:
        return None
    k = len(line) - len(text) + len(text) // 2
    return Problem(
        problem.task_id, problem.prompt + line[:k], problem.suffix, problem.canonical[k:], problem.test, problem.entry_point
    )


def load(dataset: str, data_dir: str | None = None, limit: int | None = None) -> list[Problem]:
    """dataset: single-line, multi-line, or mid-line (single-line holes begun: mid_line)."""
    if dataset == "mid-line":
        begun = [p for p in map(mid_line, load("single-line", data_dir)) if p is not None]
        return _spread(begun, limit)
    if dataset not in FILES:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {', '.join(FILES)}, mid-line")
    path = os.path.join(data_dir or default_data_dir(), FILES[dataset])
    if not os.path.exists(path):
        raise FileNotFoundError(f"HumanEval infilling data not found at {path}")
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append(Problem(d["task_id"], d["prompt"], d["suffix"], d["canonical_solution"], d["test"], d["entry_point"]))
    return _spread(out, limit)


def _spread(problems: list[Problem], limit: int | None) -> list[Problem]:
    """An even spread over the whole set, not just its first problems."""
    if limit is None:
        return problems
    return problems[:: max(1, len(problems) // limit)][:limit]
