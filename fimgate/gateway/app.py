"""FastAPI app: /v1/completions (OpenAI), /infill (llama.cpp), /v1/models, /health, /metrics.

Errors are JSON `{"error": {"message", "type", "code"}}` with a 4xx/5xx status, never a stack
trace. Generation runs in a worker thread; a client that disconnects cancels its generation.
"""
from __future__ import annotations

import json
import time
import uuid
from typing import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from dataclasses import replace

from fimgate.backend.base import CancelToken, Finished, SamplingParams, TextDelta, last_finished
from fimgate.backend.base import BackendError, BackendUnavailableError, ContextOverflowError
from fimgate.efim.planner import EditorState
from fimgate.efim.postprocess import tidy, wants_multiline
from fimgate.efim.templates import ContextChunk
from fimgate.gateway.auth import ApiKeys, KeyError401
from fimgate.gateway.protocol import CompletionRequest, InfillRequest
from fimgate.gateway.service import CompletionService

MAX_BODY_BYTES = 8 * 1024 * 1024


def error(status: int, message: str, kind: str = "invalid_request_error", code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=status)


class _Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("fimgate_requests", "Completion requests", ["endpoint"], registry=self.registry)
        self.cancelled = Counter("fimgate_cancelled", "Requests cancelled", registry=self.registry)
        self.ttft = Histogram("fimgate_ttft_seconds", "Time to first token", registry=self.registry,
                              buckets=(0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10))
        self.tokens = Counter("fimgate_prompt_tokens", "Prompt tokens by reuse class", ["kind"], registry=self.registry)
        self.pinned = Gauge("fimgate_pinned_blocks", "Pinned KV blocks", registry=self.registry)
        self.used = Gauge("fimgate_used_blocks", "KV blocks in use", registry=self.registry)
        self.users = Gauge("fimgate_tree_users", "Users with cached blocks", registry=self.registry)

    def observe(self, usage) -> None:
        if usage.cancelled:
            self.cancelled.inc()
        if usage.ttft_ms is not None:
            self.ttft.observe(usage.ttft_ms / 1000)
        self.tokens.labels("prefix_cached").inc(usage.prefix_cached_tokens)
        self.tokens.labels("shifted_cached").inc(usage.shifted_cached_tokens)
        self.tokens.labels("recomputed").inc(usage.recomputed_tokens)
        self.tokens.labels("prefilled").inc(usage.prefilled_tokens)


