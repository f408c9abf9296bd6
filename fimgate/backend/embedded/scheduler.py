"""Continuous batching for the embedded engine: many requests, one step at a time for all of them.

A request is a coroutine (EmbeddedEngine._request): it yields the text it streams, and the
compute it needs next - a `StepWork` (one token: a keystroke's 1-token append or a decoding
step) or a `PrefillWork` (a prompt's uncached tokens) - and is sent the logits back. Each
iteration of the loop:

    admit     waiting requests, most urgent first, while a slot is free
    step      every StepWork of every running request in ONE batched forward (each weight is
              read once for all of them: on a CPU a one-token step costs what reading the
              weights costs, so 8 people's steps cost little more than one); a request
              alone in the step also runs its draft tokens (speculative decoding) as rows
    prefill   one chunk (PREFILL_CHUNK_TOKENS) of the most urgent PrefillWork, so a re-anchor
              or a warm-up never holds the others for longer than one chunk (a request alone
              on the engine takes PREFILL_CHUNK_ALONE at a time; a background one, whose
              urgency is BACKGROUND, never: a key may come at any moment). A chunk runs a
              layer at a time: a more urgent request arriving pauses it between two layers
              (the loop admits and serves that one, and the chunk goes on where it stopped
              when it is the most urgent prefill again), so a keystroke waits for one layer
              of a warm-up, not its whole chunk (~1/24 of 64-256 tokens' prefill)

A cancelled request's chunk stops within a layer when someone else waits, except for its heir:
a request of the same user whose prompt shares most of the chunk's tokens (the person's next
key at the same place, a warm-up's successor). Then the chunk runs to its end at the heir's
urgency, the heir waits for it and claims the slot that holds it: a prompt longer than the time
between two keys is computed once across the keys, not restarted and dropped on each of them.

Urgency is fimgate/backend/urgency.py's `order_key`: arrival time, a warm-up's as if it had
arrived WARMUP_YIELD_S later, so typing that comes within that time prefills first, and a
warm-up runs no chunk while a more urgent request decodes: a keystroke's suggestion decodes at
full speed, not one chunk per token. A
cancelled request is sent None instead of its logits and finishes at once (a prefill between
two chunks: what it computed is kept). Batched rows equal the same request run alone bit for
bit (tests/integration/test_batching.py).

Who runs the loop: in a server, the main thread (fimgate/backend/main_thread.py: `drive_on`),
while request threads wait for their events; elsewhere (tests, `fimgate complete`, benchmarks)
the thread that waits for a request runs iterations itself until its request is done.
"""

from __future__ import annotations

import bisect
import math
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, ContextManager, Generator, Iterator, Protocol

import torch

from fimgate.backend.base import BackendUnavailableError, CancelToken, StreamEvent
from fimgate.backend.block_tree import common_prefix
from fimgate.backend.embedded.prefill_rate import PrefillRate
from fimgate.backend.urgency import BACKGROUND

PREFILL_CHUNK_TOKENS = 64  # ~110 ms of prefill on the 2-core development machine
PREFILL_CHUNK_ALONE = 256  # with nobody else to serve: fewer, larger products (64-token chunks cost +28% at 512)


@dataclass
class StepWork:
    """One token at `position` of `kv`; the logits after it. With a draft (not None), its
    tokens run as rows at the positions after it (the scheduler may cut them, to none) and the
    reply is a list: the logits after each row run."""

    token: int
    position: int
    kv: object  # fimgate.backend.model.llama.KVBuffer
    argmax_only: bool = False
    only_ids: list[int] | None = None
    draft: tuple[int, ...] | None = None
    hidden: list[torch.Tensor] | None = None  # filled by the compute: each row's last hidden state (slot.py)


@dataclass
class PrefillWork:
    """Tokens `ids` at `positions` (ascending) of `kv`; the logits after the last. `done`: how
    many have run (they run in chunks). at_once: a key's few tokens, run in one call where the
    compute can (not layer by layer: nothing pauses it)."""

    ids: list[int]
    positions: list[int]
    kv: object
    argmax_only: bool = False
    only_ids: list[int] | None = None
    done: int = 0
    at_once: bool = False
    hidden: list[torch.Tensor] = field(default_factory=list)  # the compute appends the last token's hidden state


Work = StepWork | PrefillWork


