"""The `fimgate` command: serve, complete, models, bench.

Every user error (missing file, bad offset, non-UTF-8 text, missing model) ends with one line
on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from fimgate.flags import DEFAULT_PORT, UserError, backend_args, engine_args, load_service, service_args


def cmd_export_hf(a) -> int:
    from fimgate.backend.model.hf_export import export_hf
    from fimgate.backend.model.registry import resolve_model
    from fimgate.backend.model.weights import ModelLoadError

    try:
        out = export_hf(resolve_model(a.model), a.out)
    except (ModelLoadError, FileNotFoundError, OSError) as e:
        raise UserError(str(e)) from None
    print(f"fimgate: wrote {out} (serve it with vLLM; README: the vLLM backend)", file=sys.stderr)
    return 0


def cmd_models(a) -> int:
    from fimgate.backend.model.config import SUPPORTED_ARCHS
    from fimgate.backend.model.registry import DEFAULT_MODEL, MODELS, ModelNotInstalledError, assembled_path, path_of
    from fimgate.efim.templates import TEMPLATES

    rows = []
    for spec in MODELS.values():
        try:
            path = path_of(spec, assemble=a.assemble)
            where = str(path) if path else f"installed, assembled on first use into {assembled_path(spec)}"
        except ModelNotInstalledError:
            where = f"not installed: {spec.install}"
        size = spec.size_bytes or (os.path.getsize(where) if os.path.isfile(where) else None)
        rows.append(
            {
                "name": spec.name,
                "default": spec.name == DEFAULT_MODEL,
                "model": spec.title,
                "quantization": spec.quantization,
                "size_bytes": size,
                "licence": spec.licence,
                "template": spec.template,
                "where": where,
            }
        )
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        size = f"{r['size_bytes'] / 1e6:,.0f} MB" if r["size_bytes"] else "?"
        print(f"{r['name']}{' (default)' if r['default'] else ''}: {r['model']}, {r['quantization']}, {size}, {r['licence']}")
        print(f"    {r['where']}")
    print(f"--model NAME, or a path: a .gguf file or a Hugging Face folder of {', '.join(SUPPORTED_ARCHS)}")
    print(f"FIM templates: {', '.join(TEMPLATES)}")
    return 0


def cmd_stats(a) -> int:
    """What people were shown and took, from a running gateway (GET /v1/events/summary)."""
    import httpx

    headers = {"authorization": f"Bearer {a.api_key}"} if a.api_key else {}
    params = {**({"user": a.user} if a.user else {}), **({"everyone": "true"} if a.everyone else {})}
    try:
        r = httpx.get(a.url.rstrip("/") + "/v1/events/summary", params=params, headers=headers)
    except httpx.HTTPError as e:
        raise UserError(f"cannot reach {a.url}: {e}") from None
    if r.status_code != 200:
        raise UserError(f"{a.url} answered {r.status_code}: {r.text[:200]}")
    s = r.json()
    if a.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"{'user':16s} {'language':12s} {'shown':>7s} {'accepted':>9s} {'rate':>6s} {'chars':>8s} {'dismissed':>10s}")
    for one in s["users"].values() if a.everyone else [s]:
        for lang, t in [*one["by_language"].items(), ("all", one["total"])]:
            rate = "-" if t["acceptance_rate"] is None else f"{t['acceptance_rate']:.0%}"
            row = f"{t['shown']:7d} {t['accepted']:9d} {rate:>6s} {t['accepted_chars']:8d} {t['dismissed']:10d}"
            print(f"{one['user'][:16]:16s} {lang:12s} {row}")
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
    service = load_service(a)
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
    if a.keyed_status and keys is None:
        raise UserError("--keyed-status protects the status endpoints with --api-keys: give the keys")
    if a.operators and keys is None:
        raise UserError("--operators names users of --api-keys (without keys, whoever runs the gateway sees everything)")
    if keys is not None:
        keys.operators = frozenset(u.strip() for u in (a.operators or "").split(",") if u.strip())
    if keys is None and a.host not in ("127.0.0.1", "localhost", "::1"):
        print("fimgate: warning: serving beyond loopback without --api-keys: anyone can name any user", file=sys.stderr)
    try:
        sock = bind(a.host, a.port)
    except OSError as e:
        raise UserError(f"cannot listen on {a.host}:{a.port}: {e.strerror or e}") from None
    service = load_service(a)
    serve(service, sock, keys, read_timeout_s=a.read_timeout_s, keyed_status=a.keyed_status)
    return 0


def cmd_lsp(a) -> int:
    import asyncio
    import secrets
    import threading

    from fimgate.backend.main_thread import MainThreadRunner
    from fimgate.lsp.server import create_server, embedded_or_gateway
    from fimgate.lsp.settings import LspSettings
    from fimgate.lsp.tcp import Completers, TcpSessions

    runner = MainThreadRunner()  # the embedded engine computes on the main thread (fimgate/backend/main_thread.py)
    settings = LspSettings(gateway=a.gateway, model=a.model)
    make = embedded_or_gateway(runner, build=lambda model: load_service(_with_model(a, model)))
    if a.tcp:
        host, _, port = a.tcp.rpartition(":")
        if not port.isdigit():
            raise UserError(f"--tcp takes HOST:PORT, not {a.tcp!r}")
        token = os.environ.get("FIMGATE_LSP_TOKEN")
        users = {token: "local"} if token else (_read_tokens(a.token_file) if a.token_file else None)
        if users is None:
            token = secrets.token_urlsafe(24)
            users = {token: "local"}
            print(f"fimgate: LSP clients must initialize with initializationOptions.token = {token}", file=sys.stderr)
        shared = Completers(make, shared=True)  # one model (or gateway client) for every connection
        sessions = TcpSessions(lambda: create_server(settings, shared, users, per_connection=True))
        target = lambda: asyncio.run(sessions.serve(host or "127.0.0.1", int(port)))  # noqa: E731
    else:
        target = create_server(settings, Completers(make, shared=False)).start_io
    protocol = threading.Thread(target=target, name="lsp", daemon=True)
    protocol.start()
    runner.serve_forever(until=lambda: not protocol.is_alive())
    return 0


def _with_model(a, model: str | None):
    """The command's flags, with the model an editor's settings name (the engine flags kept; the
    template found from that model unless it is the command's own)."""
    if model is None or model == a.model:
        return a
    return argparse.Namespace(**{**vars(a), "model": model, "template": None})


def _read_tokens(path: str) -> dict[str, str]:
    """--token-file: `TOKEN [USER]` lines (one token alone: user "local") -> {token: user}."""
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        raise UserError(f"--token-file: {e.strerror}: {path}") from None
    users = {}
    for line in lines:
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if len(parts) > 2:
            raise UserError(f"--token-file {path}: lines are TOKEN [USER], not {len(parts)} fields")
        users[parts[0]] = parts[1] if len(parts) == 2 else "local"
    if not users:
        raise UserError(f"--token-file {path} is empty")
    return users


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fimgate", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run the HTTP gateway")
    engine_args(s)
    service_args(s)
    backend_args(s)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=DEFAULT_PORT)
    s.add_argument("--api-keys", default=None, metavar="FILE", help="'KEY USER' lines; requests then need a key")
    s.add_argument(
        "--keyed-status",
        action="store_true",
        help="with --api-keys: /health, /metrics, /props and /v1/models need a key too (default: open, for probes)",
    )
    s.add_argument(
        "--operators",
        default=None,
        metavar="USER[,USER]",
        help="with --api-keys: users who may read everyone's acceptance numbers",
    )
    s.add_argument(
        "--request-timeout-s", type=float, default=60.0, help="a request still queued or generating after this long is cancelled"
    )
    s.add_argument(
        "--read-timeout-s",
        type=float,
        default=10.0,
        help="a client must send its request headers, and then its body, within this long",
    )
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser("complete", help="one completion at a character offset of a file")
    engine_args(s)
    service_args(s, first_window=False)
    backend_args(s)
    s.add_argument("--file", required=True)
    s.add_argument("--offset", type=int, default=None, help="code-point offset of the cursor (default: end of file)")
    s.add_argument("--max-tokens", type=int, default=64)
    s.add_argument("--stop", action="append", default=[])
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_complete)

    s = sub.add_parser("lsp", help="the language server (stdio, or --tcp HOST:PORT)")
    s.add_argument(
        "--gateway",
        default=None,
        help="use a running gateway (default: the embedded engine, with the same engine flags as serve)",
    )
    engine_args(s)
    service_args(s)
    backend_args(s)
    s.add_argument(
        "--tcp", default=None, metavar="HOST:PORT", help="listen on TCP (HOST defaults to 127.0.0.1); clients must send a token"
    )
    s.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="TCP tokens, `TOKEN [USER]` lines: a connection's token names its user (else $FIMGATE_LSP_TOKEN, "
        "else a random token printed at start; both user 'local')",
    )
    s.set_defaults(func=cmd_lsp)

    s = sub.add_parser("export-hf", help="write the model as a Hugging Face folder (for vLLM)")
    s.add_argument("--model", default=None, help="a model by name, GGUF file or folder (default: the default model)")
    s.add_argument("--out", required=True)
    s.set_defaults(func=cmd_export_hf)

    s = sub.add_parser("models", help="the models fimgate runs by name: size, quantization, licence, where each lives")
    s.add_argument("--assemble", action="store_true", help="assemble and verify the installed models now")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_models)

    s = sub.add_parser(
        "stats", help="suggestions shown, accepted and dismissed, per language (and per user), from a running gateway"
    )
    s.add_argument("--url", default="http://127.0.0.1:8418")
    s.add_argument("--api-key", default=os.environ.get("FIMGATE_API_KEY"), help="the key whose user to show")
    s.add_argument("--user", default=None, help="on a gateway without keys: the user to show (default: local)")
    s.add_argument("--everyone", action="store_true", help="every user's numbers (operators: fimgate serve --operators)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_stats)
    from fimgate.bench.cli import add_parsers

    add_parsers(sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True))
    return p


def _make_output_folders(args) -> None:
    """A benchmark's --json / --plot path in a folder not made yet: make it now, not fail after the run."""
    for name in ("json", "plot"):
        path = getattr(args, name, None)
        if isinstance(path, str) and os.path.dirname(path):
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            except OSError as e:
                raise UserError(f"--{name} {path}: {e.strerror}") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _make_output_folders(args)
        return args.func(args)
    except UserError as e:
        print(f"fimgate: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