def create_app(service: CompletionService, api_keys: ApiKeys | None = None) -> FastAPI:
    app = FastAPI(title="fimgate", version="0.1.0")
    metrics = _Metrics()
    model_name = service.backend.model_name

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return error(413, f"request body over {MAX_BODY_BYTES // (1024 * 1024)} MiB", code="body_too_large")
        return await call_next(request)

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

    async def run(state: EditorState, sampling: SamplingParams, stream: bool, shape, endpoint: str, request: Request,
                  multiline: bool | None, raw: bool):
        metrics.requests.labels(endpoint).inc()
        if not raw and sampling.max_tokens > 0:
            if multiline is None:
                multiline = await run_in_threadpool(wants_multiline, state.text, state.cursor,
                                                    "python" if state.path.endswith(".py") or not state.path else "")
            if not multiline and "\n" not in sampling.stop:
                sampling = replace(sampling, stop=sampling.stop + ("\n",))
        try:
            events, cancel = service.start(state, sampling)
        except ValueError as e:
            return error(400, str(e))
        if not stream:
            try:
                final = await run_in_threadpool(last_finished, events)
            except ContextOverflowError as e:
                return error(400, str(e), code="context_length_exceeded")
            except BackendUnavailableError as e:
                return error(503, str(e), kind="server_error", code="backend_unavailable")
            except BackendError as e:
                return error(502, str(e), kind="server_error", code="backend_error")
            metrics.observe(final.usage)
            text = final.text if raw else tidy(final.text, state.text, state.cursor, multiline=bool(multiline))
            return JSONResponse(shape(text, final, True))
        return StreamingResponse(_sse(events, cancel, shape, metrics, request), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        if body.model not in (None, "", model_name, "fimgate"):
            return error(404, f"model {body.model!r} is not served here; GET /v1/models lists {model_name!r}",
                         code="model_not_found")
        stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
        try:
            sampling = SamplingParams(max_tokens=body.max_tokens, temperature=body.temperature, top_p=body.top_p,
                                      stop=stop, seed=body.seed)
            state = EditorState(user_id=user_of(request, body.user), document_id=body.document or "default",
                                text=body.prompt + body.suffix, cursor=len(body.prompt), path=body.document or "")
        except ValueError as e:
            return error(400, str(e))
        rid, created = f"cmpl-{uuid.uuid4().hex[:24]}", int(time.time())

        def shape(text: str, final: Finished | None, done: bool) -> dict:
            out = {"id": rid, "object": "text_completion", "created": created, "model": model_name,
                   "choices": [{"text": text, "index": 0, "logprobs": None,
                                "finish_reason": _finish(final) if done and final else None}]}
            if final is not None:
                u = final.usage
                out["usage"] = {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                                "total_tokens": u.prompt_tokens + u.completion_tokens,
                                "prompt_tokens_details": {"cached_tokens": u.cached_tokens}}
                out["fimgate"] = u.as_dict()
            return out

        return await run(state, sampling, body.stream, shape, "completions", request, body.multiline, body.raw)

    @app.post("/infill")
    async def infill(body: InfillRequest, request: Request):
        n = 128 if body.n_predict < 0 else body.n_predict
        try:
            sampling = SamplingParams(max_tokens=n, temperature=body.temperature, top_p=body.top_p, stop=tuple(body.stop))
            before = body.input_prefix + body.prompt
            path = body.filename or ""
            state = EditorState(user_id=user_of(request, body.user), document_id=path or "default",
                                text=before + body.input_suffix, cursor=len(before), path=path,
                                context=tuple(ContextChunk(c.filename, c.text) for c in body.input_extra))
        except ValueError as e:
            return error(400, str(e))

        def shape(text: str, final: Finished | None, done: bool) -> dict:
            out = {"content": text, "stop": done, "model": model_name}
            if final is not None:
                u = final.usage
                out.update({"tokens_predicted": u.completion_tokens, "tokens_evaluated": u.prompt_tokens,
                            "tokens_cached": u.cached_tokens, "truncated": False,
                            "stop_type": "eos" if u.finish_reason == "stop" else "limit",
                            "timings": {"prompt_n": u.prefilled_tokens, "predicted_n": u.completion_tokens,
                                        "prompt_ms": u.ttft_ms, "predicted_per_second": u.decode_tokens_per_s},
                            "fimgate": u.as_dict()})
            return out

        return await run(state, sampling, body.stream, shape, "infill", request, None, False)

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "fimgate"}]}

    @app.get("/health")
    async def health():
        stats = getattr(service.backend, "stats", lambda: {})()
        extra = {"servers": stats["servers"], "moves": stats["moves"]} if "servers" in stats else {}
        return {"status": "ok", "model": model_name, **extra}

    @app.get("/metrics")
    async def prometheus():
        stats = getattr(service.backend, "stats", lambda: {})()
        metrics.pinned.set(stats.get("pinned_blocks", 0))
        metrics.used.set(stats.get("used_blocks", 0))
        metrics.users.set(stats.get("users", 0))
        return Response(generate_latest(metrics.registry), media_type="text/plain; version=0.0.4")

    return app


def _finish(final: Finished) -> str:
    return {"stop": "stop", "length": "length"}.get(final.usage.finish_reason or "", "stop")


def _next(events):
    return next(events, None)


async def _sse(events, cancel: CancelToken, shape, metrics: _Metrics, request: Request) -> AsyncIterator[bytes]:
    try:
        while True:
            if await request.is_disconnected():
                cancel.cancel()
            try:
                ev = await run_in_threadpool(_next, events)
            except ContextOverflowError as e:
                yield f"data: {json.dumps({'error': {'message': str(e), 'type': 'invalid_request_error'}})}\n\n".encode()
                break
            except BackendError as e:
                yield f"data: {json.dumps({'error': {'message': str(e), 'type': 'server_error'}})}\n\n".encode()
                break
            if ev is None:
                break
            if isinstance(ev, TextDelta):
                yield f"data: {json.dumps(shape(ev.text, None, False))}\n\n".encode()
            elif isinstance(ev, Finished):
                metrics.observe(ev.usage)
                yield f"data: {json.dumps(shape('', ev, True))}\n\n".encode()
        yield b"data: [DONE]\n\n"
    finally:
        cancel.cancel()
        await run_in_threadpool(last_finished, events)  # let the engine finish its bookkeeping and release
