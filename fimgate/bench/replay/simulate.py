"""`fimgate bench replay`: replay keystroke traces against the engine, strategies side by side.

Simulated time, real compute. Each request fires at (last key + debounce); the engine really
runs it through the CompletionService `fimgate serve` runs (the same single/multi-line decision,
stop rules, clean-up, early stop, with what the VS Code extension asks: 48 tokens, a 200 ms
budget), to the end, and its real times are placed on the trace's clock. "complete" is the time
until the suggestion is final, which is what an editor waits for before it shows it. One engine
serves everyone, so a request that arrives while another runs waits,
and its time to first token includes that wait. A person's next key supersedes their request
(as the gateway's cancel-previous does): a request superseded before it starts is dropped; one
superseded while running counts as cancelled and holds the engine only until that key (or
until its first token, since a prefill cannot be interrupted). A
request whose first token comes after the next key is late; its text is never shown.

    t:  key ... [debounce] req ---queue--- start ==prefill== first token --decode-- end
                                            <----------- ttft (from req) ------>
"""

from __future__ import annotations

import heapq
import math
import statistics
import sys
import time
from dataclasses import dataclass, field, replace

from fimgate.backend.base import FimPlan, SamplingParams, last_finished
from fimgate.backend.block_tree import common_prefix
from fimgate.backend.embedded.scheduler import PREFILL_CHUNK_TOKENS
from fimgate.bench.replay.strategies import Strategy, served
from fimgate.bench.workloads.trace import TraceRequest
from fimgate.efim.planner import EditorState

# what the VS Code extension asks for (vscode-extension/package.json: maxTokens, maxPredictMs); the
# service adds the newline stop where it decides a single line
REPLAY_SAMPLING = SamplingParams(max_tokens=48, max_predict_ms=200)


@dataclass
class Outcome:
    user: int
    ttft_ms: float | None
    latency_ms: float | None
    late: bool
    cancelled: bool
    dropped: bool
    prompt_tokens: int = 0
    prefix_cached: int = 0
    shifted_cached: int = 0
    recomputed: int = 0
    prefilled: int = 0
    reuse_class: str = ""
    completion: str = ""
    typed_next: str = ""
    prewarm: bool = False
    index: int = -1  # the request's index in the trace, to compare strategies request by request
    queued_ms: float | None = None  # from the request to its start on the engine (replay only)
    after_unfinished_warmup: bool = False  # the person's first request to run after their warm-up was cut short
    completion_id: str = ""  # the gateway's id for it (live replays: acceptance verdicts name it)
    completion_tokens: int = 0
    t_ms: float | None = None  # when the request was made, on the replay's clock
    draft_tokens: int = 0  # speculative decoding: draft tokens run
    accepted_draft_tokens: int = 0  # ... and kept


def user_slices(requests: list[TraceRequest], users: int, time_scale: float = 1.0) -> list[list[TraceRequest]]:
    """K people on K consecutive slices of the trace, each shifted to start at t=0.
    `time_scale` stretches every gap (2.0: the same keystrokes at half the pace), so that many
    people can share one small engine without saturating it."""
    n = len(requests) // users
    out = []
    for k in range(users):
        part = requests[k * n : (k + 1) * n]
        if not part:
            continue
        t0 = part[0].t_ms - 1
        at = lambda t: None if t is None else (t - t0) * time_scale  # noqa: E731
        out.append([replace(r, t_ms=at(r.t_ms), next_event_ms=at(r.next_event_ms)) for r in part])
    return out


@dataclass
class _Warmup:
    """A warm-up in progress: it prefills its prompt chunk by chunk."""

    t_req: float
    k: int
    i: int
    plan: FimPlan | None = None
    ends: list[int] = field(default_factory=list)  # the chunks' prompt lengths still to run
    started: float | None = None  # the clock at its first chunk
    prefix_cached: int = 0  # of the first chunk: what the warm-up found cached
    shifted: int = 0
    prefilled: int = 0
    recomputed: int = 0


