"""`fimgate bench replay`: the command (flags to strategies, peers, schedules; the summary)."""

from __future__ import annotations

import itertools
import json
import math
import os
from dataclasses import replace

from fimgate.bench.commands import check_peer_strategies, emit, open_peers
from fimgate.flags import UserError, checked_strategies, load_engine


def _speculate_each(a) -> list[int | None]:
    """--speculate-each "4,0" -> [4, 0]; without it [None]: the engine's own --speculate."""
    if not a.speculate_each:
        return [None]
    try:
        values = [int(v) for v in a.speculate_each.split(",") if v.strip()]
    except ValueError:
        values = [-1]
    if not values or min(values) < 0:
        raise UserError("--speculate-each takes draft lengths >= 0, e.g. 4,0")
    return values


def _warmup_yield_ms(a) -> float | None:
    if a.typing_first and a.warmup_yield_ms is not None:
        raise UserError("--typing-first is --warmup-yield-ms infinity; give one of them")
    if a.warmup_yield_ms is not None and a.warmup_yield_ms < 0:
        raise UserError("--warmup-yield-ms must be >= 0")
    return math.inf if a.typing_first else a.warmup_yield_ms


def cmd_bench_replay(a) -> int:
    if a.accepting:
        from fimgate.bench.typist.command import cmd_bench_typist

        a.context_chars = 3000 if a.context_chars is None else a.context_chars
        emit(cmd_bench_typist(a), a.json)
        return 0
    a.context_chars = a.context_chars or 0
    from fimgate.bench.replay.simulate import user_slices
    from fimgate.bench.workloads.trace import TraceError, debounced_requests, read_events

    strategies = checked_strategies(a)
    a.peer_strategies = check_peer_strategies(a, strategies)
    yield_ms = _warmup_yield_ms(a)
    if a.users < 1:
        raise UserError("--users must be at least 1")
    if a.dump_outcomes:  # say so now, not after the run
        _dump_outcomes({}, a.dump_outcomes)
    try:
        limit = None if a.limit_requests is None else a.limit_requests
        reqs = list(debounced_requests(read_events(a.trace), a.debounce_ms, limit=limit, prewarm=a.prewarm))
    except (TraceError, OSError) as e:
        raise UserError(str(e)) from None
    if a.time_scale <= 0 or a.max_tokens < 1:
        raise UserError("--time-scale must be > 0 and --max-tokens >= 1")
    if a.schedule == "office":
        from fimgate.bench.workloads.office import office_slices

        try:
            lo, hi = (float(x) for x in a.think_s.split(","))
        except ValueError:
            raise UserError("--think-s takes two numbers of seconds, e.g. 30,90") from None
        slices = office_slices(reqs, a.users, a.time_scale, (lo, hi), a.reads, seed=a.seed)
    else:
        slices = user_slices(reqs, a.users, a.time_scale)
    if a.context_chars > 0:
        from fimgate.bench.workloads.context_ring import with_context

        slices = [with_context(part, a.context_chars) for part in slices]
    from fimgate.bench.replay.simulate import REPLAY_SAMPLING

    sampling = replace(REPLAY_SAMPLING, max_tokens=a.max_tokens)
    settings = {
        "trace": a.trace,
        "debounce_ms": a.debounce_ms,
        "requests": sum(not r.prewarm for r in reqs),
        "users": a.users,
        "prewarm": a.prewarm,
        "time_scale": a.time_scale,
        "max_tokens": a.max_tokens,
        "speculate": _speculate_each(a) if a.speculate_each else a.speculate,
        "context_chars": a.context_chars,
        "schedule": a.schedule,
        "warmup_yield_ms": yield_ms,
        "peer_prewarm": a.peer_prewarm,
        "hint_sessions": a.hint_sessions,
    }
    if a.schedule == "office":
        settings.update(think_s=a.think_s, reads=a.reads, seed=a.seed)
    per_strategy = {}
    if a.background < 0:
        raise UserError("--background takes a count of busy loops (>= 0)")
    settings["background_busy_loops"] = a.background
    from fimgate.bench.engine.busy_cores import busy_loops

    with busy_loops(a.background):
        result = _run_all(a, strategies, slices, sampling, settings, yield_ms, per_strategy)
    if not a.live:  # the engine ran in this process: its resident memory at the end, and its peak
        from fimgate.bench.common.memory import rss_bytes

        result.setdefault("settings", {})["rss_mb"] = {
            "last": round((rss_bytes() or 0) / 1e6, 1),
            "peak": round((rss_bytes(peak=True) or 0) / 1e6, 1),
        }
    if a.dump_outcomes:
        _dump_outcomes(per_strategy, a.dump_outcomes)
    if a.plot:
        from fimgate.bench.common.plot import plot_replay

        plot_replay(per_strategy, a.plot, title=f"{os.path.basename(a.trace)}: {len(reqs)} requests, {a.users} user(s)")
    emit(result, a.json)
    return 0


