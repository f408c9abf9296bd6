"""A recording proxy for e2e tests: what a real client sent to the gateway, and what it got back."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx


class Recorder(ThreadingHTTPServer):
    """Forwards every request to the gateway as it came and keeps (method, path, body, status, answer)."""

    daemon_threads = True

    def __init__(self, upstream: str):
        super().__init__(("127.0.0.1", 0), _Forward)
        self.upstream = upstream
        self.log: list[dict] = []
        self.lock = threading.Lock()


class _Forward(BaseHTTPRequestHandler):
    def _forward(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization")}
        r = httpx.request(self.command, self.server.upstream + self.path, content=body, headers=headers, timeout=120)
        with self.server.lock:
            self.server.log.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "request": _json(body),
                    "status": r.status_code,
                    "answer": _json(r.content),
                }
            )
        self.send_response(r.status_code)
        self.send_header("Content-Type", r.headers.get("content-type", "application/json"))
        self.send_header("Content-Length", str(len(r.content)))
        self.end_headers()
        self.wfile.write(r.content)

    do_GET = do_POST = _forward

    def log_message(self, *args):
        pass


def _json(raw: bytes):
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw[:200].decode("utf-8", "replace")