def replay_strategy(
    engine,
    strategy: Strategy,
    slices: list[list[TraceRequest]],
    sampling: SamplingParams = REPLAY_SAMPLING,
    progress=None,
    warmup_yield_ms: float | None = None,
) -> list[Outcome]:
    """Run every request of every person on one engine, in the order a scheduler would.

    warmup_yield_ms None (FIFO, the default): requests run in arrival order, a warm-up to its
    end. Otherwise what the gateway did before the batching scheduler: warm-ups prefill in
    PREFILL_CHUNK_TOKENS-token chunks and are ordered as if they had arrived warmup_yield_ms
    later, so typing that comes within that time goes first (math.inf: typing always first); a
    person's typing request drops their own warm-up's chunks still queued, in the same file,
    and takes the warm-up's place in line when that is earlier."""
    pending = [(r.t_ms, k, i) for k, part in enumerate(slices) for i, r in enumerate(part)]
    heapq.heapify(pending)
    typing: list = []  # arrived typing requests, a heap of (place in line, arrival, k, i)
    warmups: list[_Warmup] = []  # arrived warm-ups, in arrival order
    delay = 0.0 if warmup_yield_ms is None else warmup_yield_ms
    owed: set[tuple[int, str]] = set()  # (person, file) whose warm-up a key cut short: their next run pays
    now = 0.0
    outcomes = []
    service = served(strategy, engine)
    while pending or typing or warmups:
        while pending and pending[0][0] <= now:
            t, k, i = heapq.heappop(pending)
            if slices[k][i].prewarm:
                warmups.append(_Warmup(t, k, i))
                continue
            place = t
            if warmup_yield_ms is not None:  # the gateway's cancel-previous, per (user, file)
                for w in [w for w in warmups if w.k == k and slices[k][w.i].file == slices[k][i].file]:
                    warmups.remove(w)
                    if w.plan is None:  # the gateway planned it on arrival: its anchor is the session's
                        _plan_warmup(strategy, slices[k][w.i], w, whole=False)
                    outcomes.append(_warmup_outcome(w, now))
                    owed.add((k, slices[k][i].file))
                    place = min(place, w.t_req + delay)  # the key takes its warm-up's place in line
            heapq.heappush(typing, (place, t, k, i))
        if not typing and not warmups:
            now = pending[0][0]
            continue
        if typing and (not warmups or typing[0][0] < warmups[0].t_req + delay):
            _, t_req, k, i = heapq.heappop(typing)
            now = _run_typing(service, slices[k][i], k, t_req, now, sampling, outcomes)
            if not outcomes[-1].dropped and (k, slices[k][i].file) in owed:
                outcomes[-1].after_unfinished_warmup = True
                owed.discard((k, slices[k][i].file))
        else:
            w = warmups[0]
            if w.plan is None:
                _plan_warmup(strategy, slices[w.k][w.i], w, whole=warmup_yield_ms is None)
            now = _run_warmup_chunk(engine, w, now)
            if w.ends:
                continue
            warmups.pop(0)
            outcomes.append(_warmup_outcome(w, now))
        if progress:
            progress(len(outcomes))
    return outcomes


def chunk_ends(num_tokens: int, chunk: int = PREFILL_CHUNK_TOKENS) -> list[int]:
    """Where a serial warm-up's chunks end: growing prefixes of its prompt."""
    return list(range(chunk, num_tokens, chunk)) + [num_tokens]


def _plan_warmup(strategy: Strategy, r: TraceRequest, w: _Warmup, whole: bool) -> _Warmup:
    """Plan a warm-up (at its first chunk, or when its owner's key cancels it: the gateway plans
    on arrival, so its anchor is the session's from then on, whether its chunks ran or not)."""
    state = EditorState(f"u{w.k}", r.file, r.text, r.cursor, path=r.file, context=r.context)
    w.plan = replace(strategy.plan(f"u{w.k}", state, SamplingParams(max_tokens=0)), prewarm=True)
    n = len(w.plan.prompt_ids)
    w.ends = [n] if whole else chunk_ends(n)
    return w


def _run_warmup_chunk(engine, w: _Warmup, now: float) -> float:
    """Prefill the warm-up's next chunk; returns the new clock."""
    first = w.started is None
    if first:
        w.started = now
    end = w.ends.pop(0)
    u = last_finished(engine.generate(replace(w.plan, prompt_ids=w.plan.prompt_ids[:end], issued_at_s=now / 1000))).usage
    if first:
        w.prefix_cached, w.shifted = u.prefix_cached_tokens, u.shifted_cached_tokens
    w.prefilled += u.prefilled_tokens
    w.recomputed += u.recomputed_tokens
    return now + (u.total_ms or 0)