def _run_all(a, strategies, slices, sampling, settings, yield_ms, per_strategy) -> dict:
    """Every strategy (and peer) over the slices; fills per_strategy with their outcomes."""
    from fimgate.bench.peers.registry import runs
    from fimgate.bench.replay.batched import replay_batched
    from fimgate.bench.replay.simulate import progress_printer, replay_strategy, summarize
    from fimgate.bench.replay.strategies import Strategy
    from fimgate.efim.templates import TEMPLATES, template_for_model

    if a.live:
        from fimgate.bench.replay.live import acceptance_agreement, replay_live

        per_strategy["live"], verdicts = replay_live(a.live, slices)
        live = {**summarize(per_strategy["live"]), "acceptance": acceptance_agreement(per_strategy["live"], verdicts)}
        result = {"live": live, "settings": {**settings, "url": a.live}}
    else:
        engine = load_engine(a)
        batched = hasattr(engine, "scheduler") and not a.serial  # the embedded engine, as serve runs it
        if batched and yield_ms is not None:
            raise UserError("--warmup-yield-ms and --typing-first are for --serial (the scheduler yields to typing itself)")
        tmpl = TEMPLATES[a.template] if a.template else template_for_model(engine.model_name)
        result = {}
        policies = [p.strip() for p in a.pin_policy.split(",") if p.strip()]
        speculate = _speculate_each(a)
        for name, policy, spec in itertools.product(strategies, policies, speculate):
            label = name if len(policies) == 1 else f"{name}@{policy}"
            label += "" if len(speculate) == 1 else f"/speculate={spec}"
            if hasattr(engine, "reset"):  # the embedded engine; vLLM strategies differ by cache salt
                engine.reset(pin_policy=policy, **({} if spec is None else {"speculate": spec}))
            total = sum(len(p) for p in slices)
            strategy = Strategy(name, engine.tokenizer, tmpl, hint_sessions=a.hint_sessions)
            if batched:
                outcomes, throughput = replay_batched(engine, strategy, slices, sampling, progress=progress_printer(label, total))
                result[label] = {**summarize(outcomes), "throughput": throughput}
            else:
                outcomes = replay_strategy(
                    engine, strategy, slices, sampling, progress=progress_printer(label, total), warmup_yield_ms=yield_ms
                )
                result[label] = summarize(outcomes)
            per_strategy[label] = outcomes
        peer_slices = slices if a.peer_prewarm == "same" else [[r for r in s if not r.prewarm] for s in slices]
        with open_peers(a, engine) as peers:
            for peer_name, peer in peers.items():
                for name in [s for s in a.peer_strategies if runs(peer_name, s)]:
                    label = f"{peer_name}/{name}"
                    # a server's own strategy sends its client's requests (llama-server: /infill bodies, no warm-ups)
                    own = getattr(peer, "strategy", None)
                    strategy = own(name, tmpl) if own else Strategy(name, peer.tokenizer, tmpl)
                    some = [[r for r in s if not r.prewarm] for s in peer_slices] if own else peer_slices
                    outcomes = replay_strategy(
                        peer,
                        strategy,
                        some,
                        sampling,
                        progress=progress_printer(label, sum(map(len, some))),
                        warmup_yield_ms=yield_ms,
                    )
                    per_strategy[label] = outcomes
                    result[label] = summarize(outcomes)
                    if hasattr(peer, "emulation"):
                        result[label]["emulation"] = peer.emulation()
        from fimgate.bench.replay.simulate import complete_in_readable_windows, usefulness_against

        windows = {r.index: r.next_event_ms - r.t_ms for part in slices for r in part if r.next_event_ms is not None}
        for label, outcomes in per_strategy.items():
            result[label]["complete_in_readable_windows"] = complete_in_readable_windows(outcomes, windows)
        reference = next((label for label in per_strategy if label.startswith("no-cache")), None)
        for label in per_strategy:
            if reference and label != reference:
                result[label]["usefulness_vs_no_cache"] = usefulness_against(per_strategy[reference], per_strategy[label])
        base = result.get("psm-prefix", {}).get("prefilled_tokens", {}).get("mean")
        for label in list(result):
            if base:
                result[label]["prefilled_mean_vs_psm_prefix"] = round(result[label]["prefilled_tokens"]["mean"] / base, 4)
        result["settings"] = {
            **settings,
            "model": engine.model_name,
            "template": tmpl.name,
            "backend": a.backend,
            "scheduler": "batched" if batched else "serial",
        }
        if hasattr(engine, "tree"):
            result["settings"].update(budget_tokens=engine.tree.num_blocks * engine.tree.block_size, pin_policies=policies)
        if hasattr(engine, "router"):
            result["settings"]["vllm_servers"] = engine.router.stats()
        if hasattr(engine, "governor"):
            result["settings"]["compute"] = engine.governor.state()
    return result


def _dump_outcomes(per_strategy: dict, path: str) -> None:
    from dataclasses import asdict

    try:
        with open(path, "w") as f:
            for label, outcomes in per_strategy.items():
                for o in outcomes:
                    f.write(json.dumps({"strategy": label, **asdict(o)}) + "\n")
    except OSError as e:
        raise UserError(f"--dump-outcomes: {e}") from None
