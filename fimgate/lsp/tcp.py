"""`fimgate lsp --tcp HOST:PORT`: every connection is a language-server session of its own.

pygls's TCP server serves all connections with one protocol object - one token check, one set
of settings, one reply channel - and shuts the process down when any connection ends. Here each
connection gets its own FimLanguageServer: it authenticates with its own `initialize`, keeps its
own settings, documents and in-flight suggestions, gets its own replies, and ends alone (an
`exit`, a shutdown or a dropped socket closes that connection only). What the sessions share is
the completion service (the model is loaded once, or the gateway's client), whose per-(user,
document) sessions keep people apart.

Over TCP the client does not choose where code goes, which model loads or whom it is: the
`gateway` and `model` settings are the command line's, and the user is the one its token names
(`--token-file` lines `TOKEN [USER]`; one token alone is user "local").

Bounds, per connection: a message is at most MAX_MESSAGE_BYTES (a larger Content-Length ends the
connection before its body is read), a header line at most MAX_HEADER_BYTES; at most
MAX_CONNECTIONS connections at once (the rest are closed at once).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Callable

log = logging.getLogger("fimgate.lsp")
MAX_MESSAGE_BYTES = 32 << 20  # one JSON-RPC message: a whole large document in a didOpen
MAX_HEADER_BYTES = 4096
MAX_CONNECTIONS = 64
_LENGTH = re.compile(rb"^Content-Length: *(\d{1,12})\r\n$", re.I)


class Completers:
    """The completion service a server uses, made once on first use; shared by every TCP
    session (closed only when the process ends), owned by the one stdio session."""

    def __init__(self, make: Callable[[object], object], shared: bool) -> None:
        self._make = make  # settings -> a completer (blocking: it may load a model)
        self.shared = shared
        self._completer = None
        self._lock = asyncio.Lock()

    @property
    def ready(self):
        return self._completer

    async def get(self, settings):
        async with self._lock:
            if self._completer is None:
                loop = asyncio.get_running_loop()
                self._completer = await loop.run_in_executor(None, self._make, settings)
        return self._completer

    async def release(self) -> None:
        """A session ended: close the completer unless other sessions share it."""
        if not self.shared and self._completer is not None:
            await self._completer.aclose()


async def read_messages(reader: asyncio.StreamReader, protocol) -> None:
    """Feed `protocol` each JSON-RPC message of the stream until it ends, the protocol closes the
    session, or the client breaks a bound (then the connection ends: nothing is half read)."""
    while not protocol.closed:
        length = None
        while True:
            line = await reader.readline()
            if not line:
                return
            if len(line) > MAX_HEADER_BYTES:
                log.warning("LSP connection: a header line over %d bytes; closing it", MAX_HEADER_BYTES)
                return
            if line in (b"\r\n", b"\n"):
                break
            match = _LENGTH.match(line)
            if match:
                length = int(match.group(1))
        if length is None:
            continue  # a blank line with no Content-Length before it: nothing to read
        if length > MAX_MESSAGE_BYTES:
            log.warning("LSP connection: a %d-byte message (at most %d); closing it", length, MAX_MESSAGE_BYTES)
            return
        body = await reader.readexactly(length)
        try:
            protocol.handle_message(json.loads(body, object_hook=protocol.structure_message))
        except Exception:  # a message that cannot be read is the client's problem, not the server's
            log.exception("LSP connection: unreadable message")


class TcpSessions:
    """Accepts connections and runs a fresh server for each (make_server() -> FimLanguageServer)."""

    def __init__(self, make_server: Callable[[], object]) -> None:
        self.make_server = make_server
        self.live: set = set()

    async def serve(self, host: str, port: int, started: Callable[[], None] | None = None) -> None:
        server = await asyncio.start_server(self._connection, host, port, limit=MAX_HEADER_BYTES * 2)
        if started is not None:
            started()
        async with server:
            await server.serve_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.live) >= MAX_CONNECTIONS:
            log.warning("LSP: %d connections already; refusing another", MAX_CONNECTIONS)
            writer.close()
            return
        ls = self.make_server()
        self.live.add(ls)
        ls.protocol.set_writer(writer)
        try:
            await read_messages(reader, ls.protocol)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, ConnectionError):
            pass  # the client went away mid-message, or sent a line past the stream's limit
        finally:
            self.live.discard(ls)
            await ls.end_session()
            writer.close()
