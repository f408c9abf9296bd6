"""`fimgate bench quality`: HumanEval infilling, pass@1 / exact match / edit similarity per strategy.

Every strategy asks the same engine for the same hole; they differ in how the prompt reached
the cache:
- raw: the plain FIM prompt of the hole, cold (full prefill), the answer cut only as the set's
  scorer cuts (single-line: the first line; multi-line: up to the suffix's first line), no
  fimgate rules: the raw model;
- no-cache: the cold prompt serve builds, full prefill (the reference every reuse class is
  measured against); the same as raw unless the hole starts mid-line, where the line's typed
  text goes after <MID> (efim/planner.py: line_after_middle);
- served: what `fimgate serve` shows at its defaults. The hole as an editor holds it (an empty
  line where the missing lines go, the cursor at its start), a cold request through the
  CompletionService serve runs: its single-/multi-line decision, stops and clean-up
  (efim/postprocess.py); the shown text is inserted as it is;
- type-through: served, then the person types the first half of what was shown and the same
  service is asked there: type-through answers with the suggestion's rest (no model call) or,
  where the new place asks for another shape, the model answers. The filling is the typed half
  and that answer. Beside it, a service without type-through gets the same two requests, and the
  row counts how many answers type-through gave and how many equal the model decoding afresh;
- efim (and the shifted strategies, unperturbed): the person typed the last lines before the
  hole since the session was anchored, so the request is an EFIM append served from the cache;
- `--perturb edit-above`: the problem's file is cached first, then a line is inserted halfway
  through the prompt before asking, so everything after it reappears shifted: efim prefills it,
  shift-only re-rotates it, efim+correction:S re-rotates it and recomputes a share S of it.
Greedy decoding throughout, so differences come from the prompt and the cache alone.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from dataclasses import replace

from fimgate.backend.base import Finished, SamplingParams, last_finished
from fimgate.bench.common.paired import paired_difference
from fimgate.bench.common.similarity import edit_similarity
from fimgate.bench.quality.sandbox import run_program
from fimgate.bench.replay.strategies import Strategy
from fimgate.bench.workloads.humaneval import Problem
from fimgate.efim.languages import language_of
from fimgate.efim.planner import EditorState
from fimgate.gateway.service import CompletionService

TYPED_LINES = 2  # efim: how many lines before the hole were typed after the anchor
PERTURBATIONS = (None, "edit-above")
_users = itertools.count()


def _cut(completion: str, problem: Problem, single_line: bool) -> str:
    if single_line:
        line = completion.split("\n", 1)[0]
        return line + "\n"
    first = next((ln for ln in problem.suffix.splitlines() if ln.strip()), None)
    if first is not None and first in completion:
        completion = completion[: completion.index(first)]
    if not completion.endswith("\n"):
        completion = completion[: completion.rfind("\n") + 1] if "\n" in completion else completion + "\n"
    return completion


def edit_above(problem: Problem) -> Problem:
    """Insert a comment line halfway through the prompt: everything after it moves down."""
    lines = problem.prompt.splitlines(keepends=True)
    at = max(1, len(lines) // 2)
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())] if at < len(lines) else ""
    edited = "".join(lines[:at]) + f"{indent}# note: keep this function pure\n" + "".join(lines[at:])
    return replace(problem, prompt=edited)


def complete(
    engine, strategy: Strategy, problem: Problem, single_line: bool, max_tokens: int, perturb: str | None = None
) -> tuple[str, Finished, Problem]:
    if strategy.kind == "served":
        return served(engine, strategy, problem, max_tokens, perturb)
    if strategy.kind == "type-through":
        return typed_through(engine, strategy, problem, max_tokens, perturb)
    sampling = SamplingParams(max_tokens=max_tokens, stop=("\n",) if single_line else ("\n\n\n", "\ndef ", "\nif __name__"))
    warm_sampling = SamplingParams(max_tokens=0)
    user, doc = f"q{next(_users)}", problem.task_id
    asked = problem
    if perturb == "edit-above":
        asked = edit_above(problem)
        if strategy.kind not in ("no-cache", "raw"):  # the unedited file was cached first
            last_finished(
                engine.generate(
                    strategy.plan(
                        user,
                        EditorState(user, doc, problem.prompt + problem.suffix, len(problem.prompt), path=problem.path),
                        warm_sampling,
                    )
                )
            )
    elif perturb is not None:
        raise ValueError(f"unknown perturbation {perturb!r}; known: edit-above")
    elif strategy.kind not in ("no-cache", "raw", "psm-prefix"):
        start = len(problem.prompt)
        for _ in range(TYPED_LINES + 1):
            start = problem.prompt.rfind("\n", 0, max(0, start - 1)) + 1
        typed_from = problem.prompt[:start]
        last_finished(
            engine.generate(
                strategy.plan(
                    user, EditorState(user, doc, typed_from + problem.suffix, len(typed_from), path=problem.path), warm_sampling
                )
            )
        )
    text = asked.prompt + asked.suffix
    state = EditorState(user, doc, text, len(asked.prompt), path=problem.path)
    final = last_finished(engine.generate(strategy.plan(user, state, sampling)))
    return _cut(final.text, asked, single_line), final, asked


def served(engine, strategy: Strategy, problem: Problem, max_tokens: int, perturb: str | None) -> tuple[str, Finished, Problem]:
    """What serve shows for the hole, and the text to put in it (the shown text and the empty
    line's newline)."""
    if perturb is not None:
        raise ValueError("the served row is a cold request: run it without --perturb")
    if strategy.service is None:
        strategy.service = CompletionService(engine, strategy.planner)
    text = problem.prompt + "\n" + problem.suffix
    state = EditorState(f"q{next(_users)}", problem.task_id, text, len(problem.prompt), path=problem.path or "problem.py")
    final = last_finished(strategy.service.start(state, SamplingParams(max_tokens=max_tokens))[0])
    return final.text + "\n", final, problem


def typed_through(
    engine, strategy: Strategy, problem: Problem, max_tokens: int, perturb: str | None
) -> tuple[str, Finished, Problem]:
    """The served hole; the person types the first half of the suggestion and asks again. The
    filling: the typed half, the answer and the empty line's newline. strategy.tally counts the
    keys type-through answered and those identical to a service without it (decoding afresh);
    strategy.afresh gets that service's filling."""
    if perturb is not None:
        raise ValueError("the type-through row starts from a cold request: run it without --perturb")
    if strategy.service is None:
        strategy.service = CompletionService(engine, strategy.planner)
        own = Strategy("served", strategy.tok, strategy.template).planner  # its own sessions
        strategy.plain = CompletionService(engine, own, type_through=False)
    text = problem.prompt + "\n" + problem.suffix
    user = f"q{next(_users)}"
    first = EditorState(user, problem.task_id, text, len(problem.prompt), path=problem.path or "problem.py")
    sampling = SamplingParams(max_tokens=max_tokens)
    made = last_finished(strategy.service.start(first, sampling)[0])
    if len(made.text) < 2:
        strategy.afresh.append(made.text + "\n")
        return made.text + "\n", made, problem
    k = len(made.text) // 2
    typed = replace(first, text=problem.prompt + made.text[:k] + "\n" + problem.suffix, cursor=len(problem.prompt) + k)
    quick = last_finished(strategy.service.start(typed, sampling)[0])
    last_finished(strategy.plain.start(first, sampling)[0])  # the same session history, no type-through
    afresh = last_finished(strategy.plain.start(typed, sampling)[0])
    strategy.tally["typed"] += 1
    strategy.afresh.append(made.text[:k] + afresh.text + "\n")
    if quick.usage.type_through:
        strategy.tally["type_through"] += 1
        strategy.tally["same_as_decoding_afresh"] += quick.text == afresh.text
    return made.text[:k] + quick.text + "\n", quick, problem


def run_quality(
    engine,
    template,
    problems: list[Problem],
    strategies: list[str],
    single_line: bool,
    max_tokens: int = 128,
    perturb: str | None = None,
    progress: bool = True,
    keep_completions: bool = False,
) -> dict:
    result = {}
    for name in strategies:
        strategy = Strategy(name, engine.tokenizer, template)
        engine.reset()
        rows = []
        t0 = time.time()
        for i, p in enumerate(problems):
            completion, final, asked = complete(engine, strategy, p, single_line, max_tokens, perturb)
            rows.append(
                {
                    **_scored(asked, completion, p.canonical),
                    "prefilled": final.usage.prefilled_tokens,
                    "cached": final.usage.cached_tokens,
                    "shifted": final.usage.shifted_cached_tokens,
                    "recomputed": final.usage.recomputed_tokens,
                    "completion": completion,
                }
            )
            if progress and sys.stderr.isatty():
                print(f"\r{name}: {i + 1}/{len(problems)}", end="", file=sys.stderr)
        if progress and sys.stderr.isatty():
            print(file=sys.stderr)
        n = len(rows)
        tested = all(r["passed"] is not None for r in rows)
        result[name] = {
            "problems": n,
            "pass@1": round(100 * sum(r["passed"] for r in rows) / n, 2) if tested else None,
            "exact_match": round(100 * sum(r["exact"] for r in rows) / n, 2),
            "edit_similarity": round(statistics.fmean(r["similarity"] for r in rows), 2),
            "prefilled_tokens_mean": round(statistics.fmean(r["prefilled"] for r in rows), 1),
            "cached_tokens_mean": round(statistics.fmean(r["cached"] for r in rows), 1),
            "shifted_tokens_mean": round(statistics.fmean(r["shifted"] for r in rows), 1),
            "recomputed_tokens_mean": round(statistics.fmean(r["recomputed"] for r in rows), 1),
            "seconds": round(time.time() - t0, 1),
        }
        if strategy.kind == "type-through":
            result[name]["type_through"] = {**strategy.tally, **_afresh(strategy.afresh, rows, problems)}
        result[name]["_completions"] = [r["completion"] for r in rows]
        result[name]["_scores"] = {k: [100.0 * float(r[k]) for r in rows] for k in ("passed", "exact") if tested or k != "passed"}
        result[name]["_scores"]["similarity"] = [float(r["similarity"]) for r in rows]
    first = strategies[0]
    base = result[first]["_completions"]
    for s in strategies:
        comp = result[s].pop("_completions")
        result[s][f"same_completion_as_{first}"] = same_share(comp, base)
        if s != first:  # hole by hole against the first row, with a 95% bootstrap interval
            for key, label in (("passed", "pass@1"), ("exact", "exact_match"), ("similarity", "edit_similarity")):
                if key in result[s]["_scores"]:
                    diff = paired_difference(result[s]["_scores"][key], result[first]["_scores"][key])
                    result[s][f"{label}_minus_{first}"] = diff
        if keep_completions:
            result[s]["completions"] = comp
    if any(p.path for p in problems):  # holes in real files: each language on its own as well
        for s in strategies:
            result[s]["by_language"] = _by_language(problems, result[s]["_scores"], result[first]["_scores"], s != first)
    for s in strategies:
        result[s].pop("_scores")
    return result


def _by_language(problems: list[Problem], scores: dict, reference: dict, paired: bool) -> dict:
    """Exact match and edit similarity per language, with the paired difference to the first row."""
    out = {}
    for lang in sorted({language_of(p.path) for p in problems}):
        at = [i for i, p in enumerate(problems) if language_of(p.path) == lang]
        row = {"problems": len(at)}
        for key, label in (("exact", "exact_match"), ("similarity", "edit_similarity")):
            mine = [scores[key][i] for i in at]
            row[label] = round(statistics.fmean(mine), 2)
            if paired:
                row[f"{label}_minus_first"] = paired_difference(mine, [reference[key][i] for i in at])
        out[lang] = row
    return out


def _scored(asked: Problem, completion: str, canonical: str) -> dict:
    return {
        "passed": run_program(asked.program(completion)) if asked.test else None,
        "exact": completion.strip() == canonical.strip(),
        "similarity": edit_similarity(completion.strip(), canonical.strip()),
    }


def _afresh(fillings: list[str], rows: list[dict], problems: list[Problem]) -> dict:
    """The type-through row against the model decoding afresh at the same places, hole by hole."""
    fresh = [_scored(p, f, p.canonical) for p, f in zip(problems, fillings)]
    tested = all(r["passed"] is not None for r in fresh)
    out = {"decoding_afresh_pass@1": round(100 * sum(r["passed"] for r in fresh) / len(fresh), 2) if tested else None}
    for key, label in (("passed", "pass@1"), ("exact", "exact_match"), ("similarity", "edit_similarity")):
        if key == "passed" and not tested:
            continue
        scale = 1.0 if key == "similarity" else 100.0
        ours, theirs = [scale * float(r[key]) for r in rows], [scale * float(r[key]) for r in fresh]
        out[f"{label}_minus_decoding_afresh"] = paired_difference(ours, theirs)
    return out


def same_share(completions: list[str], reference: list[str]) -> float:
    """Percent of problems whose completion is identical to the reference run's."""
    return round(100 * sum(a == b for a, b in zip(completions, reference)) / len(reference), 2)
