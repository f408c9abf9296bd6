"""The language server's JSON-RPC protocol, hardened for a client that is buggy or hostile.

- Every request gets an answer: one that cannot be read (no method, params without a position)
  is answered with Invalid Request / Invalid Params instead of being dropped.
- No reply carries a Python traceback or exception text: an internal error says only that.
- With tokens (TCP mode), nothing but `initialize` carrying one of them in
  `initializationOptions.token` is served until it has been; a wrong token is refused and the
  connection serves nothing. The token names the connection's user.
- Over TCP (`per_connection`), `exit` closes this connection only, never the process.
"""

from __future__ import annotations

import hmac
import logging

from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcServerError
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger("fimgate.lsp")
NOT_AUTHORIZED = -32001  # a server error code (JSON-RPC reserves -32099..-32000 for these)
_IGNORED = object()


class FimProtocol(LanguageServerProtocol):
    users: dict[str, str] | None = None  # token -> user (TCP mode), set by the server before it serves
    per_connection = False  # TCP: one protocol per connection (fimgate/lsp/tcp.py)
    authorized = False
    user: str | None = None  # whom the connection's token names, once authorized
    closed = False  # the session ended (exit): its reader stops

    def set_writer(self, writer, *args, **kwargs):
        """A new connection: it starts unauthorized."""
        self.authorized = False
        self.user = None
        return super().set_writer(writer, *args, **kwargs)

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args):
        """stdio: the process ends (the LSP way). TCP: this connection ends, and nothing else."""
        if not self.per_connection:
            return (yield from super().lsp_exit(*args))
        self.closed = True
        if self.writer is not None:
            self.writer.close()
        return None

    def structure_message(self, data):
        try:
            return super().structure_message(data)
        except Exception as exc:  # noqa: BLE001 - answered below, never raised into the reader loop
            if isinstance(data, dict) and "jsonrpc" in data and "id" in data:
                cls = JsonRpcInvalidParams if "method" in data else JsonRpcInvalidRequest
                self._send_response(data["id"], error=cls(f"{cls.MESSAGE}: {_method(data)}").to_response_error())
                return _IGNORED
            raise exc

    def handle_message(self, message):
        if message is _IGNORED:
            return None
        if isinstance(message, dict):  # parsed, but no JSON-RPC message at all
            return None
        method = getattr(message, "method", None)
        msg_id = getattr(message, "id", None)
        if self.users is not None and not self.authorized:
            user = self._token_user(message) if method == types.INITIALIZE else None
            if user is not None:
                self.authorized, self.user = True, user
            elif method != types.EXIT:
                if msg_id is not None and method is not None:
                    self._send_response(
                        msg_id,
                        error=JsonRpcServerError(
                            "not authorized: initialize with initializationOptions.token", NOT_AUTHORIZED
                        ).to_response_error(),
                    )
                return None
        if method is None and msg_id is not None and not hasattr(message, "result") and not hasattr(message, "error"):
            self._send_response(msg_id, error=JsonRpcInvalidRequest("Invalid Request: no method").to_response_error())
            return None
        return super().handle_message(message)

    def _send_response(self, msg_id, result=None, error=None):
        if error is not None and error.code == JsonRpcInternalError.CODE:
            log.warning("internal error answering %s: %s", msg_id, error.message)
            error = JsonRpcInternalError("internal error").to_response_error()
        elif error is not None:
            error.data = None
        return super()._send_response(msg_id, result, error)

    def _token_user(self, message) -> str | None:
        """The user of the token an initialize carries, or None (every token compared in constant time)."""
        options = getattr(message.params, "initialization_options", None)
        given = options.get("token") if isinstance(options, dict) else None
        if not isinstance(given, str):
            return None
        found = None
        for token, user in self.users.items():
            if hmac.compare_digest(given.encode(), token.encode()):
                found = user
        return found


def _method(data: dict) -> str:
    method = data.get("method")
    return method if isinstance(method, str) else "(no method)"
