"""FastAPI app: /v1/completions (OpenAI), /infill (llama.cpp), /v1/models, /health, /metrics.

Errors are JSON `{"error": {"message", "type", "code"}}` with a 4xx/5xx status, never a stack
trace. Generation runs in a worker thread; a client that disconnects cancels its generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from typing import AsyncIterator

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from fimgate.backend.base import (
    Alternatives,
    BackendError,
    BackendUnavailableError,
    CancelToken,
    ContextOverflowError,
    Finished,
    SamplingParams,
    TextDelta,
    last_finished,
)
from fimgate.efim.languages import language_of
from fimgate.efim.planner import EditorState
from fimgate.efim.templates import ContextChunk
from fimgate.gateway.auth import ApiKeys, KeyError401
from fimgate.gateway.body_limit import BodyLimit
from fimgate.gateway.events import Events
from fimgate.gateway.llama_infill import infill_request, infill_response, props
from fimgate.gateway.protocol import CompletionRequest, EventRequest, InfillRequest
from fimgate.gateway.service import CompletionService, Shape

MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_UNDECLARED_BODY_BYTES = 1024 * 1024  # chunked, without Content-Length (gateway/body_limit.py)
BODY_READ_TIMEOUT_S = 30.0


def error(status: int, message: str, kind: str = "invalid_request_error", code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=status)


class _Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("fimgate_requests", "Completion requests", ["endpoint"], registry=self.registry)
        self.cancelled = Counter("fimgate_cancelled", "Requests cancelled", registry=self.registry)
        self.ttft = Histogram(
            "fimgate_ttft_seconds",
            "Time to first token",
            registry=self.registry,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10),
        )
        self.tokens = Counter("fimgate_prompt_tokens", "Prompt tokens by reuse class", ["kind"], registry=self.registry)
        self.pinned = Gauge("fimgate_pinned_blocks", "Pinned KV blocks", registry=self.registry)
        self.used = Gauge("fimgate_used_blocks", "KV blocks in use", registry=self.registry)
        self.users = Gauge("fimgate_tree_users", "Users with cached blocks", registry=self.registry)
        self.threads = Gauge("fimgate_threads", "Compute threads in use (the cores free now)", registry=self.registry)
        self.others = Gauge("fimgate_other_busy_cores", "Cores other processes kept busy", registry=self.registry)

    def observe(self, usage) -> None:
        if usage.cancelled:
            self.cancelled.inc()
        if usage.ttft_ms is not None:
            self.ttft.observe(usage.ttft_ms / 1000)
        self.tokens.labels("prefix_cached").inc(usage.prefix_cached_tokens)
        self.tokens.labels("shifted_cached").inc(usage.shifted_cached_tokens)
        self.tokens.labels("recomputed").inc(usage.recomputed_tokens)
        self.tokens.labels("prefilled").inc(usage.prefilled_tokens)


def create_app(
    service: CompletionService,
    api_keys: ApiKeys | None = None,
    read_timeout_s: float = BODY_READ_TIMEOUT_S,
    keyed_status: bool = False,
) -> FastAPI:
    """keyed_status: with api_keys, /health, /metrics, /props and /v1/models need a key too."""
    app = FastAPI(title="fimgate", version="0.1.0")
    app.add_middleware(
        BodyLimit, max_bytes=MAX_BODY_BYTES, read_timeout_s=read_timeout_s, max_undeclared_bytes=MAX_UNDECLARED_BODY_BYTES
    )
    metrics = _Metrics()
    acceptance = Events(metrics.registry)  # what people were shown and took (gateway/events.py)
    model_name = service.backend.model_name

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
        return error(400, f"invalid request: {where or 'body'}: {first.get('msg', 'malformed')}")

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_: Request, exc: StarletteHTTPException):
        return error(exc.status_code, str(exc.detail), kind="not_found" if exc.status_code == 404 else "error")

    @app.exception_handler(Exception)
    async def on_crash(_: Request, exc: Exception):
        return error(500, f"internal error: {type(exc).__name__}", kind="server_error")

    def user_of(request: Request, body_user: str | None) -> str:
        """With API keys, the key's owner; on an open loopback server, the body may name one."""
        if api_keys is None:
            return body_user or "local"
        return api_keys.user_for(request.headers.get("authorization"))

    @app.exception_handler(KeyError401)
    async def on_unauthorized(_: Request, exc: KeyError401):
        return error(401, str(exc), kind="authentication_error", code="invalid_api_key")

    async def run(
        state: EditorState,
        sampling: SamplingParams,
        stream: bool,
        shape,
        endpoint: str,
        request: Request,
        form: Shape,
        answered=lambda final: None,
    ):
        metrics.requests.labels(endpoint).inc()
        try:  # planning tokenizes: off the event loop, so /health and everyone else keep being served
            events, cancel = await run_in_threadpool(service.start, state, sampling, form)
        except ValueError as e:
            return error(400, str(e))
        try:
            first = await _unless_gone(request, cancel, events, last_finished if not stream else _next)
        except Exception as e:  # noqa: BLE001 - every failure is a JSON error with its status, never a trace
            return error(*_failure(e))
        if first is _GONE:
            metrics.cancelled.inc()
            return Response(status_code=499)  # nobody is listening; the generation was cancelled
        if first is None and not stream:
            return error(502, "the backend ended without a result", "server_error", "backend_error")
        if not stream:
            metrics.observe(first.usage)
            answered(first)
            return JSONResponse(shape(first.text, first, True))
        return StreamingResponse(_sse(first, events, cancel, shape, metrics, answered), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
        try:
            sampling = SamplingParams(
                max_tokens=body.max_tokens,
                temperature=body.temperature,
                top_p=body.top_p,
                stop=stop,
                seed=body.seed,
                max_predict_ms=body.max_predict_ms,
                min_token_prob=body.min_token_prob,
                alternatives=body.alternatives if body.stream else 0,
            )
            state = EditorState(
                user_id=user_of(request, body.user),
                document_id=body.document or "",
                text=body.prompt + body.suffix,
                cursor=len(body.prompt),
                path=body.document or "",
                context=tuple(ContextChunk(c.filename, c.text) for c in body.input_extra),
            )
        except ValueError as e:
            return error(400, str(e))
        rid, created = f"cmpl-{uuid.uuid4().hex[:24]}", int(time.time())

        def shape(text: str, final: Finished | None, done: bool) -> dict:
            out = {
                "id": rid,
                "object": "text_completion",
                "created": created,
                "model": model_name,
                "choices": [
                    {"text": text, "index": 0, "logprobs": None, "finish_reason": _finish(final) if done and final else None}
                ],
            }
            if final is not None:
                u = final.usage
                out["usage"] = {
                    "prompt_tokens": u.prompt_tokens,
                    "completion_tokens": u.completion_tokens,
                    "total_tokens": u.prompt_tokens + u.completion_tokens,
                    "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
                }
                out["fimgate"] = u.as_dict()
            return out

        before, line_rest = body.prompt, body.suffix.split("\n", 1)[0]
        acceptance.settle(state.user_id, state.document_id, before, line_rest)

        def answered(final: Finished) -> None:
            language = language_of(state.path, "")
            acceptance.answered(rid, state.user_id, language, final.usage, final.text, state.document_id, before, line_rest)

        form = Shape(multiline=body.multiline, raw=body.raw)
        if body.stream:  # its editor may show (and report) the first part before the answer ends
            acceptance.streaming(rid, state.user_id)
        return await run(state, sampling, body.stream, shape, "completions", request, form, answered)

    @app.post("/v1/events")
    async def event(body: EventRequest, request: Request):
        user = user_of(request, body.user)
        if not acceptance.record(user, body.type, body.completion_id, body.select_kind, body.accepted_chars):
            return error(404, f"no completion {body.completion_id!r} was answered to this user (or it was long ago)")
        return {}

    @app.get("/v1/events/summary")
    async def event_summary(request: Request, user: str | None = None, everyone: bool = False):
        """The caller's numbers; everyone's for an operator (a loopback gateway without keys is
        one person's, who runs it; with keys, the users named by --operators)."""
        caller = user_of(request, user)
        if not everyone:
            return acceptance.summary(caller)
        if api_keys is not None and caller not in api_keys.operators:
            return error(403, "everyone's numbers are for the gateway's operators (fimgate serve --operators)")
        return acceptance.everyone()

    @app.get("/v1/events/recent")
    async def event_recent(request: Request, user: str | None = None):
        return {"data": acceptance.recent(user_of(request, user))}

    @app.post("/infill")
    async def infill(body: InfillRequest, request: Request):
        try:
            state, sampling, form = infill_request(body, user_of(request, body.user))
        except ValueError as e:
            return error(400, str(e))
        n_ctx = service.backend.context_tokens
        rid = f"infill-{uuid.uuid4().hex[:24]}"  # llama.cpp's answer has no id: only inferred events name it
        before, line_rest = state.text[: state.cursor], state.text[state.cursor :].split("\n", 1)[0]
        acceptance.settle(state.user_id, state.document_id, before, line_rest)

        def shape(text: str, final: Finished | None, done: bool) -> dict:
            return infill_response(text, final, done, body, model_name, n_ctx)

        def answered(final: Finished) -> None:
            language = language_of(state.path, "")
            acceptance.answered(rid, state.user_id, language, final.usage, final.text, state.document_id, before, line_rest)

        return await run(state, sampling, body.stream, shape, "infill", request, form, answered)

    def status_key(request: Request) -> None:
        if keyed_status and api_keys is not None:
            user_of(request, None)  # a 401 without a valid key

    @app.get("/props")
    async def llama_props(request: Request):
        status_key(request)
        return props(model_name, service.backend.context_tokens)

    @app.get("/v1/models")
    async def models(request: Request):
        status_key(request)
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "fimgate"}]}

    @app.get("/health")
    async def health(request: Request):
        status_key(request)
        stats = service.backend.stats()
        extra = {"servers": stats["servers"], "moves": stats["moves"]} if "servers" in stats else {}
        if "threads" in stats:  # the embedded engine: how many compute threads run, and why
            extra["compute"] = {k: stats[k] for k in ("threads", "usable_cores", "others_busy_cores", "why")}
        return {"status": "ok", "model": model_name, **extra}

    @app.get("/metrics")
    async def prometheus(request: Request):
        status_key(request)
        stats = service.backend.stats()
        metrics.pinned.set(stats.get("pinned_blocks", 0))
        metrics.used.set(stats.get("used_blocks", 0))
        metrics.users.set(stats.get("users", 0))
        if "threads" in stats:
            metrics.threads.set(stats["threads"])
            metrics.others.set(stats["others_busy_cores"])
        return Response(generate_latest(metrics.registry), media_type="text/plain; version=0.0.4")

    return app


