"""Where the accepting typist's suggestions come from, and when they reach the screen.

    at_once        the model's zero-latency ceiling: the served answer, on screen at the key
                   that asked for it (the clock stands still while the model computes)
    on_engine      fimgate as `serve` runs it: the embedded engine's batching scheduler on a clock
                   that is real time while it computes and jumps over the gaps where nothing runs
                   (fimgate/bench/replay/batched.py); a new request cancels the session's one in
                   flight, as the gateway's cancel-previous does
    one_at_a_time  a backend that does not batch (llama-server): requests one after another,
                   each taking the time it really took; one superseded before it started is dropped

Every answer goes through the CompletionService `serve` runs (plan, run, clean up) with the
strategy's requests: fimgate's extension's settings, or llama.vscode's own bodies.
"""

from __future__ import annotations

import time

from fimgate.backend.base import SamplingParams
from fimgate.bench.replay.batched import _Clock, _External, _Flight, start_flight
from fimgate.bench.typist.person import Ask, Person
from fimgate.efim.planner import EditorState
from fimgate.gateway.service import Shape

# what fimgate's VS Code extension asks (vscode-extension/package.json: maxTokens, maxPredictMs, minTokenProb)
EXTENSION_SAMPLING = SamplingParams(max_tokens=48, max_predict_ms=200, min_token_prob=0.6)
USER = "typist"


def _state(ask: Ask) -> EditorState:
    return EditorState(USER, ask.file, ask.text, ask.cursor, path=ask.file, context=ask.context)


def _asked(planning, ask: Ask, sampling: SamplingParams) -> tuple[SamplingParams, Shape] | None:
    if ask.warmup:
        return SamplingParams(max_tokens=0), Shape()
    return planning.request(_state(ask), sampling)


def at_once(person: Person, served, sampling: SamplingParams = EXTENSION_SAMPLING) -> None:
    service, planning = served
    while not person.done:
        _, asks = person.act()
        for ask in asks:
            asked = _asked(planning, ask, sampling)
            if ask.warmup or asked is None:
                continue
            person.show(ask, service.complete(_state(ask), *asked).text, ask.t_ms)


def on_engine(person: Person, served, engine, sampling: SamplingParams = EXTENSION_SAMPLING) -> None:
    service, planning = served
    clock = _Clock()
    sched = engine.scheduler
    flights: list[tuple[Ask, _Flight]] = []
    engine.drive_on(_External())  # readers wait for events; this thread runs the iterations
    try:
        while not person.done:
            t = person.next_ms()
            while True:
                for ask in _deliver(person, flights, clock, t):  # prefetches
                    asked = _asked(planning, ask, sampling)
                    if asked is not None:
                        flights.append((ask, _start(service, planning, ask, clock.now(), asked)))
                t = person.next_ms()  # an answer on screen may bring an accept forward
                if clock.now() >= t:
                    break
                if sched.has_work():
                    sched.iterate()
                elif any(f.thread.is_alive() for _, f in flights):
                    time.sleep(0.0002)  # readers finishing, or a request not yet handed to the engine
                else:
                    clock.jump_to(t)
            _, asks = person.act()
            for ask in asks:
                asked = _asked(planning, ask, sampling)
                if asked is not None:
                    flights.append((ask, _start(service, planning, ask, clock.now(), asked)))
        for _, f in flights:  # the person is done: nothing more is shown
            f.cancel.cancel()
        while sched.has_work():
            sched.iterate()
    finally:
        engine.drive_on(None)


def _start(service, planning, ask: Ask, now: float, asked: tuple) -> _Flight:
    return start_flight(service, planning, _state(ask), now, asked, _Flight(0, None, ask.t_ms, None, None))


def _deliver(person: Person, flights: list, clock: _Clock, until_ms: float) -> list[Ask]:
    """Show the answers that were complete by `until_ms`, in the order they came; what the
    client asks for next."""
    done = []
    for ask, f in flights:
        if not f.thread.is_alive():
            if f.error is not None:
                raise f.error
            at = clock.at_perf(f.finished_at)
            if at <= until_ms:
                done.append((at, ask, f))
    asks = []
    for at, ask, f in sorted(done, key=lambda d: d[0]):
        flights.remove((ask, f))
        if f.final is not None and f.final.usage.finish_reason != "cancelled":  # (superseded: nothing to show)
            asks += person.show(ask, f.final.text, max(at, ask.t_ms))
        else:
            asks += person.lost(ask, max(at, ask.t_ms))
    return asks


def one_at_a_time(person: Person, served, sampling: SamplingParams = EXTENSION_SAMPLING) -> None:
    service, planning = served
    free_ms = 0.0  # when the backend is next free
    queue: list[tuple[Ask, tuple]] = []  # asked, not started
    held: list[tuple[float, Ask, str]] = []  # answers computed, on screen at their time
    while not person.done:
        t = person.next_ms()
        while True:
            if queue and free_ms < t:
                ask, asked = queue[-1]  # the latest; the ones before it were superseded before they started
                queue.clear()
                start = max(free_ms, ask.t_ms)
                planning.now_s = start / 1000
                began = time.perf_counter()
                text = service.complete(_state(ask), *asked).text
                free_ms = start + (time.perf_counter() - began) * 1000
                held.append((free_ms, ask, text))
            for h in sorted((h for h in held if h[0] <= t), key=lambda h: h[0]):
                held.remove(h)
                person.show(h[1], h[2], h[0])
            t_next = person.next_ms()  # an answer on screen may bring an accept forward
            if t_next >= t and not (queue and free_ms < t_next):
                break
            t = t_next
        _, asks = person.act()
        for ask in asks:
            asked = None if ask.warmup else _asked(planning, ask, sampling)
            if asked is not None:
                queue.append((ask, asked))
