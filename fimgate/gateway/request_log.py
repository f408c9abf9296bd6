"""`--request-log FILE`: one JSON line per request, written when it ends - when it arrived and was
planned (`at`, wall clock, so a client's own timestamps line up with it), what kind it was, when
its first text was ready to send, what it cost (the usage report) and how it ended. Never the text: a log an operator
keeps must not hold what people typed. Sessions are named by an HMAC of (user, document) under a
secret drawn when the server starts ($FIMGATE_LOG_SECRET keeps it across restarts): enough to
follow one person's requests in one log, not to recompute who they were. The file is bounded:
past `max_bytes` it is renamed FILE.1 (replacing the one before) and a new FILE begins, so the
log takes at most twice that.

    {"at": 1764641234.512, "session": "3f2a9c1b", "kind": "typing", "first_text_ms": 41.2,
     "end_ms": 160.4, "chars": 23, "usage": {...UsageReport.as_dict()}}

kind: "typing" (a keystroke's request), "first_window" (one answered from a short window while the
full one prefills: gateway/first_window.py), "warmup" (prefill only), "type_through" (answered from
the session's last suggestion), "raw" (no editor shaping). A request whose stream was closed before
it finished (the client went away) has "usage": null and "closed": true.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from typing import Iterator

from fimgate.backend.base import Finished, StreamEvent, TextDelta

MAX_BYTES = 64 << 20  # one file's size before it is rotated


class RequestLog:
    def __init__(self, path: str, max_bytes: int = MAX_BYTES, secret: bytes | None = None) -> None:
        self.path = path
        self.max_bytes = max_bytes
        env = os.environ.get("FIMGATE_LOG_SECRET")
        self._secret = secret or (env.encode() if env else secrets.token_bytes(32))
        self._file = self._open()
        self._lock = threading.Lock()

    def _open(self):
        try:
            return open(self.path, "a", encoding="utf-8", buffering=1)  # a line at a time: tail -f works
        except OSError as e:
            raise ValueError(f"--request-log {self.path}: cannot write there ({e.strerror})") from None

    def session_name(self, session: tuple[str, str]) -> str:
        return hmac.new(self._secret, "\0".join(session).encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:12]

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
                "session": self.session_name(session),
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
            if self._file.closed:
                return
            self._file.write(json.dumps(line) + "\n")
            if self._file.tell() >= self.max_bytes:  # rotate: FILE -> FILE.1, a new FILE
                self._file.close()
                os.replace(self.path, self.path + ".1")
                self._file = self._open()


def read_log(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
