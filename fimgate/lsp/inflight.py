"""Answer a key with what is already decided of the suggestion in flight, not with a new request.

An LSP client asks on every key and shows whole answers only. A fresh suggestion takes longer to
decode (~10-20 tokens) than the median gap between keys, so if every key asked anew, each would
cancel the one before and most keys would never show anything. Instead, per document, the server
keeps the last suggestion asked for - the text before and after the cursor it was asked at, and
its text so far, which grows as the gateway streams it (only text no later token takes back). A
request is answered from it:

- as soon as any of it is decided (the person sees a suggestion start, not wait for its end);
- when the person only typed at that cursor (same text after it) and what they typed is the
  suggestion's beginning: the rest of it, at once if it is there, else as soon as it grows;
- anything else - another place, or typed text the suggestion does not begin with (found as
  soon as its text so far disagrees) - asks anew, which supersedes the one in flight.

The suggestion keeps decoding after a request is answered (it is shielded from the handler's
cancellation). The VS Code extension does the same on its side; once a suggestion is complete,
the gateway's type-through answers keys typed along it too.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

MAX_TYPED = 64  # characters typed along a suggestion before asking anew is the better bet


@dataclass
class Flight:
    before: str
    after: str
    text: str = ""  # decided so far
    done: bool = False
    completion_id: str = ""
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Future | None = None  # the completion that answers it

    def cancel(self) -> None:
        """Its session ended: stop the completion (the service cancels its generation)."""
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def add(self, piece: str, completion_id: str) -> None:
        self.text += piece
        self.completion_id = completion_id
        self.changed.set()

    def finish(self, task: asyncio.Future) -> None:
        """The completion task ended: its final text (nothing if it failed or was cancelled)."""
        ok = not task.cancelled() and task.exception() is None
        if ok:
            self.text, self.completion_id = task.result()
        self.done = True
        self.changed.set()


def typed_along(flight: Flight | None, before: str, after: str) -> str | None:
    """What was typed since `flight` was asked for ("" if nothing), if this request only typed at
    its cursor; else None."""
    if flight is None or after != flight.after or not before.startswith(flight.before):
        return None
    typed = before[len(flight.before) :]
    return typed if len(typed) <= MAX_TYPED else None


def may_answer(flight: Flight, typed: str) -> bool:
    """Whether `flight`, given `typed` since it was asked, can still answer (its text so far agrees
    with what was typed, and it has more to say or is still coming)."""
    text = flight.text
    if not (text.startswith(typed) or typed.startswith(text)):
        return False
    return len(text) > len(typed) or not flight.done


async def answer(flight: Flight, typed: str, timeout_s: float) -> tuple[str, str] | None:
    """(the suggestion's text after `typed`, its id) as soon as some is decided; None when the
    suggestion does not begin with `typed` or ends without anything more (ask anew)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not may_answer(flight, typed):
            return None  # it says something else than what was typed, or ended without more
        text = flight.text
        if len(text) > len(typed):
            return text[len(typed) :], flight.completion_id
        flight.changed.clear()
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            await asyncio.wait_for(flight.changed.wait(), left)
        except asyncio.TimeoutError:
            return None
