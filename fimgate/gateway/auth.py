"""Per-user API keys: the key, never the request body, decides who a request belongs to.

Off by default (loopback, one person). With keys configured, every completion request needs
`Authorization: Bearer KEY`; the user id is the key's owner, so one user cannot name another's
session, and each user's KV cache stays theirs. Keys are compared in constant time.

Key file: one `KEY USER` pair a line; `#` starts a comment.
"""

from __future__ import annotations

import hmac
import os

from fimgate.backend.pairs_file import read_pairs


class KeyError401(Exception):
    pass


class ApiKeys:
    def __init__(self, keys: dict[str, str], operators: frozenset[str] = frozenset()) -> None:
        self._keys = dict(keys)
        self.operators = operators  # users who may read everyone's acceptance numbers (--operators)

    @classmethod
    def from_file(cls, path: str) -> "ApiKeys":
        keys = read_pairs(path, "KEY USER")
        if not keys:
            raise ValueError(f"{path} holds no keys")
        return cls(keys)

    @classmethod
    def from_env(cls) -> "ApiKeys | None":
        path = os.environ.get("FIMGATE_API_KEYS_FILE")
        return cls.from_file(path) if path else None

    def user_for(self, authorization: str | None) -> str:
        if not authorization or not authorization.lower().startswith("bearer "):
            raise KeyError401("missing API key: send 'Authorization: Bearer KEY'")
        given = authorization[7:].strip()
        owner = None
        for key, user in self._keys.items():
            if hmac.compare_digest(key.encode(), given.encode()):
                owner = user
        if owner is None:
            raise KeyError401("invalid API key")
        return owner
