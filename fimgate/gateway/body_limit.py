"""Read a request's body before the app sees it, within a size and a time limit.

A pure ASGI middleware (not Starlette's BaseHTTPMiddleware, which hides client disconnects from
the app: the gateway could not cancel a vanished client's generation behind it):

- the body is counted as it streams in, so a chunked body without Content-Length is held to a
  limit too (413) and never buffered past it: a smaller one (`max_undeclared_bytes`), because a
  declared size is refused before a byte of it is read, while an undeclared one costs the server
  every byte up to the limit (editors and HTTP clients declare their sizes);
- the whole body must arrive within `read_timeout_s` (408): a client that sends a few bytes a
  minute holds no worker;
- a POST body is JSON whatever its Content-Type says, as llama-server takes it (`curl -d` sends
  a form type);
- after the body, the app's `receive` is the client's own, so `http.disconnect` reaches it;
- a declared size over the limit is refused at once, its body read and dropped first when it is
  not far over (up to DRAIN_FACTOR x), so the client gets the 413 instead of a reset connection;
- every refusal waits REFUSAL_DELAY_S first (asleep: it costs nothing): a client that loops on
  oversized or stalled bodies cannot make the server refuse thousands a second, which took the
  event loop and the GIL from everyone else (`fimgate bench abuse`, big-body: TTFT p99 9.7x).
"""

from __future__ import annotations

import asyncio
import contextlib
import json

DRAIN_FACTOR = 2  # a declared body up to this many times the limit is read (and dropped) before the 413
REFUSAL_DELAY_S = 0.5


class BodyLimit:
    def __init__(self, app, max_bytes: int, read_timeout_s: float, max_undeclared_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_undeclared_bytes = max_bytes if max_undeclared_bytes is None else max_undeclared_bytes
        self.read_timeout_s = read_timeout_s

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            if declared.isdigit() and int(declared) <= DRAIN_FACTOR * self.max_bytes:
                await self._discard(receive)  # read, not kept: closing on unread data resets the connection
            return await _error(send, 413, f"request body over {self.max_bytes // (1024 * 1024)} MiB", "body_too_large")
        limit = self.max_bytes if declared is not None else self.max_undeclared_bytes
        chunks, size = [], 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.read_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), timeout=max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                return await _error(send, 408, f"request body not received within {self.read_timeout_s:g} s", "body_timeout")
            if message["type"] == "http.disconnect":
                return None
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                what = "request body" if declared is not None else "request body without Content-Length"
                return await _error(send, 413, f"{what} over {limit // (1024 * 1024)} MiB", "body_too_large")
            chunks.append(body)
            if not message.get("more_body", False):
                break
        if scope["method"] == "POST":
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            scope = dict(scope, headers=headers + [(b"content-type", b"application/json")])
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    async def _discard(self, receive) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.read_timeout_s
        with contextlib.suppress(asyncio.TimeoutError):
            while True:
                message = await asyncio.wait_for(receive(), timeout=max(0.0, deadline - loop.time()))
                if message["type"] == "http.disconnect" or not message.get("more_body", False):
                    return


async def _error(send, status: int, message: str, code: str) -> None:
    await asyncio.sleep(REFUSAL_DELAY_S)
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": code}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
