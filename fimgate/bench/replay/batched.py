"""`fimgate bench replay` on the embedded engine as `fimgate serve` runs it: requests together.

The serial replay (fimgate/bench/replay/simulate.py) runs one request at a time on a simulated clock.
The embedded engine batches (fimgate/backend/embedded/scheduler.py): a request that arrives
while others decode joins their steps, prompts prefill in chunks between steps. So this replay
runs the real scheduler on a clock that is real time while the engine computes and jumps over
the gaps where nobody has anything running:

    clock(ms) = perf_counter() * 1000 + offset        offset grows only while the engine is idle

Each request goes through the CompletionService at its arrival (planning, cancel-previous,
type-through, warm-ups with max_tokens 0) and a thread reads its events, as an HTTP handler
would; this thread runs the scheduler's iterations, as serve's main thread does. At the
person's next key the request is cancelled (the extension cancels it; the gateway's
cancel-previous would too); its text then was never shown. Times come from the engine's own
report (first token and end, on the same clock), so the readers' thread wake-ups do not count.
"""

from __future__ import annotations

import heapq
import threading
import time

from fimgate.backend.base import CancelToken, Finished, SamplingParams
from fimgate.bench.replay.simulate import REPLAY_SAMPLING, Outcome, not_asked
from fimgate.bench.replay.strategies import Strategy, served
from fimgate.bench.workloads.trace import TraceRequest
from fimgate.efim.planner import EditorState
from fimgate.gateway.service import Shape


class _Clock:
    def __init__(self) -> None:
        self.offset = -time.perf_counter() * 1000  # starts at 0

    def now(self) -> float:
        return time.perf_counter() * 1000 + self.offset

    def at_perf(self, perf_s: float) -> float:
        return perf_s * 1000 + self.offset

    def jump_to(self, t_ms: float) -> None:
        self.offset += max(0.0, t_ms - self.now())


class _Flight:
    """One request in flight: its reader thread fills `final` and `finished_at` (perf time)."""

    def __init__(self, k: int, r: TraceRequest, t_req: float, plan, cancel: CancelToken) -> None:
        self.k, self.r, self.t_req, self.plan, self.cancel = k, r, t_req, plan, cancel
        self.final: Finished | None = None
        self.finished_at: float | None = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None


def _read(flight: _Flight, events) -> None:
    try:
        for ev in events:
            if isinstance(ev, Finished):
                flight.final = ev
                flight.finished_at = time.perf_counter()
    except BaseException as e:  # noqa: BLE001 - reported by the replay
        flight.error = e


def replay_batched(
    engine, strategy: Strategy, slices: list[list[TraceRequest]], sampling: SamplingParams = REPLAY_SAMPLING, progress=None
) -> tuple[list[Outcome], dict]:
    """Every person's requests on one batching engine; (outcomes, throughput)."""
    service, planning = served(strategy, engine)
    clock = _Clock()
    arrivals = [(r.t_ms, k, i) for k, part in enumerate(slices) for i, r in enumerate(part)]
    heapq.heapify(arrivals)
    keys: list = []  # (next key's time, seq, flight): cancel what is still running then
    flights: list[_Flight] = []
    outcomes: list[Outcome] = []
    sched = engine.scheduler
    engine.drive_on(_External())  # readers wait for events; this thread runs the iterations
    seq = 0
    try:
        while arrivals or flights:
            now = clock.now()
            while arrivals and arrivals[0][0] <= now:
                t, k, i = heapq.heappop(arrivals)
                r = slices[k][i]
                asked = (SamplingParams(max_tokens=0), Shape()) if r.prewarm else planning.request(_state(r, k), sampling)
                if asked is None:
                    outcomes.append(not_asked(k, r, t))
                    continue
                f = _start(service, planning, r, k, t, now, asked)
                flights.append(f)
                if not slices[k][i].prewarm and slices[k][i].next_event_ms is not None:
                    seq += 1
                    heapq.heappush(keys, (slices[k][i].next_event_ms, seq, f))
            while keys and keys[0][0] <= now:  # the person's next key: what still runs is never shown
                heapq.heappop(keys)[2].cancel.cancel()
            if sched.has_work():
                sched.iterate()
            else:
                done = [f for f in flights if not f.thread.is_alive()]
                for f in done:
                    flights.remove(f)
                    outcomes.append(_outcome(f, clock))
                if progress and done:
                    progress(len(outcomes))
                if flights:  # readers finishing, or a request not yet handed to the engine
                    time.sleep(0.0002)
                elif arrivals:
                    clock.jump_to(arrivals[0][0])
    finally:
        engine.drive_on(None)
    for f in flights:
        outcomes.append(_outcome(f, clock))
    ran = [o for o in outcomes if not o.dropped]
    span_s = clock.now() / 1000
    return outcomes, {
        "virtual_seconds": round(span_s, 1),
        "requests_ran_per_s": round(len(ran) / span_s, 2) if span_s else None,
        "completion_tokens_per_s": round(sum(o.completion_tokens for o in ran) / span_s, 2) if span_s else None,
        "largest_batch": sched.max_batch,
    }


