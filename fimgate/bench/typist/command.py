"""`fimgate bench replay --accepting`: the accepting typist, per client, beside its model's ceiling.

Clients (`--clients`, comma-separated):

    fimgate                   fimgate's extension on `fimgate serve` as it runs by default: the
                              embedded engine's batching scheduler, first windows, warm-ups at
                              opens and rests after moves, the context ring (3,000 characters),
                              and a prefetch of the place each suggestion on screen leads to
                              (`fimgate-no-prefetch`: without it)
    ceiling                   the same client's answers on screen at the key that asked (zero
                              latency: no time budget, no first window): what this model can
                              spare a person at best
    llama.vscode@llama-server llama.vscode 0.0.63's requests to llama.cpp's llama-server on the same
                              GGUF file (3 completions a request, its default); `llama.vscode-1`: 1

`--floors` and `--multiline` make fimgate (and its ceiling) variants: the probability floor a
suggestion ends at (the extension's minTokenProb) and the single/multi-line policy (auto: the code
around the cursor decides, as serve does; off: one line always; on: a block always).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from fimgate.flags import UserError, load_engine

CLIENTS = ("fimgate", "fimgate-no-prefetch", "ceiling", "llama.vscode@llama-server", "llama.vscode-1@llama-server")


class _Clocked:
    """The service's planner with its plans stamped with the replay's clock, and fimgate's
    extension's request (its sampling, the multi-line policy)."""

    def __init__(self, planner, multiline: bool | None) -> None:
        self.planner = planner
        self.multiline = multiline
        self.now_s: float | None = None
        self.last = None

    def request(self, state, sampling):
        from fimgate.gateway.service import Shape

        return sampling, Shape(multiline=self.multiline)

    def plan(self, state, sampling):
        self.last = replace(self.planner.plan(state, sampling), issued_at_s=self.now_s)
        return self.last

    def __getattr__(self, name):
        return getattr(self.planner, name)


def fimgate_served(engine, template: str | None, multiline: bool | None, first_window: bool = True):
    """(service, planning): the service `fimgate serve` builds by default, on `engine` (without its
    first windows: a latency measure, which a zero-latency ceiling has no use for)."""
    from fimgate.gateway.build import ServiceConfig, service_on
    from fimgate.gateway.first_window import TOKENS

    service = service_on(engine, ServiceConfig(template=template, first_window_tokens=TOKENS if first_window else 0))
    service.planner = _Clocked(service.planner, multiline)
    return service, service.planner


def floats_of(text: str, what: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 0:
        raise UserError(f"{what} takes numbers >= 0, e.g. 300,0")
    return values


MULTILINE = {"auto": None, "off": False, "on": True}


def cmd_bench_typist(a) -> dict:
    from fimgate.bench.peers.llama_server import LlamaServerPeer, llama_server
    from fimgate.bench.replay.strategies import served
    from fimgate.bench.typist.person import Person
    from fimgate.bench.typist.rule import LLAMA_VSCODE, VSCODE, WordRule
    from fimgate.bench.typist.screens import EXTENSION_SAMPLING, at_once, on_engine, one_at_a_time
    from fimgate.bench.typist.script import steps_of
    from fimgate.bench.workloads.trace import TraceError, read_events
    from fimgate.efim.templates import TEMPLATES, template_for_model

    clients = [c.strip() for c in a.clients.split(",") if c.strip()]
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        raise UserError(f"unknown client {unknown[0]!r}; known: {', '.join(CLIENTS)}")
    reactions = floats_of(a.reaction_ms, "--reaction-ms")
    floors = floats_of(a.floors, "--floors")
    policies = [p.strip() for p in a.multiline.split(",") if p.strip()]
    if not policies or any(p not in MULTILINE for p in policies):
        raise UserError("--multiline takes auto, off, on (comma-separated)")
    if a.keys < 1:
        raise UserError("--keys must be at least 1")
    try:
        steps = steps_of(read_events(a.trace), a.keys)
    except (TraceError, OSError) as e:
        raise UserError(str(e)) from None
    engine = load_engine(a)
    tmpl = TEMPLATES[a.template] if a.template else template_for_model(engine.model_name)
    results: dict[str, dict] = {}

    def person(reaction: float, warmups: bool = False, prefetch: bool = False, words: WordRule = VSCODE) -> Person:
        return Person(steps, reaction, warmups=warmups, context_chars=a.context_chars, prefetch=prefetch, words=words)

    for floor, policy, reaction in itertools.product(floors, policies, reactions):
        variant = "" if (floor, policy) == (0.6, "auto") else f"[floor={floor:g},multiline={policy}]"
        sampling = replace(EXTENSION_SAMPLING, min_token_prob=floor or None)
        for name in ("fimgate", "fimgate-no-prefetch", "ceiling"):
            if name not in clients:
                continue
            engine.reset()
            ours = name != "ceiling"
            p = person(reaction, warmups=ours, prefetch=name == "fimgate")
            run = fimgate_served(engine, a.template, MULTILINE[policy], first_window=ours)
            if ours:
                on_engine(p, run, engine, sampling)
            else:  # no time budget either: at zero latency it never runs out
                at_once(p, run, replace(sampling, max_predict_ms=None))
            results.setdefault(name + variant, {})[f"reaction_{reaction:g}ms"] = p.summary()
    peers = [c for c in clients if c.endswith("@llama-server")]
    if peers:
        from fimgate.backend.model.registry import resolve_model

        with llama_server(resolve_model(a.model)) as url:
            for name in peers:
                peer = LlamaServerPeer(
                    url, engine.tokenizer, engine.model_name, n_cmpl=1 if name.startswith("llama.vscode-1") else 3
                )
                for reaction in reactions:
                    p = person(reaction, words=LLAMA_VSCODE)  # its own Ctrl+Right
                    one_at_a_time(p, served(peer.strategy("llama.vscode", tmpl), peer))
                    results.setdefault(name, {})[f"reaction_{reaction:g}ms"] = p.summary()
    for name, rows in results.items():  # each fimgate row against its own ceiling
        ceiling = results.get(name.replace("fimgate", "ceiling", 1))
        ceiling = ceiling or results.get(name.replace("fimgate-no-prefetch", "ceiling", 1))
        if name.startswith("fimgate") and ceiling:
            for key, row in rows.items():
                top = ceiling[key]["saved_share"]
                row["of_ceiling"] = round(row["saved_share"] / top, 4) if top else None
    return {
        "trace": a.trace,
        "keys": a.keys,
        "model": engine.model_name,
        "template": tmpl.name,
        "context_chars": a.context_chars,
        "clients": results,
    }


def ceiling_of(steps, model: str | None, reactions: list[float], context_chars: int = 3000) -> dict:
    """The zero-latency ceiling of fimgate's client on `model` (the default: None), per reaction
    time, for `bench editor --accepting`: what that model can spare the person at best."""
    from fimgate.bench.typist.person import Person
    from fimgate.bench.typist.screens import EXTENSION_SAMPLING, at_once
    from fimgate.gateway.build import ServiceConfig, build_backend

    engine = build_backend(ServiceConfig(model=model))
    out = {}
    for reaction in reactions:
        engine.reset()
        p = Person(steps, reaction, context_chars=context_chars)
        at_once(p, fimgate_served(engine, None, None, first_window=False), replace(EXTENSION_SAMPLING, max_predict_ms=None))
        out[f"reaction_{reaction:g}ms"] = p.summary()
    return out
