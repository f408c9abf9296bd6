"""Token-level count of what a backend must prefill per request, PSM baseline versus the planner.

No model runs: a prompt's prefilled tokens are its length minus its longest common prefix with
any of the session's recent prompts (an exact prefix cache that keeps the last few). This is
the planner's own claim, free of engine speed: `fimgate bench prefill TRACE`.
"""

from __future__ import annotations

import statistics
from collections import defaultdict, deque

from fimgate.backend.base import Tokenizer
from fimgate.backend.block_tree import common_prefix
from fimgate.bench.replay.baseline import psm_prompt
from fimgate.bench.workloads.trace import TraceRequest
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.templates import FimTemplate
from fimgate.efim.window import WindowConfig

KEEP_PROMPTS = 8


def summarize(values: list[int]) -> dict:
    if not values:
        return {"p50": None, "p90": None, "mean": None}
    s = sorted(values)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "mean": round(statistics.fmean(s), 2)}


def count_prefill(
    requests: list[TraceRequest], tok: Tokenizer, template: FimTemplate, window: WindowConfig = WindowConfig()
) -> dict:
    planner = EfimPlanner(tok, template, window)
    recent: dict[tuple[str, str], deque] = defaultdict(lambda: deque(maxlen=KEEP_PROMPTS))
    out = {"psm-prefix": {"prompt": [], "prefilled": []}, "efim": {"prompt": [], "prefilled": []}}
    for r in requests:
        prompts = {
            "psm-prefix": psm_prompt(tok, template, r.text, r.cursor),
            "efim": planner.plan(EditorState("user", r.file, r.text, r.cursor, path=r.file)).prompt_ids,
        }
        for name, ids in prompts.items():
            hist = recent[(name, r.file)]
            hit = max((common_prefix(ids, h) for h in hist), default=0)
            out[name]["prompt"].append(len(ids))
            out[name]["prefilled"].append(len(ids) - hit)
            hist.append(ids)
    result = {"requests": len(requests)}
    for name, d in out.items():
        result[name] = {"prompt_tokens": summarize(d["prompt"]), "prefilled_tokens": summarize(d["prefilled"])}
    result["efim"]["classes"] = dict(planner.stats.by_class)
    result["efim"]["efim_append_share"] = round(planner.stats.by_class["efim_append"] / max(1, len(requests)), 4)
    psm_mean = result["psm-prefix"]["prefilled_tokens"]["mean"] or 1
    result["efim"]["prefilled_mean_vs_psm"] = round(result["efim"]["prefilled_tokens"]["mean"] / psm_mean, 4)
    return result