class Compute(Protocol):
    def run_steps(self, works: list[StepWork]) -> list[torch.Tensor] | None: ...  # None: stopped
    def stoppable_steps(self) -> ContextManager: ...  # yields a flag (.value = 1 stops the step) or None
    def prefill_by_layer(self, work: PrefillWork, end: int) -> Generator[None, None, torch.Tensor | None]: ...
    def free_slots(self) -> int: ...

    num_layers: int  # what prefill_by_layer yields after (one a layer)


_END = object()


@dataclass
class _Request:
    coro: Generator
    cancel: CancelToken
    priority: float
    seq: int
    warmup: bool = False
    out: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    work: Work | None = None
    chunk: Generator | None = None  # its prefill chunk, paused between two layers
    chunk_end: int = 0  # where that chunk ends in work.ids
    chunk_s: float = 0.0  # the time its layers have run so far
    chunk_layers: int = 0  # ... and how many have
    owner: str | None = None  # the user whose cache it fills (an heir must be the same user)
    prompt: tuple[int, ...] = ()  # its whole prompt (what an heir would reuse)


class BatchScheduler:
    def __init__(self, compute: Compute, lock: threading.Lock) -> None:
        self.compute = compute
        self.lock = lock  # held while an iteration runs (the engine's tree, slots and pool)
        self._waiting: list[_Request] = []
        self._running: list[_Request] = []
        self._guard = threading.Lock()  # _waiting, _seq, _driving
        self._seq = 0
        self._runner = None  # a MainThreadRunner: it runs the loop; None: waiting threads do
        self._driving = False  # a drive job is queued or running on the runner
        self._in_drive = False  # ... and running
        self.iterations = 0
        self.submitted = 0  # requests ever queued
        self.batched_steps = 0  # steps that ran in a batch of more than one
        self.stopped_steps = 0  # steps stopped part way: all their requests were cancelled
        self.max_batch = 0
        self.paused_chunks = 0  # prefill chunks paused between two layers for a more urgent request
        self.prefill_rate = PrefillRate()  # measured on the chunks that ran to their end

    def drive_on(self, runner) -> None:
        """From now on the loop runs on `runner` (fimgate/backend/main_thread.py); None: the
        threads that wait for requests run it."""
        with self._guard:
            self._runner = runner
            self._driving = False

    # -- requests --------------------------------------------------------------------------
    def run(
        self,
        coro: Generator,
        cancel: CancelToken,
        priority: float,
        warmup: bool = False,
        owner: str | None = None,
        prompt: tuple[int, ...] = (),
    ) -> Iterator[StreamEvent]:
        """Queue a request coroutine; its events, as the loop makes them. A warm-up's chunks wait
        while a more urgent request decodes (typing's steps do not each pay for a chunk). `owner`
        and `prompt`: whose cache its prefill fills, with what (module docstring: heirs)."""
        with self._guard:
            self._seq += 1
            self.submitted += 1
            req = _Request(coro, cancel, priority, self._seq, warmup, owner=owner, prompt=prompt)
            self._waiting.append(req)
            start_driver = self._runner is not None and not self._driving
            if start_driver:
                self._driving = True
        if start_driver:
            self._runner.submit(self._drive, priority=priority)
        finished = False
        try:
            while True:
                ev = self._next_event(req)
                if ev is _END:
                    finished = True
                    return
                if isinstance(ev, BaseException):
                    finished = True
                    raise ev
                yield ev
        finally:
            if not finished:  # the caller stopped listening: stop computing for it
                cancel.cancel()

    def _next_event(self, req: _Request):
        while True:
            try:
                return req.out.get_nowait()
            except queue.Empty:
                pass
            runner = self._runner
            if runner is not None:
                try:
                    return req.out.get(timeout=0.5)
                except queue.Empty:
                    if getattr(runner, "stopped", False) and not self._in_drive:  # shut down: nobody will run it
                        raise BackendUnavailableError("the server is shutting down") from None
                    continue
            if self.lock.acquire(timeout=0.002):
                try:
                    if req.out.empty():
                        self._iterate()
                finally:
                    self.lock.release()

    def _drive(self) -> Iterator:
        """The runner's job: iterate until nothing is waiting or running."""
        self._in_drive = True
        try:
            while True:
                with self._guard:
                    if not self._waiting and not self._running:
                        self._driving = False
                        return
                with self.lock:
                    self._iterate()
                yield from ()
        finally:
            with self._guard:
                self._driving = self._in_drive = False

    def iterate(self) -> None:
        """One iteration, run by the caller (a replay driving the loop itself)."""
        with self.lock:
            self._iterate()

    def has_work(self) -> bool:
        with self._guard:
            return bool(self._waiting or self._running)

    # -- one iteration ---------------------------------------------------------------------
    def _iterate(self) -> None:
        # the cancelled finish first: a person's next request then finds the slot and blocks their
        # last one computed in (one that finishes a chunk for it goes on below)
        for r in [r for r in self._running if r.cancel.cancelled and not self._finishes_for_heir(r)]:
            self._advance(r, None)
        self._admit()
        steps = [r for r in self._running if isinstance(r.work, StepWork)]
        for r in [r for r in steps if r.cancel.cancelled]:
            self._advance(r, None)
            steps.remove(r)
        if steps:
            self._fit_drafts(steps)
            self._answer(steps, lambda: self._run_steps(steps))
            self.max_batch = max(self.max_batch, len(steps))
            self.batched_steps += len(steps) if len(steps) > 1 else 0
        prefills = [r for r in self._running if isinstance(r.work, PrefillWork)]
        if steps:  # a warm-up's chunk waits for those decoding ahead of it in line
            first = min(r.priority for r in steps)
            prefills = [r for r in prefills if not r.warmup or r.priority <= first or r.cancel.cancelled]
        if prefills:
            r = min(prefills, key=lambda r: (self._urgency(r), r.seq))
            if r.cancel.cancelled and not self._finishes_for_heir(r):
                self._advance(r, None)
            else:
                self._run_chunk(r)
        self.iterations += 1

    def _run_chunk(self, r: _Request) -> None:
        """r's prefill chunk, layer by layer, until it ends, r is cancelled while another waits
        who is not its heir (what the chunk computed is dropped: its positions are not counted
        done) or a more urgent request arrives (paused: the next iteration serves that one first)."""
        w = r.work
        if r.chunk is None:
            alone = len(self._running) == 1 and not self._waiting and r.priority != BACKGROUND
            r.chunk_end = min(len(w.ids), w.done + (PREFILL_CHUNK_ALONE if alone else PREFILL_CHUNK_TOKENS))
            r.chunk = self.compute.prefill_by_layer(w, r.chunk_end)
            r.chunk_s, r.chunk_layers = 0.0, 0
        try:
            while True:
                t = time.perf_counter()
                try:
                    next(r.chunk)
                finally:
                    r.chunk_s += time.perf_counter() - t
                r.chunk_layers += 1
                self._time_part(r, self.prefill_rate.running)
                if r.cancel.cancelled and self._someone_waits() and not self._finishes_for_heir(r):
                    return self._advance(r, None)
                if self._overtaken(r):
                    self.paused_chunks += 1
                    return
        except StopIteration as done:
            logits = done.value
        except Exception as e:  # noqa: BLE001 - the request's caller gets it
            return self._fail(r, e)
        r.chunk = None
        self.prefill_rate.add(r.chunk_end - w.done, r.chunk_s)
        w.done = r.chunk_end
        if w.done == len(w.ids):
            self._advance(r, logits)

    def _overtaken(self, r: _Request) -> bool:
        """A request more urgent than r has arrived and a slot is free to admit it (a racy read
        of the list: a request appended just after it is seen after the next layer)."""
        urgency = self._urgency(r)
        return any(q.priority < urgency and not q.cancel.cancelled for q in self._waiting[:]) and self.compute.free_slots() > 0

    def _heir(self, r: _Request) -> _Request | None:
        """The most urgent waiting request of r's user whose prompt shares at least half the
        tokens of r's chunk, or None."""
        if r.chunk is None or r.owner is None:
            return None
        span = r.work.positions[r.work.done : r.chunk_end]  # ascending
        heir = None
        for q in self._waiting[:]:
            if q.owner != r.owner or q.cancel.cancelled or (heir is not None and q.priority >= heir.priority):
                continue
            if 2 * bisect.bisect_left(span, common_prefix(q.prompt, r.prompt)) >= len(span):
                heir = q
        return heir

    def _someone_waits(self) -> bool:  # (a cancelled request waits for nothing)
        return any(not q.cancel.cancelled for q in self._waiting[:])

    def _finishes_for_heir(self, r: _Request) -> bool:
        return r.cancel.cancelled and self._heir(r) is not None

    def _urgency(self, r: _Request) -> float:
        """r's place in line: a cancelled request's is its heir's (or last: nobody needs it)."""
        if not r.cancel.cancelled:
            return r.priority
        heir = self._heir(r)
        return heir.priority if heir is not None else math.inf

    def _drop_chunk(self, r: _Request) -> None:
        """r's chunk is abandoned part way (r cancelled): what its layers that ran took is timed
        too, so the first prompt of a server (a file opened, then the cursor moved) tells its
        rate even when no chunk of it ever ends."""
        if r.chunk is not None:
            r.chunk.close()
            r.chunk = None
            self._time_part(r, self.prefill_rate.add)

    def _time_part(self, r: _Request, record) -> None:
        """record(tokens, seconds, share) of r's chunk: the share of its layers that have run."""
        if r.chunk_layers:
            record(r.chunk_end - r.work.done, r.chunk_s, share=min(1.0, r.chunk_layers / self.compute.num_layers))

    def _run_steps(self, steps: list[_Request]) -> list[torch.Tensor | None]:
        """The step; once every request in it is cancelled while it runs (a person's next key
        superseded their last), it stops between two layers and each gets None: the next key's
        request need not wait for a step nobody will read (~a step beside a busy editor)."""
        with self.compute.stoppable_steps() as stop:
            if stop is None:
                return self.compute.run_steps([r.work for r in steps])
            cancels = [r.cancel for r in steps]

            def check() -> None:
                if all(c.cancelled for c in cancels):
                    stop.value = 1

            for c in cancels:
                c.on_cancel(check)
            try:
                out = self.compute.run_steps([r.work for r in steps])
            finally:
                for c in cancels:
                    c.off_cancel(check)
            if out is None and not all(c.cancelled for c in cancels):
                stop.value = 0  # (a late hook of the step before) run it whole
                out = self.compute.run_steps([r.work for r in steps])
            if out is None:
                self.stopped_steps += 1
                return [None] * len(steps)
            return out

    @staticmethod
    def _fit_drafts(steps: list[_Request]) -> None:
        """Draft rows run only in a step of one request: beside others, batching already uses
        what the step has to spare, and a guess must not slow down their sure tokens."""
        if len(steps) > 1:
            for r in steps:
                if r.work.draft:
                    r.work.draft = ()

    def _answer(self, reqs: list[_Request], run: Callable[[], list[torch.Tensor]]) -> None:
        try:
            results = run()
        except Exception as e:  # noqa: BLE001
            for r in reqs:
                self._fail(r, e)
            return
        for r, logits in zip(reqs, results):
            self._advance(r, logits)

    def _admit(self) -> None:
        """The most urgent waiting requests, one a free slot; an heir waits until the chunk it
        inherits has ended (it then claims the slot that holds it)."""
        with self._guard:
            heirs = {id(self._heir(r)) for r in self._running if self._finishes_for_heir(r)}
            self._waiting.sort(key=lambda r: (r.priority, r.seq))
            admitted = [r for r in self._waiting if id(r) not in heirs][: self.compute.free_slots()]
            taken = {id(r) for r in admitted}
            self._waiting = [r for r in self._waiting if id(r) not in taken]
        for r in admitted:
            self._running.append(r)
            self._advance(r, None)  # runs it to its first compute (it claims its slot)

    def _advance(self, r: _Request, reply) -> None:
        """Send `reply` to the request; pass on what it streams until it needs compute again
        (a chunk it had paused is dropped: None means cancelled)."""
        self._drop_chunk(r)
        try:
            while True:
                item = r.coro.send(reply)
                reply = None
                if isinstance(item, (StepWork, PrefillWork)):
                    r.work = item
                    return
                r.out.put(item)
        except StopIteration:
            self._end(r, _END)
        except Exception as e:  # noqa: BLE001
            self._end(r, e)

    def _fail(self, r: _Request, e: BaseException) -> None:
        self._drop_chunk(r)
        r.coro.close()  # its finally releases the slot
        self._end(r, e)

    def _end(self, r: _Request, last) -> None:
        r.work = None
        if r in self._running:
            self._running.remove(r)
        if last is not _END:
            r.out.put(last)
        r.out.put(_END)

    def state(self) -> dict:
        with self._guard:
            waiting = len(self._waiting)
        return {
            "running": len(self._running),
            "waiting": waiting,
            "max_batch": self.max_batch,
            "iterations": self.iterations,
            "stopped_steps": self.stopped_steps,
        }