def _warmup_outcome(w: _Warmup, now: float) -> Outcome:
    p = w.plan
    if w.started is None:  # dropped before its first chunk
        return Outcome(w.k, None, None, False, True, True, len(p.prompt_ids), reuse_class=p.reuse_class.value, prewarm=True)
    return Outcome(
        w.k,
        None,
        now - w.started,
        False,
        bool(w.ends),
        False,
        len(p.prompt_ids),
        w.prefix_cached,
        w.shifted,
        w.recomputed,
        w.prefilled,
        p.reuse_class.value,
        prewarm=True,
    )


def _run_typing(
    service, r: TraceRequest, k: int, t_req: float, now: float, sampling: SamplingParams, outcomes: list[Outcome]
) -> float:
    """Run (or drop) one typing request that arrived at t_req; returns the new clock."""
    start = max(now, t_req)
    if r.next_event_ms is not None and r.next_event_ms <= start:
        outcomes.append(
            Outcome(k, None, None, late=True, cancelled=True, dropped=True, typed_next=r.typed_next, index=r.index, t_ms=t_req)
        )
        return now
    state = EditorState(f"u{k}", r.file, r.text, r.cursor, path=r.file, context=r.context)
    service, planning = service
    asked = planning.request(state, sampling)
    if asked is None:
        outcomes.append(not_asked(k, r, t_req))
        return now
    planning.now_s = start / 1000
    t_plan = time.perf_counter()
    events, _ = service.start(state, *asked)  # plans now, as the gateway does
    plan_ms = (time.perf_counter() - t_plan) * 1000
    plan = planning.last
    final = last_finished(events)
    u = final.usage
    ttft = None if u.ttft_ms is None else (start - t_req) + plan_ms + u.ttft_ms
    latency = (start - t_req) + plan_ms + (u.total_ms or 0)
    end = start + plan_ms + (u.total_ms or 0)
    superseded = r.next_event_ms is not None and end > r.next_event_ms
    # cancel-previous frees the engine at the next key, but not inside a prefill: the
    # engine looks at its cancel token between tokens only
    first = start + plan_ms + (u.ttft_ms or 0)
    late = ttft is None or (r.next_event_ms is not None and t_req + ttft > r.next_event_ms)
    outcomes.append(
        Outcome(
            k,
            ttft,
            latency,
            late,
            superseded,
            False,
            u.prompt_tokens,
            u.prefix_cached_tokens,
            u.shifted_cached_tokens,
            u.recomputed_tokens,
            u.prefilled_tokens,
            "type-through" if u.type_through else plan.reuse_class.value,  # type-through: no plan made
            final.text,
            r.typed_next,
            index=r.index,
            queued_ms=start - t_req,
            t_ms=t_req,
            completion_tokens=u.completion_tokens,
            draft_tokens=u.draft_tokens,
            accepted_draft_tokens=u.accepted_draft_tokens,
        )
    )
    return max(first, min(end, r.next_event_ms)) if superseded else end


def not_asked(k: int, r: TraceRequest, t_req: float) -> Outcome:
    """A key the strategy's client sends no request for (llama.vscode with text right of the
    cursor): nothing is shown for it."""
    return Outcome(
        k,
        None,
        None,
        late=True,
        cancelled=False,
        dropped=True,
        reuse_class="not-asked",
        typed_next=r.typed_next,
        index=r.index,
        t_ms=t_req,
    )


def _pct(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p90": None, "p99": None}
    s = sorted(values)
    pick = lambda q: round(s[min(len(s) - 1, int(q * len(s)))], 1)  # noqa: E731
    return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99)}


def _complete(o: Outcome) -> bool:
    """Its suggestion was complete before the person's next key."""
    return not (o.dropped or o.cancelled or o.latency_ms is None)


def _pct_censored(outcomes: list[Outcome], complete: bool = False) -> dict:
    """TTFT percentiles over every typing request; a request superseded before it ran never
    showed anything, so it sorts last and a percentile that lands on it reads None. (Percentiles
    over the requests that ran alone flatter a strategy that drops most of them.) complete: the
    time until the suggestion is complete (what an editor waits for before it shows anything);
    one superseded before then sorts last too."""
    if not outcomes:
        return {"p50": None, "p90": None, "p99": None}
    if complete:
        s = sorted(o.latency_ms if _complete(o) else math.inf for o in outcomes)
    else:
        s = sorted(math.inf if o.dropped or o.ttft_ms is None else o.ttft_ms for o in outcomes)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {q: None if math.isinf(pick(f)) else round(pick(f), 1) for q, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))}


