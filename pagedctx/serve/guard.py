"""Who may call, and how much: bearer tokens -> tenants, requests per token and minute.

Both servers (`pagedctx serve` and `pagedctx mcp --http`) read their tokens with `read_tokens`
and check them with one `BearerGuard`.

A tenant is what a token names: the first 16 hex digits of the token's sha256 (the token itself is
never stored or logged). Sessions live under their tenant (`{tenant}.{id}` in the store), so a
token sees only its own sessions: another tenant's session id is simply not there (404). A server
with no tokens (loopback only) has one tenant, `local`.

A request carries its token as exactly one `Authorization: Bearer <token>` header, in ASCII, with
one space after the scheme (FastAPI's `HTTPBearer` reads it); the token is compared in constant
time with every known one (`hmac.compare_digest` on sha256 digests).

The rate limit is a moving minute per tenant, counted by the `limits` library: in the replica's
memory by default (each of N replicas enforces its share, the limit / N rounded up, as the proxy
spreads requests across them), or in the sessions' Redis when the server runs on a Redis store
(every replica counts in one place, so the limit holds for all of them together).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from fastapi.security import HTTPBearer
from limits import RateLimitItemPerMinute
from limits.errors import StorageError as LimitsStorageError
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter
from starlette.requests import HTTPConnection

from pagedctx.errors import ConfigError, StoreError, UsageError
from pagedctx.serve.openai_types import ServeError

__all__ = ["LOCAL_TENANT", "MIN_TOKEN_CHARS", "BearerGuard", "RateLimiter", "read_tokens", "tenant_of"]

LOCAL_TENANT = "local"
MIN_TOKEN_CHARS = 8
_TOKEN = re.compile(r"[\x21-\x7e]+")  # a bearer token: visible ASCII, no spaces (as a header carries it)
_REDIS = ("redis://", "rediss://")
LIMITS_PREFIX = "pagedctx-limits"  # the rate limit's keys in a shared Redis, beside the store's


def read_tokens(
    env_name: str,
    *,
    environ: Mapping[str, str],
    token_file: Path | None = None,
    configured: Iterable[str] = (),
    config_key: str | None = None,
) -> tuple[str, ...]:
    """The bearer tokens of a server: `configured` (the profile's), then `env_name` (comma
    separated), then `token_file` (one a line; blank lines and `#` comments skipped); `config_key`
    names where `configured` came from, for the error.

    Every token is at least `MIN_TOKEN_CHARS` long and printable ASCII without spaces (what an
    HTTP header carries); anything else is a `ConfigError` naming what to fix.
    """
    tokens = [str(t) for t in configured]
    tokens += [t.strip() for t in environ.get(env_name, "").split(",") if t.strip()]
    if token_file is not None:
        try:
            text = token_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read token file {token_file}: {exc.strerror or exc}") from exc
        tokens += [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    where = " or ".join(w for w in (config_key, env_name, "--token-file") if w)
    if any(len(t) < MIN_TOKEN_CHARS for t in tokens):
        raise ConfigError(f"bearer tokens must be at least {MIN_TOKEN_CHARS} characters long; fix {where}")
    if any(not _TOKEN.fullmatch(t) for t in tokens):
        raise ConfigError(
            f"bearer tokens are printable ASCII without spaces (as HTTP headers carry them); fix {where}"
        )
    return tuple(tokens)


def tenant_of(token: str) -> str:
    """A token's tenant: the first 16 hex digits of its sha256."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def _missing() -> ServeError:
    return ServeError(
        401,
        "missing bearer token: send 'Authorization: Bearer <token>' (the OpenAI SDK's api_key)",
        kind="authentication_error",
        code="invalid_api_key",
    )


class BearerGuard:
    """Checks `Authorization: Bearer <token>` against the configured tokens (see the module
    docstring); usable as a FastAPI dependency and, on an ASGI scope, by plain middleware."""

    def __init__(self, tokens: Iterable[str]) -> None:
        digests = (hashlib.sha256(t.encode()).hexdigest() for t in tokens)
        self._tenants = {digest: digest[:16] for digest in digests}  # token digest -> tenant
        self._bearer = HTTPBearer(auto_error=False)

    @property
    def required(self) -> bool:
        return bool(self._tenants)

    async def __call__(self, connection: HTTPConnection) -> str:
        """The caller's tenant; a 401 `ServeError` in the OpenAI shape without a known token."""
        if not self._tenants:
            return LOCAL_TENANT
        given = connection.headers.getlist("authorization")
        credentials = await self._bearer(connection)
        if (
            credentials is None
            or len(given) != 1
            or given[0] != f"{credentials.scheme} {credentials.credentials}"  # one space, nothing else
            or not _TOKEN.fullmatch(credentials.credentials)  # headers arrive as Latin-1: ASCII only
        ):
            raise _missing()
        digest = hashlib.sha256(credentials.credentials.encode()).hexdigest()
        found = None
        for known, tenant in self._tenants.items():  # every digest compared: no early exit
            if hmac.compare_digest(known, digest):
                found = tenant
        if found is None:
            raise ServeError(401, "unknown bearer token", kind="authentication_error", code="invalid_api_key")
        return found


class RateLimiter:
    """At most `per_minute` requests per tenant in any 60 s window, counted in `store`'s Redis
    when the store is one (shared by every replica), else in this replica's memory (its share)."""

    def __init__(self, per_minute: int, replicas: int = 1, store: str | None = None) -> None:
        self.shared = store is not None and store.lower().startswith(_REDIS)
        share = per_minute if self.shared else math.ceil(per_minute / max(1, replicas))
        self.limit = max(1, share)
        self._item = RateLimitItemPerMinute(self.limit)
        if self.shared:
            assert store is not None
            storage = storage_from_string(store, key_prefix=LIMITS_PREFIX, wrap_exceptions=True)
        else:
            storage = storage_from_string("memory://")
        self._limiter = MovingWindowRateLimiter(storage)
        self._scope = "across the replicas" if self.shared else "on this replica"

    def check(self, tenant: str) -> None:
        """Count one request of `tenant`; 429 in the OpenAI shape over the limit; a Redis that
        does not answer is a `StoreError` (503)."""
        try:
            if self._limiter.hit(self._item, tenant):
                return
            reset = self._limiter.get_window_stats(self._item, tenant).reset_time
        except LimitsStorageError as exc:
            raise StoreError(f"the rate limit's Redis did not answer ({exc.storage_error})") from exc
        raise ServeError(
            429,
            f"rate limit: {self.limit} requests a minute for this token {self._scope}; "
            f"retry in {max(0.0, reset - time.time()):.0f} s",
            kind="rate_limit_error",
            code="rate_limit_exceeded",
        )
