"""Request bodies of the HTTP API (pydantic), with the bounds a client gets a 400 for."""
from __future__ import annotations

from pydantic import BaseModel, Field

MAX_TOKENS_LIMIT = 2048


class CompletionRequest(BaseModel):
    """OpenAI legacy completions; `prompt` is the text before the cursor, `suffix` after it."""

    model: str | None = None
    prompt: str = Field(max_length=4_000_000)
    suffix: str = Field("", max_length=4_000_000)
    max_tokens: int = Field(64, ge=0, le=MAX_TOKENS_LIMIT)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    stream: bool = False
    user: str | None = Field(None, max_length=256)
    seed: int | None = None
    # fimgate extensions (OpenAI clients pass them in extra_body):
    document: str | None = Field(None, max_length=1024)  # sessions are per (user, document)
    multiline: bool | None = None  # None: decided by the code around the cursor
    raw: bool = False  # True: no post-processing (no line cut, no suffix de-duplication)


class InfillChunk(BaseModel):
    filename: str = ""
    text: str = ""


class InfillRequest(BaseModel):
    """llama.cpp server's /infill, as llama.vscode and llama.vim send it."""

    input_prefix: str = Field("", max_length=4_000_000)
    input_suffix: str = Field("", max_length=4_000_000)
    input_extra: list[InfillChunk] = Field(default_factory=list, max_length=64)
    prompt: str = Field("", max_length=1_000_000)
    n_predict: int = Field(128, ge=-1, le=MAX_TOKENS_LIMIT)
    t_max_predict_ms: int | None = Field(None, ge=0)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    stop: list[str] = Field(default_factory=list)
    stream: bool = False
    cache_prompt: bool = True
    id_slot: int = -1
    samplers: list[str] | None = None
    top_k: int | None = None
    n_indent: int | None = None
    user: str | None = Field(None, max_length=256)
    filename: str | None = Field(None, max_length=1024)
