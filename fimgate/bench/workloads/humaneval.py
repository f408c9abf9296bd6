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
    test: str
    entry_point: str

    def program(self, completion: str) -> str:
        return f"{self.prompt}{completion}{self.suffix}\n{self.test}\ncheck({self.entry_point})\n"


def default_data_dir() -> str:
    return os.environ.get("FIMGATE_HUMANEVAL", str(SHARED / "data" / "humaneval-infilling"))


def load(dataset: str, data_dir: str | None = None, limit: int | None = None) -> list[Problem]:
    if dataset not in FILES:
        raise ValueError(f"unknown dataset {dataset!r}; expected one of {', '.join(FILES)}")
    path = os.path.join(data_dir or default_data_dir(), FILES[dataset])
    if not os.path.exists(path):
        raise FileNotFoundError(f"HumanEval infilling data not found at {path}")
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append(Problem(d["task_id"], d["prompt"], d["suffix"], d["canonical_solution"], d["test"], d["entry_point"]))
    if limit is not None:
        # an even spread over the whole set, not just its first problems
        step = max(1, len(out) // limit)
        out = out[::step][:limit]
    return out