READABLE_WINDOW_MS = 100.0  # a request with less than this before the next key can hardly be read anyway


def complete_in_readable_windows(outcomes: list[Outcome], windows: dict[int, float], min_ms: float = READABLE_WINDOW_MS) -> dict:
    """Time to the complete suggestion over the typing requests that had at least `min_ms` before
    the person's next key (`windows`: request index -> next key - request; the last has none, so
    it counts). Over all requests no engine has a finite p99 on a fast typist's trace: 5.7% of
    flask-60's requests have under 50 ms. One superseded before complete still sorts last."""
    chosen = [o for o in outcomes if not o.prewarm and windows.get(o.index, math.inf) >= min_ms]
    return {
        "min_window_ms": min_ms,
        "requests": len(chosen),
        "complete_share": round(sum(_complete(o) for o in chosen) / len(chosen), 4) if chosen else None,
        "complete_ms": _pct_censored(chosen, complete=True),
    }


ANCHOR_MISS_TOKENS = 32  # an EFIM append that prefills this many tokens re-built part of its anchor


def tail_causes(ran: list[Outcome], share: float = 0.01) -> dict:
    """What the slowest `share` of the requests that ran are made of: re-anchors, cold starts
    (every request of a strategy without an anchor), a person's first key after a jump whose
    warm-up had not finished (it prefills the rest), EFIM appends that found part of their
    anchor evicted and prefilled it again, and requests that mostly waited for the engine."""
    timed = sorted((o for o in ran if o.ttft_ms is not None), key=lambda o: -o.ttft_ms)
    slow = timed[: max(1, math.ceil(share * len(timed)))] if timed else []

    def cause(o: Outcome) -> str:
        if o.reuse_class in ("reanchor", "cold"):
            return o.reuse_class
        if o.prefilled < ANCHOR_MISS_TOKENS:
            return "waited"
        return "warmup_unfinished" if o.after_unfinished_warmup else "anchor_evicted"

    causes = {c: 0 for c in ("reanchor", "cold", "warmup_unfinished", "anchor_evicted", "waited")}
    for o in slow:
        causes[cause(o)] += 1
    waits = [o.queued_ms for o in slow if o.queued_ms is not None]
    return {
        "requests": len(slow),
        "ttft_ms_from": round(slow[-1].ttft_ms, 1) if slow else None,
        "causes": causes,
        "prefilled_mean": _mean(o.prefilled for o in slow),
        "queued_ms_mean": _mean(waits) if waits else None,
    }


PAUSE_MS = 5000  # a person's first key after this long without a request: back from reading


def anchor_stats(outcomes: list[Outcome]) -> dict:
    """What pins are for: the share of EFIM appends that found their anchor whole (prefilled
    fewer than ANCHOR_MISS_TOKENS), and the time to first token of a person's first key after a
    pause of PAUSE_MS or more (while others' traffic went on), over all such keys (one dropped
    sorts last)."""
    appends = [o for o in outcomes if not o.dropped and o.reuse_class == "efim_append"]
    last: dict[int, float] = {}
    after_pause = []
    for o in sorted((o for o in outcomes if o.t_ms is not None), key=lambda o: o.t_ms):
        if o.user in last and o.t_ms - last[o.user] >= PAUSE_MS:
            after_pause.append(o)
        last[o.user] = o.t_ms
    return {
        "appends": len(appends),
        "anchor_whole_share": round(sum(o.prefilled < ANCHOR_MISS_TOKENS for o in appends) / len(appends), 4)
        if appends
        else None,
        "first_key_after_pause": {
            "requests": len(after_pause),
            "ran": sum(not o.dropped for o in after_pause),
            "ttft_ms": _pct_censored(after_pause),
            "ttft_ms_of_those_that_ran": _pct([o.ttft_ms for o in after_pause if not o.dropped and o.ttft_ms is not None]),
        },
    }


def _mean(values) -> float | None:
    values = list(values)
    return round(statistics.fmean(values), 2) if values else None


