"""The bearer guard, the token reader and the rate limit both servers share (D2; issue 33).

`pagedctx serve` and `pagedctx mcp --http` read tokens with `read_tokens` and check them with one
`BearerGuard`; the rate limit counts with the `limits` library, in memory (a replica's share) or in
the store's Redis (one limit for every replica), tested here on a real redis-server.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from starlette.requests import HTTPConnection

from pagedctx.errors import ConfigError, UsageError
from pagedctx.serve.guard import LOCAL_TENANT, BearerGuard, RateLimiter, read_tokens, tenant_of
from pagedctx.serve.openai_types import ServeError, error_body


def _tenant(guard: BearerGuard, *values: bytes) -> str:
    scope = {"type": "http", "headers": [(b"authorization", v) for v in values]}
    return anyio.run(guard, HTTPConnection(scope))


def _refusal(guard: BearerGuard, *values: bytes) -> ServeError:
    with pytest.raises(ServeError) as caught:
        _tenant(guard, *values)
    return caught.value


def test_one_reader_takes_the_profile_the_environment_and_a_file_and_refuses_bad_tokens(
    tmp_path: Path,
) -> None:
    """D2, issue 33: configured tokens, then the variable's list, then the file's lines (comments
    and blank lines skipped); a short token, one with a space or a non-ASCII letter is refused
    with what to fix; an unreadable file says so."""
    tokens = tmp_path / "tokens"
    tokens.write_text("# team c\nsk-team-c-333\n\n  sk-team-d-444  \n", encoding="utf-8")
    read = read_tokens(
        "X_TOKENS",
        environ={"X_TOKENS": "sk-team-b-222, ,"},
        token_file=tokens,
        configured=("sk-team-a-111",),
    )
    assert read == ("sk-team-a-111", "sk-team-b-222", "sk-team-c-333", "sk-team-d-444")
    assert read_tokens("X_TOKENS", environ={}) == ()
    for bad, words in (
        ("short", "at least 8"),
        ("two words!", "printable ASCII"),
        ("t\u00f6k\u00e9n-123", "ASCII"),
    ):
        with pytest.raises(ConfigError, match=words) as caught:
            read_tokens("X_TOKENS", environ={"X_TOKENS": bad}, config_key="serve.tokens")
        assert str(caught.value).endswith("fix serve.tokens or X_TOKENS or --token-file")
    with pytest.raises(UsageError, match="cannot read token file"):
        read_tokens("X_TOKENS", environ={}, token_file=tmp_path / "none")


def test_the_guard_answers_a_known_token_with_its_tenant_and_anything_else_with_a_401() -> None:
    """D2, issue 33: exactly one `Authorization: Bearer <token>` in ASCII with one space; the
    OpenAI 401 bodies are the ones clients have always seen."""
    guard = BearerGuard(("token-a-123", "token-b-456"))
    assert _tenant(guard, b"Bearer token-b-456") == tenant_of("token-b-456")
    assert _tenant(guard, b"bearer token-a-123") == tenant_of("token-a-123")
    assert _tenant(BearerGuard(()), b"Basic whatever") == LOCAL_TENANT  # no tokens: one tenant
    missing = {
        "error": {
            "message": "missing bearer token: send 'Authorization: Bearer <token>' "
            "(the OpenAI SDK's api_key)",
            "type": "authentication_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    for values in (
        (),
        (b"Bearer",),
        (b"Basic token-a-123",),
        (b"Bearer  token-a-123",),
        (b"Bearer token-a-123 x",),
        ("Bearer t\u00f6ken-a-123".encode(),),
        (b"Bearer token-a-123", b"Bearer token-b-456"),
    ):
        refusal = _refusal(guard, *values)
        assert (refusal.status, error_body(refusal)) == (401, missing), values
    unknown = _refusal(guard, b"Bearer token-c-789")
    assert error_body(unknown) == {
        "error": {
            "message": "unknown bearer token",
            "type": "authentication_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }


def test_in_memory_each_replica_enforces_its_share() -> None:
    """D2, issue 33: without a shared store the limit is split across the replicas (rounded up);
    over it, a 429 in the OpenAI shape saying when to retry."""
    limiter = RateLimiter(5, replicas=2)
    assert limiter.limit == 3 and not limiter.shared
    for _ in range(3):
        limiter.check("t1")
    with pytest.raises(ServeError) as caught:
        limiter.check("t1")
    refusal = caught.value
    assert (refusal.status, refusal.kind, refusal.code) == (429, "rate_limit_error", "rate_limit_exceeded")
    assert refusal.message.startswith(
        "rate limit: 3 requests a minute for this token on this replica; retry in "
    )
    limiter.check("t2")  # another tenant counts alone


@pytest.mark.integration
def test_two_replicas_on_one_redis_enforce_one_limit(redis_url: str) -> None:
    """D2, issue 33, on a real redis-server: two limiters (two replicas) on the store's Redis
    count together, so a token gets `per_minute` requests in all, not `per_minute` each."""
    first, second = RateLimiter(4, replicas=2, store=redis_url), RateLimiter(4, replicas=2, store=redis_url)
    assert first.shared and first.limit == 4  # the whole limit: the count is shared
    for replica in (first, second, first, second):
        replica.check("t1")
    for replica in (first, second):
        with pytest.raises(ServeError) as caught:
            replica.check("t1")
        assert caught.value.status == 429 and "across the replicas" in caught.value.message
    second.check("t2")  # another tenant counts alone