def _finish(final: Finished) -> str:
    return {"stop": "stop", "length": "length"}.get(final.usage.finish_reason or "", "stop")


def _next(events):
    return next(events, None)


_GONE = object()


def _failure(e: Exception) -> tuple[int, str, str, str | None]:
    """(status, message, type, code) of a failed request."""
    if isinstance(e, ContextOverflowError):
        return 400, str(e), "invalid_request_error", "context_length_exceeded"
    if isinstance(e, BackendUnavailableError):
        return 503, str(e), "server_error", "backend_unavailable"
    if isinstance(e, BackendError):
        return 502, str(e), "server_error", "backend_error"
    if isinstance(e, ValueError):
        return 400, str(e), "invalid_request_error", None
    return 500, f"internal error: {type(e).__name__}", "server_error", None


async def _until_disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _unless_gone(request: Request, cancel: CancelToken, events, take):
    """take(events) in a worker thread, unless the client disconnects first: then the request is
    cancelled (its generation stops before its next token), its events drained, and _GONE returned."""
    work = asyncio.ensure_future(run_in_threadpool(take, events))
    gone = asyncio.ensure_future(_until_disconnected(request))
    await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    if work.done():
        gone.cancel()
        return work.result()
    cancel.cancel()
    with contextlib.suppress(Exception):
        await work
        await run_in_threadpool(last_finished, events)
    return _GONE


