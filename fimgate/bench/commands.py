"""The `fimgate bench` commands but replay (bench/replay/command.py): what each runs, and the
helpers they share (peers, precision labels, writing the result)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from fimgate.flags import UserError, checked_strategies, load_engine, load_service


def cmd_bench_prefill(a) -> int:
    from fimgate.backend.model.registry import resolve_model
    from fimgate.backend.model.weights import load_tokenizer
    from fimgate.bench.replay.prefill_count import count_prefill
    from fimgate.bench.workloads.trace import TraceError, debounced_requests, read_events
    from fimgate.efim.templates import TEMPLATES, template_for_model
    from fimgate.efim.window import WindowConfig

    try:
        path = resolve_model(a.model)
        tok = load_tokenizer(path)
        reqs = list(debounced_requests(read_events(a.trace), a.debounce_ms, limit=a.limit_requests))
    except (TraceError, FileNotFoundError, ValueError, OSError) as e:
        raise UserError(str(e)) from None
    tmpl = TEMPLATES[a.template] if a.template else template_for_model(os.path.basename(path))
    result = count_prefill(reqs, tok, tmpl, WindowConfig(step_lines=a.step_lines))
    result["settings"] = {"trace": a.trace, "debounce_ms": a.debounce_ms, "template": tmpl.name, "step_lines": a.step_lines}
    emit(result, a.json)
    return 0


def peer_names(a) -> list[str]:
    from fimgate.bench.peers.registry import parse_peers

    try:
        return parse_peers(a.peers)
    except ValueError as e:
        raise UserError(str(e)) from None


def check_peer_strategies(a, strategies: list[str]) -> list[str]:
    """What the peers run: --peer-strategies, or those of `strategies` a peer can run; with
    --peers, at least one, or a UserError now (not after fimgate's own run)."""
    from fimgate.bench.peers.registry import PEER_STRATEGIES, peer_strategies

    asked = getattr(a, "peer_strategies", None)
    names = [s.strip() for s in asked.split(",") if s.strip()] if asked else strategies
    runnable = peer_strategies(names)
    if asked and runnable != names:
        raise UserError(f"peers run only {', '.join(PEER_STRATEGIES)}, not {', '.join(set(names) - set(runnable))}")
    if peer_names(a) and not runnable:
        raise UserError(f"peers run only {', '.join(PEER_STRATEGIES)}; add one of them to --strategies")
    if "llama-server" in peer_names(a) and "llama.vscode" not in runnable:
        raise UserError("llama-server is sent llama.vscode's requests: add llama.vscode to --strategies or --peer-strategies")
    return runnable


@contextlib.contextmanager
def open_peers(a, engine):
    """The --peers, started on the model `engine` runs ({} without --peers), or a UserError."""
    from fimgate.backend.model.registry import resolve_model
    from fimgate.bench.peers.registry import open_peers

    names = peer_names(a)
    stack = contextlib.ExitStack()
    try:
        peers = stack.enter_context(
            open_peers(names, resolve_model(a.model) if names else "", engine.tokenizer, engine.model_name)
        )
    except (RuntimeError, FileNotFoundError) as e:
        raise UserError(f"peers: {e}") from None
    with stack:
        yield peers


def cmd_bench_engine(a) -> int:
    from fimgate.bench.common.memory import rss_bytes
    from fimgate.bench.engine.speed import compare, measure, memory_floor, read_bandwidth_now

    peer_names(a)
    if a.background is not None:
        return _bench_background(a)
    if a.batch is not None:
        return _bench_batch(a)
    mb = lambda b: None if b is None else round(b / 1e6, 1)  # noqa: E731
    before = rss_bytes()
    engine = load_engine(a)
    moved = None
    if a.backend == "embedded":  # (vLLM cannot place K/V at a new position)
        from fimgate.bench.engine.speed import moved_prompt
        from fimgate.gateway.build import CORRECTION_SHARE

        # first, as a server that has just started would (what ran before shapes the C heap: heap.py)
        moved = moved_prompt(engine, a.cached_tokens, CORRECTION_SHARE)
    before_bw = read_bandwidth_now(engine) if a.backend == "embedded" else None
    result = {"precision": precision(a), **measure(engine, prefill_tokens=a.prefill_tokens, cached_tokens=a.cached_tokens)}
    if moved is not None:
        result["moved_prompt"] = moved
    after = rss_bytes()
    result["rss_mb"] = mb(after)  # the whole process: Python and torch included
    result["rss_added_mb"] = mb(after - before) if after and before else None  # the engine: weights, KV pool, work space
    floor = memory_floor(engine, result, [before_bw, read_bandwidth_now(engine) if a.backend == "embedded" else None])
    if floor is not None:
        result["memory_floor"] = floor
    before = rss_bytes()
    with open_peers(a, engine) as peers:
        if peers:
            result = {"fimgate": result}
            for name, peer in peers.items():
                result[name] = measure(peer, prefill_tokens=a.prefill_tokens, cached_tokens=a.cached_tokens)
                if name == "llama.cpp":  # loaded into this process: what it added
                    result[name]["rss_added_mb"] = mb(rss_bytes() - before) if before else None
                result[f"fimgate_vs_{name}"] = compare(result["fimgate"], result[name])
    emit(result, a.json)
    return 0


def _bench_batch(a) -> int:
    from fimgate.backend.model.registry import resolve_model
    from fimgate.bench.engine import batch_decode

    try:
        sizes = sorted({int(x) for x in a.batch.split(",") if x.strip()})
    except ValueError:
        raise UserError("--batch takes counts of people, e.g. 1,2,4,8") from None
    if not sizes or sizes[0] < 1 or a.batch_tokens < 1:
        raise UserError("--batch counts and --batch-tokens must be >= 1")
    names = peer_names(a)
    if set(names) - {"llama.cpp"}:
        raise UserError("--batch compares with llama.cpp only")
    a.slots = max(a.slots, sizes[-1])
    engine = load_engine(a)
    llama = resolve_model(a.model) if names else None
    emit({"precision": precision(a), **batch_decode.run(engine, sizes, a.batch_tokens, llama_cpp_path=llama)}, a.json)
    return 0


def _bench_background(a) -> int:
    from fimgate.backend.embedded.threads import usable_cores
    from fimgate.bench.engine import busy_cores

    try:
        counts = [int(x) for x in a.background.split(",") if x.strip()]
    except ValueError:
        raise UserError("--background takes counts of busy loops, e.g. 0,1,2") from None
    if a.threads is not None:
        raise UserError("--background compares its own thread choices; leave out --threads")
    engines = {"auto": load_engine(a)}
    a.threads = usable_cores()
    engines[f"fixed-{a.threads}"] = load_engine(a)
    with open_peers(a, engines["auto"]) as peers:
        engines.update(peers)
        emit(busy_cores.run(engines, counts, progress=lambda line: print(line, file=sys.stderr)), a.json)
    return 0


def cmd_bench_abuse(a) -> int:
    import shlex

    from fimgate.bench.abuse.cases import CASES, DEFAULT_RUNS, run
    from fimgate.bench.common.checkout import CHECKOUT
    from fimgate.bench.workloads.trace import TraceError, debounced_requests, read_events

    cases = [c.strip() for c in (a.cases or ",".join(DEFAULT_RUNS)).split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown or a.users < 1 or a.requests < 1:
        raise UserError(
            f"unknown cases {unknown}; known: {', '.join(CASES)}" if unknown else "--users and --requests must be >= 1"
        )
    path = a.trace or str(CHECKOUT / "tests" / "data" / "flask-60-head.jsonl")
    try:
        typing = [r for r in debounced_requests(read_events(path)) if not r.prewarm]
    except (OSError, TraceError) as e:
        raise UserError(f"trace {path}: {e}") from None
    if len(typing) < a.users * a.requests:
        raise UserError(f"{path} has {len(typing)} typing requests; --users x --requests needs {a.users * a.requests}")
    slices = [typing[k * a.requests : (k + 1) * a.requests] for k in range(a.users)]
    result = run(slices, cases, shlex.split(a.serve_flags), progress=lambda line: print(line, file=sys.stderr))
    print(json.dumps(result, indent=2))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


def cmd_bench_editor(a) -> int:
    import shlex
    import tempfile

    from fimgate.bench.common.checkout import SHARED
    from fimgate.bench.common.plot import plot_editor
    from fimgate.bench.editor.vscode import bench_editor

    if a.keys < 1:
        raise UserError("--keys must be >= 1")
    path = a.trace or str(SHARED / "traces" / "flask-60.jsonl")
    names = [n.strip() for n in a.clients.split(",") if n.strip()]
    reactions = None
    if a.accepting:
        from fimgate.bench.typist.command import floats_of

        reactions = floats_of(a.reaction_ms, "--reaction-ms")
    with tempfile.TemporaryDirectory(prefix="bench-editor-") as work:
        try:
            result = bench_editor(path, a.keys, names, shlex.split(a.serve_flags), work, reactions)
        except (RuntimeError, ValueError, OSError) as e:
            raise UserError(str(e)) from None
    if reactions:
        return _accepting_result(a, result, path, reactions)
    for name, r in result["clients"].items():
        if "error" in r:
            print(f"{name:15s} FAILED: {r['error']}", file=sys.stderr)
            continue
        print(
            f"{name:15s} key -> ghost text p50 {r['p50_ms']} ms, p90 {r['p90_ms']} ms (all keys; none = last) | "
            f"shown {r['shown_share']:.1%} useful {r['useful_share']:.1%} ({r['useful_chars']} chars; first line "
            f"{r['useful_line_share']:.1%}; by word {r['word_accept_share']:.1%}, {r['word_accept_chars']} chars) | "
            f"shown only: p50 {r['shown_p50_ms']} p90 {r['shown_p90_ms']} | faithful {r['faithful']}",
            file=sys.stderr,
        )
        w = r["where_time_went"]
        if w is None:  # another server: no request log
            continue
        print(
            f"{'':15s} no ghost text: {', '.join(f'{k} {v}' for k, v in w['why_none'].items())} | asked on "
            f"{w['asked_share']:.1%} of keys, p50 {w['asked_p50_ms']} ms after the key; type-through "
            f"{w['type_through_share']:.1%}; model's first text p50 {w['model_first_text_p50_ms']} ms; key -> ghost text "
            f"where a request was needed p50 {w['asked_shown_p50_ms']} ms",
            file=sys.stderr,
        )
    rss = result["server_rss_mb"]
    if rss["last"] is not None:
        print(f"gateway resident memory after the keys: {rss['last']} MB (peak {rss['peak']} MB)", file=sys.stderr)
    log = result.pop("request_log")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        with open(a.json.removesuffix(".json") + ".requests.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(line) + "\n" for line in log)  # the server's request log, for a closer look
    if a.plot:
        plot_editor(
            {n: r for n, r in result["clients"].items() if "error" not in r},
            a.plot,
            f"{result['keys']} keys of {os.path.basename(path)} in real VS Code",
        )
    return 0


def _accepting_result(a, result: dict, path: str, reactions: list[float]) -> int:
    """bench editor --accepting: each client's figures beside the ceiling of the model serve ran."""
    import shlex

    from fimgate.bench.editor.vscode import _model_flag
    from fimgate.bench.typist.command import ceiling_of
    from fimgate.bench.typist.script import steps_of
    from fimgate.bench.workloads.trace import read_events

    log = result.pop("request_log", [])
    model = _model_flag(shlex.split(a.serve_flags))
    ceiling = ceiling_of(steps_of(read_events(path), a.keys), model, reactions)  # after VS Code: alone
    result["ceiling"] = ceiling
    for name, rows in result["clients"].items():
        if "error" in rows:
            print(f"{name:28s} FAILED: {rows['error']}", file=sys.stderr)
            continue
        for key, r in rows.items():
            top = ceiling[key]["saved_share"]
            if name.partition("@")[0].startswith("fimgate"):
                r["of_ceiling"] = round(r["saved_share"] / top, 4) if top else None
            print(f"{name:28s} {key:15s} {_spared(r)} | faithful {r['faithful']}", file=sys.stderr)
    for key, r in ceiling.items():
        print(f"{'ceiling (zero latency)':28s} {key:15s} {_spared(r)}", file=sys.stderr)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        with open(a.json.removesuffix(".json") + ".requests.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(line) + "\n" for line in log)  # the server's request log
    return 0


def _spared(r: dict) -> str:
    tab = r["tab_to_next_ghost_ms"]
    ceiling = f" ({r['of_ceiling']:.0%} of the ceiling)" if r.get("of_ceiling") else ""
    return (
        f"not typed {r['saved_share']:.1%}{ceiling}, net of presses {r['net_saved_share']:.1%}, time saved "
        f"{r['time_saved_share']:.1%}, accepts {r['accepts']['whole']} whole + {r['accepts']['words']} by word, "
        f"Tab -> next ghost p50 {tab['p50']} ms"
    )


def cmd_bench_lsp(a) -> int:
    import shlex

    from fimgate.bench.common.checkout import SHARED
    from fimgate.bench.editor.lsp import bench_lsp
    from fimgate.bench.editor.vscode import trace_slice
    from fimgate.bench.workloads.trace import TraceError, read_events

    if a.keys < 1:
        raise UserError("--keys must be >= 1")
    if not 0 <= a.client_delay_ms <= 10_000:
        raise UserError("--client-delay-ms must be 0-10000")
    try:
        runs = json.loads(a.settings)
    except ValueError as e:
        raise UserError(f"--settings is not JSON: {e}") from None
    runs = runs if isinstance(runs, list) else [runs]
    if not all(isinstance(r, dict) for r in runs):
        raise UserError("--settings: a JSON object, or a list of them")
    path = a.trace or str(SHARED / "traces" / "flask-60.jsonl")
    try:
        sl = trace_slice(read_events(path), a.keys)
    except (TraceError, OSError) as e:
        raise UserError(str(e)) from None
    result = {"trace": path, "keys": a.keys, "lsp_flags": a.lsp_flags, "client_delay_ms": a.client_delay_ms, "runs": []}
    for settings in runs:
        r = bench_lsp(sl, shlex.split(a.lsp_flags), settings, a.client_delay_ms / 1000)
        result["runs"].append({"settings": settings, **r})
        print(
            f"settings {json.dumps(settings):28s} key -> answer p50 {r['p50_ms']} ms, p90 {r['p90_ms']} ms (all keys) | "
            f"answered {r['shown_share']:.1%} useful {r['useful_share']:.1%} ({r['useful_chars']} chars; by word "
            f"{r['word_accept_share']:.1%}, {r['word_accept_chars']} chars) | "
            f"answered only: p50 {r['shown_p50_ms']} p90 {r['shown_p90_ms']}",
            file=sys.stderr,
        )
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


def cmd_bench_shape(a) -> int:
    from fimgate.bench.quality.shape import run
    from fimgate.efim.languages import EXTENSIONS

    files = []
    for path in a.paths:
        if os.path.isdir(path):
            for root, _, names in os.walk(path):
                code = (n for n in names if EXTENSIONS.get(os.path.splitext(n)[1], "markdown") != "markdown")
                files += sorted(os.path.join(root, n) for n in code)
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise UserError(f"no such file or folder: {path}")
    if not files:
        raise UserError("no source files of a known language under " + ", ".join(a.paths))
    a.correction, a.backend = None, "embedded"
    from fimgate.bench.quality.shape import KINDS

    kinds = tuple(k.strip() for k in a.kinds.split(",") if k.strip())
    if not kinds or set(kinds) - set(KINDS):
        raise UserError(f"--kinds: one or more of {', '.join(KINDS)}")
    result = run(
        load_service(a), files, a.per_language, a.max_tokens, progress=lambda m: print(m[:300], file=sys.stderr), kinds=kinds
    )
    summary = {
        lang: {kind: {k: v for k, v in c.items() if k != "per_hole"} for kind, c in by_kind.items()}
        for lang, by_kind in result["results"].items()
    }
    print(json.dumps(summary, indent=2))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


def cmd_bench_make_trace(a) -> int:
    from fimgate.bench.workloads.make_trace import TEXT_SUFFIXES, TraceBuildError, make_trace, write_trace
    from fimgate.bench.workloads.trace import debounced_requests

    if a.commits < 1:
        raise UserError("--commits must be at least 1")
    try:
        suffixes = tuple(x.strip() for x in a.suffixes.split(",") if x.strip()) if a.suffixes else TEXT_SUFFIXES
        events = make_trace(a.repo, a.commits, seed=a.seed, suffixes=suffixes)
        write_trace(events, a.out)
        reqs = sum(1 for _ in debounced_requests(events, 150.0))  # re-read: every checkpoint must match
    except (TraceBuildError, OSError, ValueError) as e:
        raise UserError(str(e)) from None
    kinds = {k: sum(e["type"] == k for e in events) for k in ("commit", "open", "insert", "delete", "move", "checkpoint")}
    print(
        json.dumps(
            {
                "out": a.out,
                "events": len(events),
                **kinds,
                "minutes": round(events[-1]["t"] / 60000, 1),
                "requests_at_150ms": reqs,
            },
            indent=2,
        )
    )
    return 0


def precision(a) -> str:
    """A label for --dtype, --step-dtype and --prefill-dtype: "float32", "int8+bfloat16-prompts",
    "float32+bfloat16-steps+bfloat16-prompts"."""
    from fimgate.backend.embedded.engine import QUANTIZED
    from fimgate.backend.model.cpu_bf16 import resolve_prefill_dtype, resolve_step_dtype
    from fimgate.backend.model.registry import resolve_model
    from fimgate.backend.model.weights import is_quantized_gguf

    device = getattr(a, "device", "cpu")
    dtype = a.dtype
    if dtype == "auto":
        try:
            if device == "cpu" and is_quantized_gguf(resolve_model(getattr(a, "model", None))):
                return QUANTIZED
        except (OSError, ValueError):
            pass
        dtype = "float32"
    prefill = resolve_prefill_dtype(getattr(a, "prefill_dtype", "float32"), device, dtype)
    step = resolve_step_dtype(getattr(a, "step_dtype", "float32"), device, dtype)
    label = dtype if step in ("float32", "int8") else f"{dtype}+{step}-steps"
    return label if prefill == "float32" else f"{label}+{prefill}-prompts"


def cmd_bench_repo_quality(a) -> int:
    import subprocess

    from fimgate.bench.common.checkout import SHARED
    from fimgate.bench.quality.repo import ROWS, parse_row, run_repo_quality
    from fimgate.bench.workloads.repo_holes import Repo, mine_holes
    from fimgate.efim.templates import TEMPLATES, template_for_model

    rows = [r.strip() for r in (a.strategies or ",".join(ROWS)).split(",") if r.strip()]
    try:
        for r in rows:
            parse_row(r)
        repo = Repo(a.repo or str(SHARED / "repos" / "flask-301.bundle"))
        holes = mine_holes(repo, a.limit or 30, budget_chars=a.context_chars)
    except (ValueError, OSError, subprocess.CalledProcessError) as e:
        raise UserError(f"--dataset repo: {e}") from None
    if not holes:
        raise UserError("no holes found: no commit added a line that uses a name imported from the repository")
    engine = load_engine(a)
    if a.template and a.template not in TEMPLATES:
        raise UserError(f"unknown template {a.template!r}; known: {', '.join(TEMPLATES)}")
    tmpl = TEMPLATES[a.template] if a.template else template_for_model(engine.model_name)
    result = run_repo_quality(engine, tmpl, holes, rows, a.max_tokens)
    for row in result.values():
        row.pop("completions", None)
        row.pop("similarities", None)
    result["settings"] = {
        "dataset": "repo",
        "repo": a.repo or "../shared/repos/flask-301.bundle",
        "holes": len(holes),
        "context_chars": a.context_chars,
        "context_chunks_mean": round(sum(len(h.context) for h in holes) / len(holes), 2),
        "template": tmpl.name,
        "model": engine.model_name,
        "dtype": a.dtype,
    }
    emit(result, a.json)
    return 0


def real_mid_line(a) -> list:
    """The real-mid-line set's holes, from the folders real_sources makes under --sources (made
    there first where missing: it fetches Debian packages)."""
    from fimgate.bench.workloads import real_mid_line, real_sources

    if not a.sources:
        raise UserError("--dataset real-mid-line needs --sources DIR (real_sources.py fills it: out/sources)")
    return real_mid_line.load(sorted(real_sources.make(a.sources).values()), a.limit or 140)


def cmd_bench_quality(a) -> int:
    from fimgate.bench.peers.registry import peer_strategies
    from fimgate.bench.quality.infilling import run_quality, same_share
    from fimgate.bench.workloads.humaneval import load
    from fimgate.efim.templates import TEMPLATES, template_for_model

    if a.dataset == "repo":
        return cmd_bench_repo_quality(a)
    a.strategies = a.strategies or "no-cache,efim"
    strategies = checked_strategies(a)
    check_peer_strategies(a, strategies)
    if "served" in strategies and a.perturb:
        raise UserError("the served row is a cold request as serve gets it: run it without --perturb")
    b = argparse.Namespace(
        **{
            **vars(a),
            "dtype": a.compare_dtype or a.dtype,
            "prefill_dtype": a.compare_prefill_dtype or a.prefill_dtype,
            "step_dtype": a.compare_step_dtype or a.step_dtype,
        }
    )
    compared = a.compare_dtype or a.compare_prefill_dtype or a.compare_step_dtype
    if compared and precision(b) == precision(a):
        raise UserError(f"--compare-*dtype name the precision already measured ({precision(a)})")
    try:
        problems = real_mid_line(a) if a.dataset == "real-mid-line" else load(a.dataset, a.data_dir, a.limit)
    except (FileNotFoundError, ValueError) as e:
        raise UserError(str(e)) from None
    engine = load_engine(a)
    if a.template and a.template not in TEMPLATES:
        raise UserError(f"unknown template {a.template!r}; known: {', '.join(TEMPLATES)}")
    tmpl = TEMPLATES[a.template] if a.template else template_for_model(engine.model_name)

    def run(e, names):
        return run_quality(
            e,
            tmpl,
            problems,
            names,
            single_line=a.dataset in ("single-line", "mid-line", "real-mid-line"),
            max_tokens=a.max_tokens,
            perturb=a.perturb,
            keep_completions=True,
        )

    def compare(other: dict, names: list[str], label: str) -> dict:
        for s in names:
            other[s][f"same_completion_as_{label}"] = same_share(other[s]["completions"], result[s]["completions"])
        return other

    result = run(engine, strategies)
    model_name = engine.model_name
    peer_results = {}
    with open_peers(a, engine) as peers:  # the same problems on other engines, completion by completion
        for name, peer in peers.items():
            peer_results[name] = compare(
                run(peer, peer_strategies(strategies)), peer_strategies(strategies), f"fimgate_{precision(a)}"
            )
    if compared:  # the same problems on weights of another precision
        del engine
        other = run(load_engine(b), strategies)
        result = {precision(a): result, precision(b): compare(other, strategies, precision(a))}
    elif peer_results:
        result = {"fimgate": result}
    result.update(peer_results)
    completions = {}  # kept in --json's file (hole by hole), not printed
    for label, per_strategy in result.items() if compared or peer_results else [("", result)]:
        for name, row in per_strategy.items():
            completions[f"{label}/{name}" if label else name] = row.pop("completions", None)
    result["settings"] = {
        "dataset": a.dataset,
        "problems": len(problems),
        "template": tmpl.name,
        "model": model_name,
        "perturb": a.perturb,
        "dtype": a.dtype,
        "prefill_dtype": a.prefill_dtype,
        "compare_dtype": a.compare_dtype,
        "compare_prefill_dtype": a.compare_prefill_dtype,
        "step_dtype": a.step_dtype,
        "compare_step_dtype": a.compare_step_dtype,
    }
    emit(result, None)
    if a.json:
        emit({**result, "completions": completions}, a.json, quiet=True)
    return 0


def emit(result: dict, path: str | None, quiet: bool = False) -> None:
    text = json.dumps(result, indent=2)
    if not quiet:
        print(text)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
