"""`fimgate bench quality --dataset repo`: repository-level completion from real history, with
and without context from other files, and what reusing that context's KV costs and changes.

Holes and the context a client would send come from fimgate/bench/workloads/repo_holes.py. Rows:

    no-context         the current file only, full prefill
    context            the context chunks before the file, full prefill (the exact reference)
    reuse-add[:S]      the session was anchored with the context lacking its newest chunk, then
                       the chunk arrives (the person came from another file): a re-anchor whose
                       unchanged text is reused wherever it landed - keys re-rotated, a share S of
                       the shifted tokens recomputed (default: the served correction budget)
    reuse-add-visited[:S]  reuse-add, where the person had the new chunk's file open just before
                       (its cursor in the chunk's middle): the chunk is placed from that file's
                       cached prompt (a reuse hint from another session) instead of prefilled
    reuse-drop[:S]     anchored with one more chunk at the front (the ring evicted its oldest)
    reuse-reorder[:S]  anchored with the chunks in reverse order: the planner shows chunks in the
                       order they first came (efim/chunk_order.py), so the request's prompt is
                       the anchor's, a prefix hit (a hole with one chunk has no order: an add)

Single-line, greedy: differences come from the prompt and the cache alone. Reported per row:
exact match, edit similarity, identifier match (the completion's identifiers are the answer's,
in order: CrossCodeEval's ID-EM), and tokens: prompt, prefix-cached, shifted, recomputed,
prefilled, and computed share = (prefilled + recomputed) / prompt; and each row's edit similarity
minus the reference's (context, else the first row), hole by hole, with a 95% bootstrap interval.
"""

from __future__ import annotations

import statistics
import sys
import time

from fimgate.backend.base import SamplingParams, last_finished
from fimgate.bench.common.paired import paired_difference
from fimgate.bench.common.similarity import edit_similarity
from fimgate.bench.replay.strategies import Strategy
from fimgate.bench.workloads.repo_holes import IDENT, RepoHole
from fimgate.efim.planner import EditorState
from fimgate.efim.templates import ContextChunk
from fimgate.gateway.build import CORRECTION_SHARE

ROWS = ("no-context", "context", "reuse-add", "reuse-add-visited", "reuse-drop", "reuse-reorder")
CHANGES = ("add", "drop", "reorder")


def parse_row(name: str) -> tuple[str, float | None]:
    """'reuse-add:0.3' -> ('reuse-add', 0.3); full-prefill rows have no share."""
    base, _, share = name.partition(":")
    if base not in ROWS:
        raise ValueError(f"unknown row {name!r}; known: {', '.join(ROWS)} (reuse rows take :SHARE)")
    if not base.startswith("reuse-"):
        if share:
            raise ValueError(f"{base!r} is a full prefill; only reuse rows take a share")
        return base, None
    value = float(share) if share else CORRECTION_SHARE
    if not 0 <= value <= 1:
        raise ValueError("a recompute share is in [0, 1]")
    return base, value


def anchored_with(change: str, context: tuple[ContextChunk, ...], other: ContextChunk) -> tuple[ContextChunk, ...]:
    """The context the session had before one change made it `context`."""
    if change in ("add", "add-visited"):
        return context[:-1]
    if change == "drop":
        return (other, *context)
    if len(context) < 2:  # nothing to reorder: the nearest change is an add
        return context[:-1]
    return tuple(reversed(context))


def identifiers_match(completion: str, answer: str) -> bool:
    return IDENT.findall(completion) == IDENT.findall(answer)


def run_repo_quality(
    engine, template, holes: list[RepoHole], rows: list[str], max_tokens: int = 48, progress: bool = True
) -> dict:
    result = {}
    ask = SamplingParams(max_tokens=max_tokens, stop=("\n",))
    warm = SamplingParams(max_tokens=0)
    for row in rows:
        kind, share = parse_row(row)
        strategy = Strategy("no-cache" if share is None else f"efim+correction:{share}", engine.tokenizer, template)
        engine.reset()
        out, t0 = [], time.time()
        for i, h in enumerate(holes):
            user, text, cursor = f"h{i}", h.prefix + h.suffix, len(h.prefix)
            context = () if kind == "no-context" else h.context
            if share is not None:
                other = holes[i - 1].context[0] if holes[i - 1].context else ContextChunk("notes.md", "notes\n")
                before = anchored_with(kind.removeprefix("reuse-"), h.context, other)
                if kind == "reuse-add-visited" and h.context:  # the file the chunk comes from, open just before
                    chunk = h.context[-1]
                    visited = EditorState(user, chunk.path, chunk.text, len(chunk.text) // 2, path=chunk.path)
                    last_finished(engine.generate(strategy.plan(user, visited, warm)))
                state = EditorState(user, h.path, text, cursor, path=h.path, context=before)
                last_finished(engine.generate(strategy.plan(user, state, warm)))
            state = EditorState(user, h.path, text, cursor, path=h.path, context=context)
            final = last_finished(engine.generate(strategy.plan(user, state, ask)))
            completion = final.text.split("\n", 1)[0].strip()
            u = final.usage
            out.append(
                {
                    "completion": completion,
                    "exact": completion == h.answer,
                    "similarity": edit_similarity(completion, h.answer),
                    "identifiers": identifiers_match(completion, h.answer),
                    "prompt": u.prompt_tokens,
                    "prefix_cached": u.prefix_cached_tokens,
                    "shifted": u.shifted_cached_tokens,
                    "recomputed": u.recomputed_tokens,
                    "prefilled": u.prefilled_tokens,
                }
            )
            if progress and sys.stderr.isatty():
                print(f"\r{row}: {i + 1}/{len(holes)}", end="", file=sys.stderr)
        if progress and sys.stderr.isatty():
            print(file=sys.stderr)
        result[row] = summarize(out)
        result[row]["seconds"] = round(time.time() - t0, 1)
    reference = "context" if "context" in result else rows[0]
    for row in rows:
        same = [a == b for a, b in zip(result[row]["completions"], result[reference]["completions"])]
        result[row][f"same_completion_as_{reference}"] = round(100 * sum(same) / max(1, len(same)), 1)
        if row != reference:
            diff = paired_difference(result[row]["similarities"], result[reference]["similarities"])
            result[row][f"edit_similarity_minus_{reference}"] = diff
    return result


def summarize(rows: list[dict]) -> dict:
    def mean(key: str) -> float:
        return round(statistics.fmean(r[key] for r in rows), 1) if rows else 0.0

    computed = [(r["prefilled"] + r["recomputed"]) / max(1, r["prompt"]) for r in rows]
    return {
        "holes": len(rows),
        "exact_match": round(100 * sum(r["exact"] for r in rows) / max(1, len(rows)), 1),
        "edit_similarity": round(statistics.fmean(r["similarity"] for r in rows), 1) if rows else 0.0,
        "identifier_match": round(100 * sum(r["identifiers"] for r in rows) / max(1, len(rows)), 1),
        "prompt_tokens_mean": mean("prompt"),
        "prefix_cached_tokens_mean": mean("prefix_cached"),
        "shifted_tokens_mean": mean("shifted"),
        "recomputed_tokens_mean": mean("recomputed"),
        "prefilled_tokens_mean": mean("prefilled"),
        "computed_share_mean": round(statistics.fmean(computed), 3) if rows else 0.0,
        "completions": [r["completion"] for r in rows],
        "similarities": [r["similarity"] for r in rows],
    }
