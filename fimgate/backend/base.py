"""The backend contract: what the planner hands a backend and what a backend reports back.

Every type here is a small frozen dataclass and this module imports no torch, so fimgate/efim/ (pure
Python) can build requests and the gateway can read reports without loading an engine.

A request's prompt is already tokenized. Token positions (`pos`) are indices into that list;
character offsets never cross this boundary.
"""

from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator, Protocol


class ReuseClass(str, enum.Enum):
    """How a request's prompt relates to what is cached (DESIGN.md, exactness classes)."""

    COLD = "cold"  # the session's first request (text of the user's other sessions may be reused shifted)
    EFIM_APPEND = "efim_append"  # only the increment after the anchor grew: a prefix hit
    REANCHOR = "reanchor"  # new anchor; old text may reappear shifted (see ReuseHint)


@dataclass(frozen=True)
class ReuseHint:
    """Tokens `old_start:old_start+num_tokens` of an earlier prompt reappear at `new_start` of
    this one. `delta` = new_start - old_start is the RoPE shift to apply. `source` names that
    prompt in FimPlan.hint_prompts - always the same user's (the session's own earlier prompts,
    or the last prompts of files the person had open)."""

    old_start: int
    new_start: int
    num_tokens: int
    source: str = ""

    @property
    def delta(self) -> int:
        return self.new_start - self.old_start


@dataclass(frozen=True)
class HealingConstraint:
    """Token healing: the first generated tokens must spell `text` (it was backed off the
    prompt because the cursor sat inside a token). Any backend can enforce it with
    `fimgate.backend.embedded.constraint.TextPrefixConstraint`; the text is not repeated in the output."""

    text: str

    # Each healed character may cost a decode step, so a client's text must not choose how many:
    # the planner heals at most this many (efim/fragment.py), and a plan with more is refused.
    MAX_CHARS = 32

    def __post_init__(self) -> None:
        if len(self.text) > self.MAX_CHARS:
            raise ValueError(f"healing text of {len(self.text)} characters is over the cap of {self.MAX_CHARS}")

    def __bool__(self) -> bool:
        return bool(self.text)


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 64
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    # llama.cpp's t_max_predict_ms: once this long has passed since the first token, and a newline
    # has been generated, the completion ends with what it has ("length")
    max_predict_ms: float | None = None
    # a suggestion as long as the model is sure of it: it ends before a token the model gives less
    # than this probability (never while it is only white space). None: the whole completion
    min_token_prob: float | None = None
    # with a greedy suggestion, up to this many others for the keys the person may type instead:
    # per next character, the token the model picks if that character is typed (Alternatives)
    alternatives: int = 0

    def __post_init__(self) -> None:
        if self.max_tokens < 0:
            raise ValueError("max_tokens must be >= 0")
        if self.min_token_prob is not None and not 0 <= self.min_token_prob <= 1:
            raise ValueError("min_token_prob must be in [0, 1]")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")


@dataclass(frozen=True)
class FimPlan:
    """One generation request, as the planner built it."""

    prompt_ids: tuple[int, ...]
    user_id: str
    session_id: str
    sampling: SamplingParams = SamplingParams()
    healing: HealingConstraint = HealingConstraint("")
    stop_token_ids: tuple[int, ...] = ()
    reuse_class: ReuseClass = ReuseClass.COLD
    reuse_hints: tuple[ReuseHint, ...] = ()
    # (source, prompt ids) for the hints, in the order a backend should take them from: where two
    # sources hold the same text, the first whose K/V is still cached there gives it.
    hint_prompts: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # Tokens [0, pin_tokens) form the session's anchor: the policy may pin them while the person types.
    pin_tokens: int = 0
    # Shifted reuse of the hints: None = off (exact classes only); 0.0 = re-rotate only (llama.cpp
    # cache_reuse); s > 0 = also recompute that share of the shifted tokens (suffix-KV correction).
    recompute_share: float | None = None
    prewarm: bool = False  # a cache warm-up (max_tokens 0), reported apart from the typing path
    issued_at_s: float | None = None  # the editor's clock at the request (replays); None: now

    @property
    def pins_anchor(self) -> bool:
        """Typing requests pin their anchor; a warm-up (file open, cursor jump: nothing sampled) does not."""
        return self.pin_tokens > 0 and not self.prewarm and self.sampling.max_tokens > 0