def summarize(outcomes: list[Outcome]) -> dict:
    warm = [o for o in outcomes if o.prewarm]
    outcomes = [o for o in outcomes if not o.prewarm]
    ran = [o for o in outcomes if not o.dropped]
    shown = [o for o in ran if o.completion and not o.late]
    matched = [common_prefix(o.completion, o.typed_next) for o in shown]
    useful = [o for o in shown if o.typed_next.startswith(o.completion)]
    said = [o for o in ran if o.completion]  # what the model said, shown in time or not
    hit = sum(o.prefix_cached + o.shifted_cached for o in ran)
    prompt = sum(o.prompt_tokens for o in ran)
    return {
        "requests": len(outcomes),
        "ran": len(ran),
        "dropped": len(outcomes) - len(ran),
        "late": sum(o.late for o in outcomes),
        "cancelled": sum(o.cancelled for o in outcomes),
        "ttft_ms": _pct([o.ttft_ms for o in ran if o.ttft_ms is not None]),
        "ttft_ms_all_requests": _pct_censored(outcomes),
        "complete_ms_all_requests": _pct_censored(outcomes, complete=True),
        "complete_share": round(sum(_complete(o) for o in outcomes) / len(outcomes), 4) if outcomes else None,
        "not_asked": sum(o.reuse_class == "not-asked" for o in outcomes),
        "ran_share": round(len(ran) / len(outcomes), 4) if outcomes else None,
        "latency_ms": _pct([o.latency_ms for o in ran if o.latency_ms is not None]),
        "prompt_tokens": _mean(o.prompt_tokens for o in ran),
        "prefilled_tokens": {"mean": _mean(o.prefilled for o in ran), **_pct([o.prefilled for o in ran])},
        "cached_tokens": {"prefix": _mean(o.prefix_cached for o in ran), "shifted": _mean(o.shifted_cached for o in ran)},
        "recomputed_tokens": _mean(o.recomputed for o in ran),
        "cache_hit_share": round(hit / prompt, 4) if prompt else None,
        "reuse_classes": {c: sum(o.reuse_class == c for o in ran) for c in sorted({o.reuse_class for o in ran})},
        "decoded": {
            "completion_tokens": sum(o.completion_tokens for o in ran),
            "draft_tokens": sum(o.draft_tokens for o in ran),
            "accepted_draft_tokens": sum(o.accepted_draft_tokens for o in ran),
        },
        "slowest_1pct": tail_causes(ran, 0.01),
        "anchors": anchor_stats(outcomes),
        "usefulness": {
            "shown": len(shown),
            "useful_share_of_ran": round(len(useful) / len(ran), 4) if ran else None,
            "mean_chars_matched_of_shown": _mean(matched) if matched else 0.0,
            # quality of the prompt alone, ignoring lateness: would the text have been right?
            "model_useful_share_of_ran": round(sum(o.typed_next.startswith(o.completion) for o in said) / len(ran), 4)
            if ran
            else None,
        },
        "prewarm": {
            "requests": len(warm),
            "prefilled_tokens": sum(o.prefilled for o in warm),
            "prefilled_per_typing_request": round(sum(o.prefilled for o in warm) / len(ran), 2) if ran else None,
        },
    }


def usefulness_against(reference: list[Outcome], other: list[Outcome]) -> dict:
    """Usefulness of two strategies on the requests both ran (the model's text, shown in time
    or not): a cold strategy runs few requests, so shares over different sets do not compare."""
    ref = {(o.user, o.index): o for o in reference if not o.dropped and not o.prewarm}
    both = [(ref[(o.user, o.index)], o) for o in other if not o.dropped and not o.prewarm and (o.user, o.index) in ref]
    if not both:
        return {"requests": 0}
    useful = lambda o: bool(o.completion) and o.typed_next.startswith(o.completion)  # noqa: E731
    return {
        "requests": len(both),
        "reference_useful_share": round(sum(useful(a) for a, _ in both) / len(both), 4),
        "useful_share": round(sum(useful(b) for _, b in both) / len(both), 4),
        "same_completion_share": round(sum(a.completion == b.completion for a, b in both) / len(both), 4),
    }


def progress_printer(label: str, total: int):
    if not sys.stderr.isatty():
        return None
    start = time.time()

    def show(done: int) -> None:
        width = 30
        filled = int(width * done / max(1, total))
        print(
            f"\r{label:>16} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {time.time() - start:5.0f}s",
            end="" if done < total else "\n",
            file=sys.stderr,
        )

    return show
