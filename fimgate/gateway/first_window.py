"""The first window: a short prompt for the first keys at a place the cache does not hold yet.

A person who jumps to a new place (another file, a click far away) types at once, and the anchor
there - up to 1,024 tokens of prefix, 256 of suffix, other files' chunks - is seconds of prefill on
a 2-core CPU: until it is done no key shows anything. Such a key is answered here from a short
window around the cursor instead (`tokens` of prefix, a quarter of that of suffix, no other
files: a few hundred milliseconds), while the full anchor prefills in the background
(urgency.BACKGROUND: only when no key has work, in small chunks). The session's next keys take
the short window's EFIM appends (its own session, in a second planner: one-token prefills)
until that prefill is done; from then on the full anchor, as before.

    fw = FirstWindow(backend, short_planner)
    plan = fw.plan(session, state, sampling, full_plan)   # full_plan, or the short window's

A fill that would take longer than FILL_S at the rate the engine prefills now (its
`prefill_seconds`, measured on its own chunks) is not started: on a CPU that slow the keys keep
the short window's appends. There the fill would not end before the person moves on (on a 2-core
AVX2 CPU, ~75 tokens/s: a 1,240-token anchor is 16 s of the cores, and in 250 keys of real VS
Code none of 15 ended), and it would only take the cores from the editor and the keys (each
key waited for a layer of its chunk: queued p50 43 ms; docs/benchmarks.md).

Only where the backend can tell what a prompt would cost now (`uncached_tokens`: the embedded
engine); elsewhere the full plan always runs.
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from dataclasses import dataclass, replace

from fimgate.backend.base import CancelToken, FimPlan, Finished, SamplingParams
from fimgate.backend.urgency import BACKGROUND
from fimgate.efim.planner import EditorState, EfimPlanner
from fimgate.efim.window import WindowConfig

TOKENS = 128  # `fimgate serve` and `lsp`'s default prefix budget (an A/B in real VS Code: docs/benchmarks.md)
COLD_TOKENS = 512  # a full prompt that would compute more than this is worth a first window
FILL_S = 6.0  # a full anchor that would prefill longer than this is not filled behind the keys
MAX_SESSIONS = 4096  # sessions whose filled anchor is remembered (a 16-byte digest each)


def short_window(tokens: int) -> WindowConfig:
    return WindowConfig(prefix_tokens=tokens, suffix_tokens=max(32, tokens // 4), context_chars=0)


def _digest(ids: tuple[int, ...]) -> bytes:
    return hashlib.blake2b(array("q", ids).tobytes(), digest_size=16).digest()


@dataclass
class _Fill:
    anchor: bytes  # the full anchor's digest
    cancel: CancelToken


class FirstWindow:
    def __init__(self, backend, planner: EfimPlanner, fill_s: float = FILL_S) -> None:
        self.backend = backend
        self.planner = planner  # the short window's: its own sessions
        self.fill_s = fill_s  # the longest fill started (seconds at the engine's measured rate)
        self._lock = threading.Lock()
        self._fills: dict[tuple[str, str], _Fill] = {}  # session -> its full anchor prefilling
        self._filled: dict[tuple[str, str], bytes] = {}  # session -> the digest of the anchor filled last
        self.served = 0  # keys answered from a first window
        self.started = 0  # background prefills started
        self.too_long = 0  # keys answered from a short window whose full anchor would take too long to fill
        self.warmed_short = 0  # warm-ups of a short window instead of such an anchor

    def plan(self, session: tuple[str, str], state: EditorState, sampling: SamplingParams, full: FimPlan) -> FimPlan:
        """The plan to run for this key: `full`, or the short window's while `full`'s anchor fills."""
        anchor = _digest(full.prompt_ids[: full.pin_tokens] if full.pin_tokens else full.prompt_ids)
        with self._lock:
            fill = self._fills.get(session)
            if fill is not None and fill.anchor != anchor:  # the person moved on: that anchor is not wanted
                fill.cancel.cancel()
                del self._fills[session]
                fill = None
            if fill is None:
                if self._filled.get(session) == anchor:
                    return full  # (an anchor filled once and evicted since is not filled again)
                uncached = self.backend.uncached_tokens(full)
                if uncached <= COLD_TOKENS:
                    return full
                if self._too_long(uncached):
                    self.too_long += 1  # the keys keep the short window
                else:
                    fill = self._fills[session] = _Fill(anchor, CancelToken())
                    self.started += 1
                    warm = replace(full, sampling=replace(full.sampling, max_tokens=0), prewarm=True)
                    threading.Thread(target=self._run, args=(session, fill, warm), daemon=True, name="first-window-fill").start()
            self.served += 1
        return self.planner.plan(state, sampling)

    def warm(self, state: EditorState, sampling: SamplingParams, full: FimPlan) -> FimPlan:
        """The plan a warm-up (max_tokens 0: a file opened, the cursor moved) prefills: `full`, or
        where its anchor would take longer than fill_s, the short window the keys there will take."""
        uncached = self.backend.uncached_tokens(full)
        if uncached <= COLD_TOKENS or not self._too_long(uncached):
            return full
        with self._lock:
            self.warmed_short += 1
            return self.planner.plan(state, sampling)

    def _too_long(self, uncached: int) -> bool:
        seconds = self.backend.prefill_seconds(uncached) if hasattr(self.backend, "prefill_seconds") else None
        return seconds is not None and seconds > self.fill_s

    def _run(self, session: tuple[str, str], fill: _Fill, warm: FimPlan) -> None:
        finished = False
        try:
            for ev in self.backend.generate(warm, fill.cancel, priority=BACKGROUND):
                finished = isinstance(ev, Finished) and ev.usage.finish_reason != "cancelled"
        except Exception:  # noqa: BLE001 - the keys still have the short window; the next one retries
            finished = False
        with self._lock:
            if self._fills.get(session) is fill:
                del self._fills[session]
                if finished:
                    self._filled[session] = fill.anchor
                    while len(self._filled) > MAX_SESSIONS:
                        del self._filled[next(iter(self._filled))]

    def cancel_all(self) -> None:
        with self._lock:
            for fill in self._fills.values():
                fill.cancel.cancel()

    def stats(self) -> dict:
        return {
            "first_window_keys": self.served,
            "first_window_fills": self.started,
            "first_window_not_filled": self.too_long,
            "first_window_warmups": self.warmed_short,
        }