def _event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


async def _sse(first, events, cancel: CancelToken, shape, metrics: _Metrics, answered) -> AsyncIterator[bytes]:
    """The events as server-sent events, then [DONE]; a failure mid-stream is an error event. A
    client that goes away closes this generator (Starlette watches for the disconnect): the
    generation is cancelled and drained, shielded, so the engine is released; what it had sent
    is an answer all the same (the editor may be showing it)."""
    sent: list[str] = []
    ended = False
    try:
        ev = first
        while ev is not None:
            if isinstance(ev, TextDelta):
                sent.append(ev.text)
                yield _event(shape(ev.text, None, False))
            elif isinstance(ev, Alternatives):
                yield _event({**shape("", None, False), "fimgate_alternatives": list(ev.texts)})
            elif isinstance(ev, Finished):
                metrics.observe(ev.usage)
                ended = True
                answered(ev)
                yield _event(shape("", ev, True))
            try:
                ev = await run_in_threadpool(_next, events)
            except Exception as e:  # noqa: BLE001
                _, message, kind, code = _failure(e)
                yield _event({"error": {"message": message, "type": kind, "code": code}})
                break
        yield b"data: [DONE]\n\n"
    finally:
        cancel.cancel()
        with anyio.CancelScope(shield=True):
            final = await run_in_threadpool(last_finished, events)
            if not ended and final is not None:
                answered(Finished("".join(sent), final.usage))