class _External:
    """drive_on() target for a replay: the replay's thread iterates; readers just wait."""

    def submit(self, make, priority: float = 0):
        return iter(())


def _state(r: TraceRequest, k: int) -> EditorState:
    return EditorState(f"u{k}", r.file, r.text, r.cursor, path=r.file, context=r.context)


def _start(service, planning, r: TraceRequest, k: int, t_req: float, now: float, asked: tuple) -> _Flight:
    return start_flight(service, planning, _state(r, k), now, asked, _Flight(k, r, t_req, None, None))


def start_flight(service, planning, state: EditorState, now: float, asked: tuple, f: _Flight) -> _Flight:
    """Start `state`'s request on the service at replay time `now` (ms), read by a thread into
    `f` (its plan and cancel token filled in); back once the engine has it (or type-through
    answered)."""
    planning.now_s = now / 1000
    planning.last = None
    events, f.cancel = service.start(state, *asked)
    f.plan = planning.last
    f.thread = threading.Thread(target=_read, args=(f, events), daemon=True)
    before = service.backend.scheduler.submitted
    f.thread.start()
    while f.thread.is_alive() and service.backend.scheduler.submitted == before:
        time.sleep(0.0001)  # until the reader has handed it to the engine (or type-through answered)
    return f


def _outcome(f: _Flight, clock: _Clock) -> Outcome:
    r = f.r
    if f.error is not None:
        raise f.error
    u = f.final.usage
    if r.prewarm:
        ran = not (u.cancelled and u.prefilled_tokens == 0)
        latency = None if not ran else (u.total_ms or 0)
        return Outcome(
            f.k,
            None,
            latency,
            False,
            u.cancelled,
            not ran,
            u.prompt_tokens,
            u.prefix_cached_tokens,
            u.shifted_cached_tokens,
            u.recomputed_tokens,
            u.prefilled_tokens,
            f.plan.reuse_class.value if f.plan else "",
            prewarm=True,
            index=r.index,
        )
    end = clock.at_perf(f.finished_at)
    start = end - (u.total_ms or 0)
    ttft = None if u.ttft_ms is None else start + u.ttft_ms - f.t_req
    dropped = u.ttft_ms is None and u.cancelled
    late = ttft is None or (r.next_event_ms is not None and f.t_req + ttft > r.next_event_ms)
    return Outcome(
        f.k,
        None if dropped else ttft,
        None if dropped else end - f.t_req,
        late,
        u.cancelled,
        dropped,
        u.prompt_tokens,
        u.prefix_cached_tokens,
        u.shifted_cached_tokens,
        u.recomputed_tokens,
        u.prefilled_tokens,
        "type-through" if u.type_through else (f.plan.reuse_class.value if f.plan else ""),
        f.final.text,
        r.typed_next,
        index=r.index,
        queued_ms=None if ttft is None else max(0.0, start - f.t_req),
        t_ms=f.t_req,
        completion_tokens=u.completion_tokens,
        draft_tokens=u.draft_tokens,
        accepted_draft_tokens=u.accepted_draft_tokens,
    )
