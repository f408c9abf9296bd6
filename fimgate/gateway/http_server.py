"""`fimgate serve`'s HTTP server: uvicorn on a socket bound before anything is announced, with
time limits on what a client may hold, and a stop that does not wait for generations.

- The port is bound first: a port in use is an error (OSError) before "serving" is printed.
- Request headers must arrive within the read timeout of the connection (or of the previous
  response, on a kept-alive one); the body within the app's read timeout (gateway/body_limit.py).
  uvicorn bounds neither: a client sending half a header could hold a connection forever.
- SIGTERM / SIGINT: every request in flight is cancelled (before its next token), queued ones
  fail at once, and the server closes within ~1 s.

Compute stays on the main thread (backend/main_thread.py); HTTP runs in its own thread.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from fimgate.backend.main_thread import MainThreadRunner
from fimgate.gateway.app import create_app
from fimgate.gateway.auth import ApiKeys
from fimgate.gateway.service import CompletionService

READ_TIMEOUT_S = 10.0


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers do not arrive in time."""

    header_timeout_s = READ_TIMEOUT_S

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_header_timer()

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not None and self.cycle is not before:
            self._disarm_header_timer()

    def connection_lost(self, exc) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_timeout)

    def _disarm_header_timer(self) -> None:
        timer = getattr(self, "_header_timer", None)
        if timer is not None:
            timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            self.transport.close()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or OSError (port in use, no such address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def serve(
    service: CompletionService,
    sock: socket.socket,
    api_keys: ApiKeys | None = None,
    read_timeout_s: float = READ_TIMEOUT_S,
    keyed_status: bool = False,
) -> None:
    """Serve until SIGTERM / SIGINT; compute on this (the main) thread."""
    service.runner = MainThreadRunner()
    protocol = type("TimedH11", (TimedH11Protocol,), {"header_timeout_s": read_timeout_s})
    config = uvicorn.Config(
        create_app(service, api_keys, read_timeout_s, keyed_status),
        log_level="warning",
        http=protocol,
        timeout_graceful_shutdown=1,
        timeout_keep_alive=5,
    )
    server = uvicorn.Server(config)
    http = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="http", daemon=True)

    def stop(*_) -> None:
        service.cancel_all()
        service.runner.stop()
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    http.start()
    host, port = sock.getsockname()[:2]
    print(f"fimgate: serving {service.backend.model_name} on http://{host}:{port}", file=sys.stderr)
    service.runner.serve_forever(until=lambda: not http.is_alive())
    stop()
    http.join(timeout=3)
