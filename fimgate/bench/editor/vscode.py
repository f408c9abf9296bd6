"""`fimgate bench editor`: what a person in VS Code sees. A slice of a keystroke trace is typed
into real VS Code (code-server, tests/e2e/vscode/replay.js) with its real gaps between keys, with
an extension pointed at `fimgate serve`; for every key: the time until ghost text was drawn, or
none before the next key; the text shown; whether the person's next typed text starts with it
(useful). Several clients run one after another in one run, each on a fresh server (none finds
the cache the one before it left): fimgate's
extension with its earlier settings (its own 120 ms debounce, a one-suggestion cache, no time
budget, whole suggestions only), showing only whole suggestions, without context from other
files, and as it is now (a suggestion's first part shown as soon as it arrives, the rest when
complete; context from the files left), and llama.vscode 0.0.63 unchanged, with its defaults (3
completions a request) and with one completion a request (`llama.vscode-1`).

A client runs against `fimgate serve` unless its name says another server: `llama.vscode@llama-server`
is llama.vscode against llama.cpp's llama-server (`make peers-setup`; fimgate/bench/peers/llama_server.py)
on the same GGUF file, started as llama.vscode's README says; `@fimgate` says the default.

Percentiles are over every key: a key with no ghost text before the next key sorts last (it was
never seen), so a client is not rewarded for showing less.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from fimgate.bench.common.memory import rss_bytes
from fimgate.bench.common.served import start_serve, stop
from fimgate.bench.editor.key_timeline import timeline
from fimgate.bench.editor.vscode_rig import FIMGATE_VSIX, HERE, LLAMA_VSCODE_VSIX, TOOLCHAIN, code_server
from fimgate.bench.peers.llama_server import llama_server
from fimgate.bench.workloads.trace import read_events
from fimgate.gateway.request_log import read_log

MAX_GAP_MS = 2000  # longer pauses in the trace are cut to this (the window a key is measured in)
# Keystrokes must land as the trace typed them: no auto-closing, auto-indent or word suggestions.
TYPING_SETTINGS = {
    "editor.autoClosingBrackets": "never",
    "editor.autoClosingQuotes": "never",
    "editor.autoClosingOvertype": "never",
    "editor.autoSurround": "never",
    "editor.autoIndent": "none",
    "editor.formatOnType": False,
    "editor.acceptSuggestionOnEnter": "off",
    "editor.wordBasedSuggestions": "off",
    "editor.linkedEditing": False,
    "files.insertFinalNewline": False,
    "files.trimTrailingWhitespace": False,
    "files.autoSave": "off",
}


@dataclass(frozen=True)
class Client:
    name: str
    vsix: str
    settings: dict
    status: str  # text of its status bar item: it is active
    open_first: str | None = None  # a file whose language activates it
    close_tab: str | None = None  # a page it opens on its first start (waited for and closed)


SERVERS = ("fimgate", "llama-server")


def llama_vscode(name: str, url: str, **settings) -> Client:
    base = {
        "llama-vscode.endpoint": url,
        "llama-vscode.ask_install_llamacpp": False,
        "llama-vscode.rag_enabled": False,
        "llama-vscode.auto_memory_enabled": False,
        "llama-vscode.env_start_last_used": False,
    }
    return Client(name, LLAMA_VSCODE_VSIX, {**base, **settings}, "llama", open_first="notes.txt", close_tab="Information")


def clients(url: str) -> dict[str, Client]:
    return {
        "fimgate-before": Client(
            "fimgate-before",
            FIMGATE_VSIX,
            {
                "fimgate.gatewayUrl": url,
                "fimgate.debounceMs": 120,
                "fimgate.cacheEntries": 1,
                "fimgate.maxPredictMs": 0,
                "fimgate.showPartialAfterMs": -1,
            },
            "fimgate",
        ),
        "fimgate-whole": Client(
            "fimgate-whole", FIMGATE_VSIX, {"fimgate.gatewayUrl": url, "fimgate.showPartialAfterMs": -1}, "fimgate"
        ),
        "fimgate-no-context": Client(
            "fimgate-no-context", FIMGATE_VSIX, {"fimgate.gatewayUrl": url, "fimgate.contextChars": 0}, "fimgate"
        ),
        "fimgate": Client("fimgate", FIMGATE_VSIX, {"fimgate.gatewayUrl": url}, "fimgate"),
        "fimgate-no-alternatives": Client(  # no texts for keys that leave the suggestion (A/B)
            "fimgate-no-alternatives", FIMGATE_VSIX, {"fimgate.gatewayUrl": url, "fimgate.alternatives": 0}, "fimgate"
        ),
        "fimgate-no-prefetch": Client(  # no request for the suggestion after the one on screen (A/B)
            "fimgate-no-prefetch", FIMGATE_VSIX, {"fimgate.gatewayUrl": url, "fimgate.prefetch": False}, "fimgate"
        ),
        "fimgate-no-floor": Client(  # the whole completion, however unsure the model was of its end
            "fimgate-no-floor", FIMGATE_VSIX, {"fimgate.gatewayUrl": url, "fimgate.minTokenProb": 0}, "fimgate"
        ),
        "llama.vscode": llama_vscode("llama.vscode", url),
        "llama.vscode-1": llama_vscode("llama.vscode-1", url, **{"llama-vscode.max_parallel_completions": 1}),
    }


@dataclass
class Slice:
    steps: list[dict]  # replay.js steps
    files: dict[str, str]  # file -> its text when first opened (written to the workspace)
    final: dict[str, str]  # file -> its text after the slice (what the saved files must hold)
    typed_next: list[str] = field(default_factory=list)  # per key: what the person typed next


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    return line + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def stale_vsix(vsix: str) -> str | None:
    """A source file of the extension newer than its package, if any: a benchmark of a stale
    package measures code that is no longer there."""
    src = os.path.join(os.path.dirname(vsix), "src")
    built = os.path.getmtime(vsix)
    for d, _, files in os.walk(src):
        for f in files:
            if os.path.getmtime(os.path.join(d, f)) > built:
                return os.path.join(d, f)
    return None


AUTO_WITH_KEY_MS = 20  # an auto-indent this soon after a key is the editor's answer to that key


def trace_slice(events: list[dict], keys: int) -> Slice:
    """Steps from the start of the trace until `keys` single-character keystrokes were typed."""
    docs: dict[str, str] = {}
    out = Slice([], {}, {})
    n = 0
    current = None
    for i, ev in enumerate(events):
        kind, f = ev.get("type"), ev.get("file")
        nxt = events[i + 1]["t"] if i + 1 < len(events) else ev["t"]
        wait = max(0, min(MAX_GAP_MS, nxt - ev["t"]))
        if kind == "open":
            if current is not None:
                out.steps.append({"op": "save"})
            first = f not in out.files
            if first:
                out.files[f] = ev["text"]
            docs[f], current = ev["text"], f
            out.steps.append({"op": "open", "file": f, "text": ev["text"], "first": first, "wait_ms": wait})
        elif kind == "move":
            line, col = _line_col(docs[f], ev["offset"])
            out.steps.append({"op": "move", "line": line, "col": col, "wait_ms": wait})
        elif kind == "delete":
            o, length = ev["offset"], ev["length"]
            line, col = _line_col(docs[f], o)
            out.steps.append({"op": "delete", "line": line, "col": col, "length": length, "wait_ms": wait})
            docs[f] = docs[f][:o] + docs[f][o + length :]
        elif kind == "insert":
            o, text = ev["offset"], ev["text"]
            docs[f] = docs[f][:o] + text + docs[f][o:]
            if (
                ev.get("auto")
                and out.steps
                and out.steps[-1]["op"] == "key"
                and events[i - 1].get("type") == "insert"
                and ev["t"] - events[i - 1]["t"] <= AUTO_WITH_KEY_MS
            ):
                # the editor's auto-indent after a key (Enter) is part of that key, as in VS Code: one
                # edit, then the suggestion is asked for at the indented cursor; its window runs on to
                # the person's next step, and what they typed next starts after the indentation
                key = out.steps[-1]
                key["then"] = text
                key["wait_ms"] = max(0, min(MAX_GAP_MS, nxt - events[i - 1]["t"]))
                out.typed_next[-1] = _typed_next(events, i + 1, f)
                continue
            single = len(text) == 1 and not ev.get("auto")
            out.steps.append({"op": "key" if single else "paste", "text": text, "wait_ms": wait})
            if single:
                out.typed_next.append(_typed_next(events, i + 1, f))
                n += 1
                if n >= keys:
                    break
    out.steps.append({"op": "save"})
    out.final = {f: docs[f] for f in out.files}
    return out


def _typed_next(events: list[dict], start: int, f: str, max_chars: int = 200) -> str:
    typed = ""
    for ev in events[start:]:
        if ev.get("type") in ("commit", "checkpoint"):
            continue
        if ev.get("type") != "insert" or ev.get("file") != f or len(typed) >= max_chars:
            break
        typed += ev["text"]
    return typed


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


def word_accept_chars(shown: str, typed_next: str) -> int:
    """How much of `shown` the person could take with VS Code's accept-word (Ctrl+Right) and still
    have typed what they typed next: the common beginning, cut back to the last word boundary
    within it. A suggestion right for its first words and wrong after them is worth those words
    here, and nothing in `useful` (which asks for the whole text)."""
    n = 0
    while n < len(shown) and n < len(typed_next) and shown[n] == typed_next[n]:
        n += 1
    if n == len(shown):
        return n
    while n > 0 and _word(shown[n - 1]) and _word(shown[n]):
        n -= 1
    return n


def summarize(keys: list[dict], typed_next: list[str]) -> dict:
    """Per-key times (None: not shown before the next key, sorts last), shown and useful shares."""
    lat = [k["shown_ms"] if k["shown_ms"] is not None and k["shown_ms"] <= k["window_ms"] else None for k in keys]
    inf = [x if x is not None else float("inf") for x in lat]
    shown = [k["text"].replace("\xa0", " ") for k in keys]  # the DOM draws spaces as no-break spaces
    useful = [bool(s.strip()) and t is not None and nxt.startswith(s) for s, t, nxt in zip(shown, lat, typed_next)]
    # a multi-line suggestion whose first line is right is worth a line (VS Code accepts by word and line)
    first = [s.split("\n", 1)[0] if s.split("\n", 1)[0].strip() else s for s in shown]
    useful_line = [bool(f.strip()) and t is not None and nxt.startswith(f) for f, t, nxt in zip(first, lat, typed_next)]
    words = [word_accept_chars(s, nxt) if t is not None and s.strip() else 0 for s, t, nxt in zip(shown, lat, typed_next)]
    return {
        "keys": len(keys),
        "shown_share": round(sum(x is not None for x in lat) / max(1, len(lat)), 3),
        "useful_share": round(sum(useful) / max(1, len(lat)), 3),
        "useful_chars": sum(len(s) for s, u in zip(shown, useful) if u),
        "useful_line_share": round(sum(useful_line) / max(1, len(lat)), 3),
        "word_accept_share": round(sum(w > 0 for w in words) / max(1, len(lat)), 3),  # keys with a right first word
        "word_accept_chars": sum(words),
        "p50_ms": _pct(inf, 0.5),
        "p90_ms": _pct(inf, 0.9),
        "shown_p50_ms": _pct([x for x in lat if x is not None], 0.5),
        "shown_p90_ms": _pct([x for x in lat if x is not None], 0.9),
        "per_key": [
            {"at": k.get("at"), "shown_ms": t, "window_ms": k["window_ms"], "shown": s, "useful": u}
            for k, t, s, u in zip(keys, lat, shown, useful)
        ],
    }


def run_client(client: Client, sl: Slice, workdir: str, request_log: str | None) -> dict:
    """Replay the slice in a fresh code-server with `client` installed; its summary, with where
    each key's time went by fimgate's `request_log` (None: another server, not known)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-editor-{client.name}-", dir=workdir))
    files = dict(sl.files)
    if client.open_first:
        files[client.open_first] = "notes\n"
    with code_server(tmp, client.vsix, {**TYPING_SETTINGS, **client.settings}, {}) as (url, work, env):
        for f, text in files.items():
            (work / f).parent.mkdir(parents=True, exist_ok=True)
            (work / f).write_text(text, encoding="utf-8")
        steps = tmp / "steps.json"
        steps.write_text(json.dumps(sl.steps))
        out = tmp / "keys.json"
        options = {"status": client.status, "openFirst": client.open_first, "closeTab": client.close_tab}
        subprocess.run(
            ["node", os.path.join(HERE, "replay.js"), url, str(steps), str(out), json.dumps(options)],
            env=env,
            check=True,
            timeout=3600,
            capture_output=True,
        )
        result = json.loads(out.read_text())
        if not result["ok"]:
            raise RuntimeError(f"{client.name}: the replay failed: {result.get('error')}")
        mismatches = [_first_difference(f, (work / f).read_text(encoding="utf-8"), text) for f, text in sl.final.items()]
        mismatches = [m for m in mismatches if m]
    summary = summarize(result["keys"], sl.typed_next)
    summary["where_time_went"] = None
    if request_log is not None:
        where = timeline(result["keys"], read_log(request_log))
        for key, seen_by_server in zip(summary["per_key"], where.pop("per_key")):
            key.update(seen_by_server)
        summary["where_time_went"] = where
    summary["faithful"] = not mismatches  # the saved files hold exactly what the trace typed
    summary["mismatches"] = mismatches
    summary["screenshot"] = str(out).replace(".json", ".png")
    return summary


