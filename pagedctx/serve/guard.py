"""Who may call, and how much: bearer tokens -> tenants, requests per token and minute.

A tenant is what a token names: the first 16 hex digits of the token's sha256 (the token itself is
never stored or logged). Sessions live under their tenant (`{tenant}.{id}` in the store), so a
token sees only its own sessions: another tenant's session id is simply not there (404). A server
with no tokens (loopback only) has one tenant, `local`.

The rate limit is a sliding minute per tenant, kept by each replica; with N replicas each one
enforces its share (the limit / N, rounded up), as the proxy spreads requests across them.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import threading
import time
from collections import defaultdict, deque

from pagedctx.serve.openai_types import ServeError

__all__ = ["LOCAL_TENANT", "RateLimiter", "TokenGuard"]

LOCAL_TENANT = "local"


class TokenGuard:
    """Checks `Authorization: Bearer <token>` against the configured tokens."""

    def __init__(self, tokens: tuple[str, ...]) -> None:
        digests = (hashlib.sha256(t.encode()).hexdigest() for t in tokens)
        self._tenants = {digest: digest[:16] for digest in digests}  # token digest -> tenant

    @property
    def required(self) -> bool:
        return bool(self._tenants)

    def tenant(self, authorization: str | None) -> str:
        """The caller's tenant; 401 in the OpenAI shape without a known token."""
        if not self._tenants:
            return LOCAL_TENANT
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ServeError(
                401,
                "missing bearer token: send 'Authorization: Bearer <token>' (the OpenAI SDK's api_key)",
                kind="authentication_error",
                code="invalid_api_key",
            )
        digest = hashlib.sha256(token.strip().encode()).hexdigest()
        for known, tenant in self._tenants.items():
            if hmac.compare_digest(known, digest):
                return tenant
        raise ServeError(401, "unknown bearer token", kind="authentication_error", code="invalid_api_key")


class RateLimiter:
    """At most `per_minute` requests per tenant in any 60 s window (this replica's share)."""

    def __init__(self, per_minute: int, replicas: int = 1) -> None:
        self.limit = max(1, math.ceil(per_minute / max(1, replicas)))
        self._seen: defaultdict[str, deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def check(self, tenant: str, now: float | None = None) -> None:
        """Count one request of `tenant`; 429 in the OpenAI shape over the limit."""
        moment = time.monotonic() if now is None else now
        with self._lock:
            seen = self._seen[tenant]
            while seen and moment - seen[0] >= 60.0:
                seen.popleft()
            if len(seen) >= self.limit:
                wait = 60.0 - (moment - seen[0])
                raise ServeError(
                    429,
                    f"rate limit: {self.limit} requests a minute for this token on this replica; "
                    f"retry in {wait:.0f} s",
                    kind="rate_limit_error",
                    code="rate_limit_exceeded",
                )
            seen.append(moment)
