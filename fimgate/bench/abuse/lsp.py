"""The `fimgate lsp --tcp` side of `fimgate bench abuse`: a language server on loopback in front of
the gateway under test, one honest client (alice, with the token) and an attacker per case:

    lsp-connect-close   connects and goes away in a loop: at once, after half a header, after an
                        unauthenticated `exit` (pygls ended the whole server on any of these)
    lsp-unauthenticated a second connection without the token: reads alice's document
                        (fimgate.debugDocument), points `gateway` at a port it listens on, opens a
                        document and asks for completions (connections shared one session)

After each case alice asks for a completion: the server must still be up, answer her from the real
gateway, and nothing of her document may have reached the attacker (its replies, its port).
A raw JSON-RPC client over a socket, so the attacker can send what no library would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time

from fimgate.bench.common.served import free_port

LSP_CASES = ("lsp-connect-close", "lsp-unauthenticated")
SECRET = "ALICE_ONLY_API_KEY = 'sk-alice-4f1d'\n"
ALICE_URI = "file:///work/alice/settings.py"
ALICE_TEXT = SECRET + "def total(prices):\n    return sum(p for p in pri"


class Wire:
    """A JSON-RPC connection to the language server, byte by byte."""

    def __init__(self, port: int, timeout_s: float = 60.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.buf = b""
        self.seen: list[str] = []  # every message body received

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, msg_id, method: str, params: dict | None = None) -> dict:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}})
        return self.reply(msg_id)

    def reply(self, msg_id) -> dict:
        """The next message answering msg_id (notifications in between are skipped)."""
        while True:
            message = self._message()
            if message.get("id") == msg_id:
                return message

    def initialize(self, token: str | None) -> dict:
        options = {"token": token} if token else {}
        params = {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": options}
        reply = self.request("init", "initialize", params)
        if "result" in reply:
            self.notify("initialized", {})
        return reply

    def _message(self) -> dict:
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
        while len(self.buf) < length:
            self.buf += self._recv()
        body, self.buf = self.buf[:length], self.buf[length:]
        self.seen.append(body.decode("utf-8", "replace"))
        return json.loads(body)

    def _recv(self) -> bytes:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        return data

    def close(self) -> None:
        self.sock.close()


def open_doc(w: Wire, uri: str, text: str) -> None:
    w.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}})


def inline_completion(w: Wire, msg_id, uri: str, text: str) -> dict:
    lines = text.split("\n")
    position = {"line": len(lines) - 1, "character": len(lines[-1])}
    params = {"textDocument": {"uri": uri}, "position": position, "context": {"triggerKind": 1}}
    return w.request(msg_id, "textDocument/inlineCompletion", params)


class LspServer:
    """`fimgate lsp --tcp` in front of a gateway, with one token, and alice connected."""

    def __init__(self, gateway_url: str) -> None:
        self.token = "bench-abuse-" + os.urandom(8).hex()
        self.port = free_port()
        env = dict(os.environ, FIMGATE_LSP_TOKEN=self.token)
        cmd = [sys.executable, "-m", "fimgate", "lsp", "--tcp", f"127.0.0.1:{self.port}", "--gateway", gateway_url]
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while True:
            try:
                Wire(self.port).close()
                break
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("fimgate lsp --tcp did not start")
                time.sleep(0.2)
        self.alice = Wire(self.port)
        self.alice.initialize(self.token)
        open_doc(self.alice, ALICE_URI, ALICE_TEXT)
        self.asked = 0

    def alice_completes(self) -> bool:
        """Alice's completion request answered with text (the server up, the gateway reached)."""
        self.asked += 1
        try:
            reply = inline_completion(self.alice, f"alice-{self.asked}", ALICE_URI, ALICE_TEXT)
        except (OSError, ConnectionError, ValueError):
            return False
        result = reply.get("result") or []
        items = result.get("items", []) if isinstance(result, dict) else result
        return any(i.get("insertText") for i in items)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


class LspAttacker(threading.Thread):
    """One LSP abuse case in a loop until stopped; counts connections and what leaked."""

    def __init__(self, server: LspServer, case: str) -> None:
        super().__init__(daemon=True)
        self.server, self.case = server, case
        self.stop = threading.Event()
        self.sent = 0
        self.leaks = 0  # replies or connections that carried alice's secret
        self.trap = socket.socket()
        self.trap.bind(("127.0.0.1", 0))
        self.trap.listen(16)
        self.trap.settimeout(0.05)

    def run(self) -> None:
        step = self._connect_close if self.case == "lsp-connect-close" else self._unauthenticated
        while not self.stop.is_set():
            try:
                step()
            except (OSError, ConnectionError, ValueError):
                pass
            self.sent += 1
            self._check_trap()
        self.trap.close()

    def _connect_close(self) -> None:
        port = self.server.port
        Wire(port).close()
        w = Wire(port)
        w.sock.sendall(b"Content-Len")  # half a header, then gone
        w.close()
        w = Wire(port)
        w.notify("exit", {})
        w.close()

    def _unauthenticated(self) -> None:
        w = Wire(self.server.port, timeout_s=10)
        try:
            w.initialize(None)
            w.request(1, "workspace/executeCommand", {"command": "fimgate.debugDocument", "arguments": [ALICE_URI]})
            trap = f"http://127.0.0.1:{self.trap.getsockname()[1]}"
            w.notify("workspace/didChangeConfiguration", {"settings": {"fimgate": {"gateway": trap, "user": "alice"}}})
            open_doc(w, "file:///work/mallory/x.py", "x = ")
            inline_completion(w, 2, ALICE_URI, ALICE_TEXT)
        finally:
            self.leaks += sum("sk-alice" in body for body in w.seen)
            w.close()

    def _check_trap(self) -> None:
        try:
            conn, _ = self.trap.accept()
        except (socket.timeout, OSError):
            return
        conn.settimeout(1)
        try:
            self.leaks += b"sk-alice" in conn.recv(1 << 20)
        except OSError:
            pass
        conn.close()
        self.leaks += 1  # any connection here is code sent where the client said


def run_lsp_case(server: LspServer, case: str, people_run) -> dict:
    """people_run(): the HTTP people's run (bench abuse's), beside the attacker. Returns its row
    with what the LSP side saw."""
    attacker = LspAttacker(server, case)
    attacker.start()
    time.sleep(1.0)
    row = people_run()
    during = server.alice_completes()
    attacker.stop.set()
    attacker.join(timeout=30)
    row["abuser_sent"] = attacker.sent
    row["lsp"] = {
        "server_up": server.proc.poll() is None,
        "alice_answered_during": during,
        "alice_answered_after": server.alice_completes(),
        "leaks": attacker.leaks,
    }
    return row
