"""`--request-log FILE`: one JSON line per request, written when it ends - when it arrived and was
planned (`at`, wall clock, so a client's own timestamps line up with it), what kind it was, when
its first text was ready to send, what it cost (the usage report) and how it ended. Never the text: a log an operator
keeps must not hold what people typed. Sessions are named by a hash of (user, document), enough
to follow one person's requests without naming them.

    {"at": 1764641234.512, "session": "3f2a9c1b", "kind": "typing", "first_text_ms": 41.2,
     "end_ms": 160.4, "chars": 23, "usage": {...UsageReport.as_dict()}}

kind: "typing" (a keystroke's request), "warmup" (prefill only), "type_through" (answered from the
session's last suggestion), "raw" (no editor shaping). A request whose stream was closed before
it finished (the client went away) has "usage": null and "closed": true.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Iterator

from fimgate.backend.base import Finished, StreamEvent, TextDelta


class RequestLog:
    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._file = open(path, "a", encoding="utf-8", buffering=1)  # a line at a time: tail -f works
        except OSError as e:
            raise ValueError(f"--request-log {path}: cannot write there ({e.strerror})") from None
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def watch(self, events: Iterator[StreamEvent], session: tuple[str, str], kind: str) -> Iterator[StreamEvent]:
        """`events`, unchanged; their line is written when they end. Timed from now (the request
        is planned), not from when its reader starts."""
        return self._watched(events, session, kind, time.time(), time.monotonic())

    def _watched(self, events, session, kind, at: float, t0: float) -> Iterator[StreamEvent]:
        first = None
        chars = 0
        usage = None
        try:
            for ev in events:
                if isinstance(ev, TextDelta) and ev.text:
                    if first is None:
                        first = time.monotonic()
                    chars += len(ev.text)
                elif isinstance(ev, Finished):
                    usage = ev.usage.as_dict()
                yield ev
        finally:
            now = time.monotonic()
            line = {
                "at": round(at, 4),
                "session": hashlib.sha256("\0".join(session).encode()).hexdigest()[:8],
                "kind": kind,
                "first_text_ms": None if first is None else round((first - t0) * 1000, 1),
                "end_ms": round((now - t0) * 1000, 1),
                "chars": chars,
                "usage": usage,
            }
            if usage is None:
                line["closed"] = True
            self._write(line)

    def _write(self, line: dict) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.write(json.dumps(line) + "\n")


def read_log(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