@dataclass(frozen=True)
class UsageReport:
    """What one request cost. cached = prefix (exact) + shifted (approximate, re-rotated)."""

    prompt_tokens: int
    prefix_cached_tokens: int = 0
    shifted_cached_tokens: int = 0
    recomputed_tokens: int = 0
    prefilled_tokens: int = 0
    completion_tokens: int = 0
    ttft_ms: float | None = None
    decode_tokens_per_s: float | None = None
    total_ms: float | None = None
    cancelled: bool = False
    finish_reason: str | None = None  # "stop", "length", "cancelled"
    type_through: bool = False  # answered from the session's last suggestion, no model call
    draft_tokens: int = 0  # speculative decoding: draft tokens verified
    accepted_draft_tokens: int = 0  # ... of them greedy decoding picked (each saved a step)
    queued_ms: float | None = None  # from the backend's receiving it to its compute starting (ttft counts from there)
    threads: int | None = None  # compute threads it started with (the engine fits them to the cores free)

    @property
    def cached_tokens(self) -> int:
        return self.prefix_cached_tokens + self.shifted_cached_tokens

    def as_dict(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": {"prefix": self.prefix_cached_tokens, "shifted": self.shifted_cached_tokens},
            "recomputed_tokens": self.recomputed_tokens,
            "prefilled_tokens": self.prefilled_tokens,
            "completion_tokens": self.completion_tokens,
            "ttft_ms": self.ttft_ms,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "total_ms": self.total_ms,
            "cancelled": self.cancelled,
            "finish_reason": self.finish_reason,
            "type_through": self.type_through,
            "draft_tokens": {"run": self.draft_tokens, "accepted": self.accepted_draft_tokens},
            "queued_ms": self.queued_ms,
            "threads": self.threads,
        }


class ContextOverflowError(ValueError):
    """The prompt does not fit the backend's context; the message says by how much."""


class BackendError(RuntimeError):
    """A backend server refused or failed a request (the gateway answers 502)."""


class BackendUnavailableError(BackendError):
    """No backend server answered (all down or unreachable); the gateway answers 503."""


@dataclass(frozen=True)
class TextDelta:
    """A piece of completion text, streamed as soon as it is final (stop strings checked)."""

    text: str


@dataclass(frozen=True)
class Alternatives:
    """Streamed before a suggestion's text, where asked for (SamplingParams.alternatives): for
    other characters the person may type next, each the text from the cursor on that the model
    picks once that character is typed - its first token, the highest of those that begin with
    it (fimgate/backend/embedded/alternatives.py). An editor keeps them with the suggestion, so a
    key that leaves the suggestion still finds ghost text before its own answer comes."""

    texts: tuple[str, ...]


@dataclass(frozen=True)
class Finished:
    text: str  # the whole completion
    usage: UsageReport


StreamEvent = TextDelta | Alternatives | Finished


def last_finished(events) -> Finished | None:
    """Run a stream of events to its end; return its Finished report."""
    final = None
    for ev in events:
        if isinstance(ev, Finished):
            final = ev
    return final


@dataclass
class CancelToken:
    """Set from any thread; the engine checks it before every token. With a deadline
    (time.monotonic() seconds) it also counts as cancelled from then on. `enough()` says the
    text so far is all that will be shown (the suggestion's block ended): decoding stops there
    and finishes normally ("stop"), not as cancelled."""

    deadline: float | None = None
    _event: threading.Event = field(default_factory=threading.Event)
    _enough: threading.Event = field(default_factory=threading.Event)
    _hooks: list = field(default_factory=list)  # called on cancel(), from the thread that cancels

    def cancel(self) -> None:
        self._event.set()
        for hook in list(self._hooks):
            hook()

    def on_cancel(self, hook) -> None:
        """Call `hook()` when cancel() is called (at once if it was); until off_cancel(hook)."""
        self._hooks.append(hook)
        if self._event.is_set():
            hook()

    def off_cancel(self, hook) -> None:
        if hook in self._hooks:
            self._hooks.remove(hook)

    def enough(self) -> None:
        self._enough.set()

    @property
    def has_enough(self) -> bool:
        return self._enough.is_set()

    @property
    def cancelled(self) -> bool:
        if not self._event.is_set() and self.deadline is not None and time.monotonic() >= self.deadline:
            self._event.set()
        return self._event.is_set()


@dataclass(frozen=True)
class PinReceipt:
    """Proof of one pin. Unpinning needs the receipt, so a lost receipt leaks a pin until its
    TTL ends rather than releasing someone else's."""

    pin_id: int
    user_id: str
    num_blocks: int
    expires_at: float


class Tokenizer(Protocol):
    """What efim needs from a tokenizer (fimgate.backend.model.tokenizer.HFTokenizer implements it)."""

    bos_id: int | None
    add_bos: bool  # prompts start with bos_id

    def encode(self, text: str) -> list[int]: ...
    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]: ...
    def decode(self, ids: list[int]) -> str: ...
    def token_id(self, token: str) -> int | None: ...
    def pretoken_starts(self, text: str) -> list[int]: ...


class Backend(Protocol):
    """Streams one completion for a plan; cancellable at any token."""

    @property
    def tokenizer(self) -> Tokenizer: ...

    @property
    def model_name(self) -> str: ...

    @property
    def context_tokens(self) -> int | None: ...

    def stats(self) -> dict: ...  # cache and server figures for /health and /metrics (may be {})

    def generate(self, plan: FimPlan, cancel: CancelToken | None = None) -> Iterator[StreamEvent]: ...

    def pin(self, user_id: str, prompt_ids: tuple[int, ...], ttl_s: float) -> PinReceipt | None: ...

    def unpin(self, receipt: PinReceipt) -> None: ...
