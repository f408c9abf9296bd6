"""`fimgate lsp --tcp` facing a hostile or buggy client, over a real socket, byte by byte: a token
before anything is served, no file the editor did not open, an answer to every request, and no
Python traceback in any reply. pygls's TCP server serves one connection, then stops: the tests
share it, in order."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

TOKEN = "s3cret-token-for-the-test"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def rpc():
    port = _free_port()
    env = dict(os.environ, FIMGATE_LSP_TOKEN=TOKEN)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fimgate", "lsp", "--tcp", f"127.0.0.1:{port}", "--gateway", "http://127.0.0.1:9"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.time() + 60
    while True:
        try:
            client = Rpc(port)
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("lsp did not start: " + proc.stdout.read())
            time.sleep(0.2)
    yield client
    client.close()
    proc.kill()
    proc.wait(timeout=10)


class Rpc:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)  # OSError until it listens
        self.buf = b""

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def reply(self, msg_id) -> dict:
        """The next message answering msg_id (notifications in between are skipped)."""
        while True:
            while b"\r\n\r\n" not in self.buf:
                self.buf += self._recv()
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
            while len(self.buf) < length:
                self.buf += self._recv()
            body, self.buf = self.buf[:length], self.buf[length:]
            message = json.loads(body)
            assert "Traceback" not in body.decode() and 'File "' not in body.decode()
            if message.get("id") == msg_id:
                return message

    def _recv(self) -> bytes:
        data = self.sock.recv(65536)
        assert data, "the server closed the connection"
        return data

    def request(self, msg_id, method, params=None) -> dict:
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}})
        return self.reply(msg_id)

    def initialize(self, token):
        return self.request(
            "init",
            "initialize",
            {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": {"token": token}},
        )

    def close(self):
        self.sock.close()


def test_nothing_is_served_before_initialize_with_the_token(rpc):
    r = rpc.request(1, "workspace/executeCommand", {"command": "fimgate.debugDocument", "arguments": ["file:///etc/passwd"]})
    assert r["error"]["code"] == -32001 and "result" not in r
    assert rpc.initialize("wrong")["error"]["code"] == -32001
    r = rpc.request(2, "workspace/executeCommand", {"command": "fimgate.debugDocument", "arguments": ["file:///etc/passwd"]})
    assert "error" in r


def test_an_authorized_client_reads_only_documents_it_opened(rpc, tmp_path):
    secret = tmp_path / "keys.txt"
    secret.write_text("sk-live-123 alice\n")
    assert "capabilities" in rpc.initialize(TOKEN)["result"]
    rpc.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    r = rpc.request(3, "workspace/executeCommand", {"command": "fimgate.debugDocument", "arguments": [secret.as_uri()]})
    assert r.get("result") is None and "sk-live" not in json.dumps(r)
    uri = "file:///work/demo/opened.py"
    rpc.send(
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}},
        }
    )
    r = rpc.request(4, "workspace/executeCommand", {"command": "fimgate.debugDocument", "arguments": [uri]})
    assert r["result"] == "x = 1\n"


def test_malformed_requests_get_an_error_reply_without_a_traceback(rpc):
    rpc.send({"jsonrpc": "2.0", "id": 10})  # no method
    assert rpc.reply(10)["error"]["code"] == -32600
    r = rpc.request(11, "textDocument/inlineCompletion", {"textDocument": {"uri": "file:///a.py"}})  # no position
    assert r["error"]["code"] == -32602
    r = rpc.request(12, "workspace/executeCommand", {"command": "fimgate.debugDocument", "arguments": [{"x": 1}]})
    assert "error" in r or r.get("result") is None
    r = rpc.request(13, "fimgate/noSuchMethod", {})
    assert r["error"]["code"] == -32601
