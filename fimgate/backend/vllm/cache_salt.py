"""Per-tenant cache salts for vLLM's prefix cache.

vLLM mixes a request's `cache_salt` into the hash of its first block, so two requests share
cached KV only when their salts are equal. The gateway derives each salt with HMAC-SHA256 from
a server secret and the tenant's name: salts are unguessable from outside (a client cannot pick
another tenant's salt to probe its cache by timing), stable across gateway restarts when the
secret is kept, and equal for users a deployment maps to one tenant to share repository context.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

from fimgate.backend.pairs_file import read_pairs


class CacheSalts:
    def __init__(self, secret: bytes | None = None, tenants: dict[str, str] | None = None) -> None:
        # no secret: a random one per process; caches then go cold when the gateway restarts
        self._secret = secret if secret else secrets.token_bytes(32)
        self._tenants = dict(tenants or {})

    def tenant_of(self, user_id: str) -> str:
        return self._tenants.get(user_id, user_id)

    def salt_for(self, user_id: str) -> str:
        """43 URL-safe characters (256 bits), as vLLM's docs advise."""
        mac = hmac.new(self._secret, self.tenant_of(user_id).encode("utf-8"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")

    @classmethod
    def from_files(cls, secret_file: str | None, tenants_file: str | None) -> "CacheSalts":
        """secret_file: raw bytes (or $FIMGATE_SALT_SECRET); tenants_file: 'USER TENANT' lines."""
        secret = (
            open(secret_file, "rb").read().strip() if secret_file else os.environ.get("FIMGATE_SALT_SECRET", "").encode("utf-8")
        )
        tenants = read_pairs(tenants_file, "USER TENANT") if tenants_file else {}
        return cls(secret or None, tenants)