def _first_difference(name: str, got: str, want: str) -> str:
    if got == want:
        return ""
    i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return f"{name} at {i}: saved {got[max(0, i - 20) : i + 30]!r}, typed {want[max(0, i - 20) : i + 30]!r}"


def parse_client(spec: str) -> tuple[str, str]:
    """ "llama.vscode@llama-server" -> ("llama.vscode", "llama-server"); no server named: fimgate."""
    name, _, server = spec.partition("@")
    server = server or "fimgate"
    if server not in SERVERS:
        raise ValueError(f"unknown server {server!r} in {spec!r}; known: {', '.join(SERVERS)}")
    if server != "fimgate" and not name.startswith("llama.vscode"):
        raise ValueError(f"{spec!r}: only llama.vscode speaks llama-server's /infill")
    return name, server


def _model_flag(serve_flags: list[str]) -> str | None:
    for i, flag in enumerate(serve_flags):
        if flag == "--model" and i + 1 < len(serve_flags):
            return serve_flags[i + 1]
        if flag.startswith("--model="):
            return flag.split("=", 1)[1]
    return None


def bench_editor(
    trace: str, keys: int, names: list[str], serve_flags: list[str], workdir: str, reactions: list[float] | None = None
) -> dict:
    """Each client types the trace's first `keys` keys; with `reactions`, as the accepting typist
    with each reaction time (fimgate/bench/editor/vscode_typist.py)."""
    from fimgate.backend.model.registry import resolve_model
    from fimgate.bench.editor.vscode_typist import type_accepting
    from fimgate.bench.typist.script import steps_of

    missing = [p for p in TOOLCHAIN if not os.path.exists(p)]
    if missing:
        raise RuntimeError(f"real VS Code is not installed here ({missing[0]}): run `make e2e-setup` in a checkout")
    specs = {n: parse_client(n) for n in names}
    known = clients("")
    unknown = [n for n, (name, _) in specs.items() if name not in known]
    if unknown:
        raise ValueError(f"unknown client {unknown[0]!r}; known: {', '.join(known)} (each may end in @{'|@'.join(SERVERS)})")
    missing = [f"{n}: {known[c].vsix}" for n, (c, _) in specs.items() if not os.path.exists(known[c].vsix)]
    if missing:
        raise RuntimeError(f"not built: {missing[0]} (run `make e2e-setup`)")
    stale = stale_vsix(FIMGATE_VSIX) if any(known[c].vsix == FIMGATE_VSIX for c, _ in specs.values()) else None
    if stale:
        raise RuntimeError(f"{FIMGATE_VSIX} is older than {stale}: rebuild it (cd vscode-extension && npm run package)")
    sl = trace_slice(read_events(trace), keys)
    steps = steps_of(read_events(trace), keys) if reactions else []
    request_log = os.path.join(workdir, "requests.jsonl")
    results: dict[str, dict] = {}
    rss = {"last": None, "peak": None}
    # every client (and reaction time) on a fresh server: none finds the K/V the one before left
    for n, (c, server) in specs.items():  # a client whose replay fails is reported as such; the others still count
        try:
            out: dict = {}
            for r in reactions or [None]:
                with contextlib.ExitStack() as stack:
                    if server == "fimgate":
                        proc, url = start_serve(*serve_flags, "--request-log", request_log)
                        stack.callback(stop, proc)
                    else:  # the same GGUF file fimgate serves
                        proc, url = None, stack.enter_context(llama_server(resolve_model(_model_flag(serve_flags))))
                    client = clients(url)[c]
                    if r is None:
                        out = run_client(client, sl, workdir, request_log if proc else None)
                    else:
                        out[f"reaction_{r:g}ms"] = type_accepting(client, steps, r, workdir)
                    if proc is not None:  # the gateway's resident memory after the keys (and peak): what the bound is about
                        rss = {k: rss_bytes(proc.pid, peak=k == "peak") for k in ("last", "peak")}
            results[n] = out
        except (RuntimeError, subprocess.SubprocessError) as e:
            results[n] = {"error": str(e)[:2000]}
    return {
        "trace": trace,
        "keys": keys,
        "serve_flags": serve_flags,
        "clients": results,
        "server_rss_mb": {k: None if v is None else round(v / 1e6, 1) for k, v in rss.items()},
        "request_log": read_log(request_log) if os.path.exists(request_log) else [],
    }
