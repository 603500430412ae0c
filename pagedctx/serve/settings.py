"""What a chat server runs with: `serve:` in the profile, then the environment, then the flags.

```yaml
serve:
  tokens: ["sk-team-a", "sk-team-b"]   # bearer tokens; or PAGEDCTX_SERVE_TOKENS=a,b; or --token-file
  source_roots: ["/srv/repos"]         # paths POST /v1/sessions/{id}/sources may attach
  max_body_bytes: 8388608              # 413 above this
  body_timeout_seconds: 30             # 408 when a request body takes longer to arrive
  max_messages: 10000                  # 413 above this many messages in one request
  requests_per_minute: 600             # per token (shared on a Redis store, else each replica's share)
  max_rounds: 6                        # PCP rounds per request
  lock_wait_seconds: 60                # how long a request waits for its session's lock
  trace: true                          # keep every session's round events (GET .../trace, .../view)
  bundles: /srv/pagedctx/bundles       # record each session as a replay bundle here (docs/replay.md)
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pagedctx.config import ServeSettings, is_loopback
from pagedctx.errors import ConfigError, UsageError
from pagedctx.serve.guard import read_tokens

__all__ = ["TOKENS_ENV", "ServeSettings", "is_loopback", "serve_settings"]

TOKENS_ENV = "PAGEDCTX_SERVE_TOKENS"


def serve_settings(
    section: ServeSettings | Mapping[str, Any],
    flags: Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    token_file: Path | None = None,
) -> ServeSettings:
    """The profile's `serve:` section, tokens from the environment / a file, then the flags.

    Off loopback a server without a token is refused here, before anything starts.
    """
    env = os.environ if environ is None else environ
    given = section.model_dump(exclude_unset=True) if isinstance(section, ServeSettings) else dict(section)
    merged: dict[str, Any] = {**given, **{k: v for k, v in flags.items() if v is not None}}
    try:
        settings = ServeSettings.model_validate(merged)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(
            f"invalid serve settings ({problems}); fix the profile's serve: section or the flags"
        ) from exc
    tokens = read_tokens(
        TOKENS_ENV, environ=env, token_file=token_file, configured=settings.tokens, config_key="serve.tokens"
    )
    settings = settings.model_copy(update={"tokens": tokens})
    if not is_loopback(settings.host) and not settings.tokens:
        raise UsageError(
            f"refusing to serve on {settings.host} without a bearer token: anyone who reaches it could "
            f"read every session; set {TOKENS_ENV}, serve.tokens in the profile, or --token-file "
            "(or bind 127.0.0.1)"
        )
    return settings
