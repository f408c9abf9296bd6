"""Request bodies of the HTTP API (pydantic), with the bounds a client gets a 400 for.

Every field is bounded before any work is done: numbers are not coerced from strings or
booleans, strings have length limits (input_extra in total too). Bodies are parsed as JSON by
pydantic, which refuses a lone UTF-16 surrogate (no tokenizer could encode it) with a 400.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field, StrictBool, StrictInt, field_validator, model_validator

MAX_TOKENS_LIMIT = 2048
MAX_TEXT_CHARS = 4_000_000  # the prefix, the suffix (the body limit, 8 MiB, bounds them together)
MAX_EXTRA_CHARS = 1_000_000  # input_extra, all chunks together (the planner keeps ~16k of them)
SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed takes
MAX_PREDICT_MS = 600_000  # a time budget's ceiling, on both endpoints


def _finite(value):
    """A sampling number must be a number: NaN and infinity are refused as such (pydantic's own
    message for NaN was 'less than or equal to 2')."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


class InfillChunk(BaseModel):
    filename: str = Field("", max_length=1024)
    text: str = Field("", max_length=MAX_EXTRA_CHARS)


def _within_extra_budget(chunks: list[InfillChunk]) -> None:
    total = sum(len(c.text) + len(c.filename) for c in chunks)
    if total > MAX_EXTRA_CHARS:
        raise ValueError(f"input_extra holds {total} characters; at most {MAX_EXTRA_CHARS}")


class CompletionRequest(BaseModel):
    """OpenAI legacy completions; `prompt` is the text before the cursor, `suffix` after it."""

    model: str | None = Field(None, max_length=256)
    prompt: str = Field(max_length=MAX_TEXT_CHARS)
    suffix: str = Field("", max_length=MAX_TEXT_CHARS)
    max_tokens: StrictInt = Field(64, ge=0, le=MAX_TOKENS_LIMIT)
    temperature: float = Field(0.0, ge=0.0, le=2.0, strict=True)
    top_p: float = Field(1.0, gt=0.0, le=1.0, strict=True)
    stop: str | list[str] | None = Field(None, max_length=16)
    stream: StrictBool = False
    user: str | None = Field(None, max_length=256)
    seed: StrictInt | None = Field(None, ge=SEED_RANGE[0], le=SEED_RANGE[1])
    # fimgate extensions (OpenAI clients pass them in extra_body):
    document: str | None = Field(None, max_length=1024)  # sessions are per (user, document)
    multiline: StrictBool | None = None  # None: decided by the code around the cursor
    raw: StrictBool = False  # True: no post-processing (no line cut, no suffix de-duplication)
    # a time budget (llama.cpp's t_max_predict_ms): once this long after the first token, the
    # suggestion ends at the next complete line - a multi-line one shows its first lines sooner
    max_predict_ms: StrictInt | None = Field(None, ge=1, le=MAX_PREDICT_MS)
    # the suggestion ends before a token the model gives less than this probability (editors ask
    # for what the model is sure of; never while it is only white space)
    min_token_prob: float | None = Field(None, ge=0.0, le=1.0, strict=True)
    # other files' text shown before the current file's (llama.cpp /infill's shape and order:
    # oldest first); the planner keeps the newest that fit its budget
    input_extra: list[InfillChunk] = Field(default_factory=list, max_length=64)
    # streamed, with a greedy suggestion: up to this many texts for other characters the person
    # may type next, each what the model picks once that one is typed (an event of their own:
    # "fimgate_alternatives"; fimgate/backend/embedded/alternatives.py)
    alternatives: StrictInt = Field(0, ge=0, le=16)
    # OpenAI fields fimgate does not do: accepted at the value that asks for nothing, a 400 saying so otherwise
    n: StrictInt | None = None
    best_of: StrictInt | None = None
    logprobs: StrictInt | None = None
    echo: StrictBool | None = None

    @model_validator(mode="after")
    def _extra_within_budget(self):
        _within_extra_budget(self.input_extra)
        return self

    _numbers = field_validator("temperature", "top_p", "min_token_prob", mode="before")(_finite)

    @field_validator("n", "best_of")
    @classmethod
    def _one(cls, value):
        if value not in (None, 1):
            raise ValueError("fimgate answers one completion per request: n and best_of can only be 1")
        return value

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, value):
        if value is not None:
            raise ValueError("fimgate does not return log probabilities: leave logprobs out")
        return value

    @field_validator("echo")
    @classmethod
    def _no_echo(cls, value):
        if value:
            raise ValueError("fimgate does not echo the prompt: leave echo out or false")
        return value

    @field_validator("stop")
    @classmethod
    def _short_stops(cls, value):
        for s in [value] if isinstance(value, str) else value or ():
            if len(s) > 256:
                raise ValueError("each stop string is at most 256 characters")
        return value


class InfillRequest(BaseModel):
    """llama.cpp server's /infill, as llama.vscode and llama.vim send it."""

    input_prefix: str = Field("", max_length=MAX_TEXT_CHARS)
    input_suffix: str = Field("", max_length=MAX_TEXT_CHARS)
    input_extra: list[InfillChunk] = Field(default_factory=list, max_length=64)
    prompt: str = Field("", max_length=1_000_000)
    n_predict: StrictInt = Field(128, ge=-1, le=MAX_TOKENS_LIMIT)
    t_max_predict_ms: StrictInt | None = Field(None, ge=0, le=MAX_PREDICT_MS)
    temperature: float = Field(0.0, ge=0.0, le=2.0, strict=True)
    top_p: float = Field(1.0, gt=0.0, le=1.0, strict=True)
    stop: list[str] = Field(default_factory=list, max_length=16)
    stream: StrictBool = False
    cache_prompt: StrictBool = True
    id_slot: StrictInt = Field(-1, ge=-1, le=1024)
    samplers: list[str] | None = Field(None, max_length=32)
    top_k: StrictInt | None = Field(None, ge=0, le=1_000_000)
    n_indent: StrictInt | None = Field(None, ge=0, le=1000)
    n_cmpl: StrictInt | None = Field(None, ge=1, le=16)
    t_max_prompt_ms: StrictInt | None = Field(None, ge=-1, le=MAX_PREDICT_MS)
    response_fields: list[str] | None = Field(None, max_length=64)
    user: str | None = Field(None, max_length=256)
    filename: str | None = Field(None, max_length=1024)

    @model_validator(mode="after")
    def _extra_within_budget(self):
        _within_extra_budget(self.input_extra)
        return self

    _numbers = field_validator("temperature", "top_p", mode="before")(_finite)


class EventRequest(BaseModel):
    """An acceptance event, Tabby's `POST /v1/events` shape (fimgate/gateway/events.py)."""

    type: Literal["view", "select", "dismiss"]
    completion_id: str = Field(max_length=64)
    choice_index: StrictInt = Field(0, ge=0, le=16)
    select_kind: Literal["line", "word"] | None = None  # a partial accept; None: the whole
    accepted_chars: StrictInt | None = Field(None, ge=0, le=MAX_TEXT_CHARS)
    elapsed: StrictInt | None = Field(None, ge=0)  # ms since shown (accepted, not used yet)
    user: str | None = Field(None, max_length=256)
