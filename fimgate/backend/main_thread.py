"""Run the engine's compute on the process's main thread, whoever asks for it.

Measured here (torch 2.13 CPU, MKL + OpenMP, 2 cores): the same small matmul costs 36 us from
the main thread and 130-200 us from any other thread, and decoding runs at 12 instead of 21-25
tokens/s. Servers (uvicorn, pygls) want their event loop and worker threads, so the main thread
serves compute instead: callers submit a generator job and read its events from a queue.

    request thread:  events = runner.submit(lambda: engine.generate(plan, cancel))
                     for ev in events: ...          # blocks on the queue
    main thread:     runner.serve_forever()         # drives each generator to its end, in order
"""

from __future__ import annotations

import itertools
import queue
import threading
from typing import Callable, Iterator

from fimgate.backend.base import BackendUnavailableError

_DONE = object()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class MainThreadRunner:
    def __init__(self) -> None:
        self._jobs: queue.PriorityQueue = queue.PriorityQueue()
        self._seq = itertools.count()
        self._stopped = threading.Event()

    def submit(self, make: Callable[[], Iterator], priority: float = 0) -> Iterator:
        """Queue a job; iterate the result to receive its events as the main thread makes them.
        Queued jobs run by priority (lower first; the gateway passes fimgate.backend.urgency.order_key),
        then in order. After stop(), a job fails at once."""
        out: queue.Queue = queue.Queue()
        if self._stopped.is_set():
            out.put(_Failure(BackendUnavailableError("the server is shutting down")))
            out.put(_DONE)
        else:
            self._jobs.put((priority, next(self._seq), make, out))

        def events() -> Iterator:
            while True:
                item = out.get()
                if item is _DONE:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                yield item

        return events()

    def serve_forever(self, until: Callable[[], bool] | None = None) -> None:
        """Call from the main thread; returns after stop(), or once `until()` says so."""
        while not self._stopped.is_set() and not (until is not None and until()):
            try:
                _, _, make, out = self._jobs.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                for ev in make():
                    out.put(ev)
            except BaseException as e:  # handed to the caller, who reports it
                out.put(_Failure(e))
            finally:
                out.put(_DONE)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def stop(self) -> None:
        """serve_forever returns after the job it is running; jobs still queued fail at once."""
        self._stopped.set()
        while True:
            try:
                _, _, _, out = self._jobs.get_nowait()
            except queue.Empty:
                return
            out.put(_Failure(BackendUnavailableError("the server is shutting down")))
            out.put(_DONE)
