"""Read a keystroke trace (../shared/traces/README.md) and turn it into debounced requests.

A request fires when `debounce_ms` pass after a keystroke (insert or delete) with no new event.
Each request carries the document and cursor at that moment, the time of the next event (a
completion arriving later is late), and what the person typed next (the ground truth: inserts
up to the next cursor move, delete or file switch).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class TraceRequest:
    index: int
    t_ms: float
    file: str
    text: str
    cursor: int
    next_event_ms: float | None
    typed_next: str
    prewarm: bool = False  # a cache warm-up when a file opens or the cursor jumps, not a completion
    context: tuple = ()  # other files' chunks sent with it (bench/workloads/context_ring.py)


class TraceError(ValueError):
    pass


def read_events(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    events = []
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise TraceError(f"{path}:{n}: not JSON: {e}") from e
    return events


def debounced_requests(
    events: list[dict], debounce_ms: float = 150.0, limit: int | None = None, check: bool = True, prewarm: bool = False
) -> Iterator[TraceRequest]:
    """Typing requests (and, with prewarm, warm-ups at each open and cursor jump); `limit`
    counts typing requests."""
    docs: dict[str, str] = {}
    cursor: dict[str, int] = {}
    out = 0
    for i, ev in enumerate(events):
        kind, f = ev.get("type"), ev.get("file")
        if kind == "open":
            docs[f], cursor[f] = ev["text"], 0
        elif kind == "move":
            cursor[f] = ev["offset"]
        elif kind == "delete":
            o, n = ev["offset"], ev["length"]
            docs[f] = docs[f][:o] + docs[f][o + n :]
            cursor[f] = o
        elif kind == "insert":
            o, text = ev["offset"], ev["text"]
            docs[f] = docs[f][:o] + text + docs[f][o:]
            cursor[f] = o + len(text)
        elif kind == "checkpoint" and check:
            got = hashlib.sha1(docs[f].encode("utf-8")).hexdigest()[:12]
            if got != ev["sha1"]:
                raise TraceError(f"event {i}: {f} does not match its checkpoint ({got} != {ev['sha1']})")
        if prewarm and kind in ("open", "move"):
            nxt = events[i + 1]["t"] if i + 1 < len(events) else None
            yield TraceRequest(
                index=-1, t_ms=ev["t"], file=f, text=docs[f], cursor=cursor[f], next_event_ms=nxt, typed_next="", prewarm=True
            )
        if kind not in ("insert", "delete"):
            continue
        nxt = events[i + 1]["t"] if i + 1 < len(events) else None
        if nxt is None or nxt - ev["t"] >= debounce_ms:
            yield TraceRequest(
                index=out,
                t_ms=ev["t"] + debounce_ms,
                file=f,
                text=docs[f],
                cursor=cursor[f],
                next_event_ms=nxt,
                typed_next=_typed_next(events, i + 1, f),
            )
            out += 1
            if limit is not None and out >= limit:
                return


def _typed_next(events: list[dict], start: int, f: str, max_chars: int = 200) -> str:
    typed = []
    n = 0
    for ev in events[start:]:
        if ev.get("type") != "insert" or ev.get("file") != f:
            if ev.get("type") in ("commit", "checkpoint"):
                continue
            break
        typed.append(ev["text"])
        n += len(ev["text"])
        if n >= max_chars:
            break
    return "".join(typed)
