"""`fimgate lsp --tcp` facing a hostile or buggy client, over a real socket, byte by byte: a token
before anything is served, no file the editor did not open, an answer to every request, and no
Python traceback in any reply; every connection its own session (fimgate/lsp/tcp.py): one that
ends, exits or breaks a bound ends alone, and none reads or steers another's."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from fimgate.bench.abuse.lsp import Wire

TOKEN = "s3cret-token-for-the-test"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
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
            Rpc(port).close()
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("lsp did not start: " + proc.stdout.read())
            time.sleep(0.2)
    yield proc, port
    proc.kill()
    proc.wait(timeout=10)


@pytest.fixture
def rpc(server):
    client = Rpc(server[1])
    yield client
    client.close()


class Rpc(Wire):
    """The bench's raw JSON-RPC client (fimgate/bench/abuse/lsp.py), asserting what every reply
    must be: no Python traceback in it, and the connection still open while one is awaited."""

    def __init__(self, port):
        super().__init__(port, timeout_s=20)  # OSError until it listens

    def _message(self) -> dict:
        message = super()._message()
        assert "Traceback" not in self.seen[-1] and 'File "' not in self.seen[-1]
        return message

    def _recv(self) -> bytes:
        data = self.sock.recv(65536)
        assert data, "the server closed the connection"
        return data

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
    assert "capabilities" in rpc.initialize(TOKEN)["result"]
    rpc.send({"jsonrpc": "2.0", "id": 10})  # no method
    assert rpc.reply(10)["error"]["code"] == -32600
    r = rpc.request(11, "textDocument/inlineCompletion", {"textDocument": {"uri": "file:///a.py"}})  # no position
    assert r["error"]["code"] == -32602
    r = rpc.request(12, "workspace/executeCommand", {"command": "fimgate.debugDocument", "arguments": [{"x": 1}]})
    assert "error" in r or r.get("result") is None
    r = rpc.request(13, "fimgate/noSuchMethod", {})
    assert r["error"]["code"] == -32601


def _open(rpc, uri, text):
    doc = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    rpc.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": doc}})


def _debug(rpc, msg_id, uri):
    return rpc.request(msg_id, "workspace/executeCommand", {"command": "fimgate.debugDocument", "arguments": [uri]})


def test_a_connection_that_ends_or_exits_ends_alone(server):
    """pygls's TCP server shut the whole process down when any connection closed: one editor
    disconnecting stopped it for everyone."""
    proc, port = server
    Rpc(port).close()  # connect, then go away
    quitter = Rpc(port)
    quitter.send({"jsonrpc": "2.0", "method": "exit"})  # an unauthenticated exit
    time.sleep(0.5)
    authed = Rpc(port)
    assert "capabilities" in authed.initialize(TOKEN)["result"]
    authed.send({"jsonrpc": "2.0", "method": "exit"})  # an authenticated one: its own connection only
    time.sleep(0.5)
    assert proc.poll() is None
    after = Rpc(port)
    assert "capabilities" in after.initialize(TOKEN)["result"]
    after.close()


def test_connections_do_not_share_authentication_documents_or_replies(server):
    """A second connection, opened before the first initialized, was served once the first had
    the right token: it read the first one's documents and got its replies."""
    _, port = server
    alice, mallory = Rpc(port), Rpc(port)
    assert "capabilities" in alice.initialize(TOKEN)["result"]
    uri = "file:///work/alice/secret.py"
    _open(alice, uri, "API_KEY = 'alice-only'\n")
    assert _debug(alice, 1, uri)["result"] == "API_KEY = 'alice-only'\n"
    r = _debug(mallory, 2, uri)  # never authenticated: refused, on its own socket
    assert r["error"]["code"] == -32001 and "alice-only" not in json.dumps(r)
    assert "capabilities" in mallory.initialize(TOKEN)["result"]
    assert _debug(mallory, 3, uri).get("result") is None  # authenticated, but not alice's documents
    assert _debug(alice, 4, uri)["result"] == "API_KEY = 'alice-only'\n"  # alice's reply reaches alice
    alice.close()
    mallory.close()


def test_a_client_cannot_send_code_elsewhere_over_tcp(server):
    """An authenticated client set `gateway` to a port it listened on: the next didOpen's text went
    there. Over TCP where code goes is the command line's, not a client's."""
    _, port = server
    trap = socket.socket()
    trap.bind(("127.0.0.1", 0))
    trap.listen(4)
    trap.settimeout(3)
    client = Rpc(port)
    assert "capabilities" in client.initialize(TOKEN)["result"]
    settings = {"fimgate": {"gateway": f"http://127.0.0.1:{trap.getsockname()[1]}", "user": "alice", "debounceMs": 0}}
    client.send({"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration", "params": {"settings": settings}})
    _open(client, "file:///work/bob/code.py", "password = 'hunter2'\n")
    with pytest.raises(socket.timeout):
        trap.accept()
    trap.close()
    client.close()


def test_a_message_over_the_size_bound_ends_its_connection_only(server):
    proc, port = server
    big = Rpc(port)
    big.sock.sendall(b"Content-Length: 99999999999\r\n\r\n{")
    big.sock.settimeout(10)
    assert big.sock.recv(10) == b""  # closed, its body never read
    big.close()
    other = Rpc(port)
    assert "capabilities" in other.initialize(TOKEN)["result"] and proc.poll() is None
    other.close()
