"""Store URLs: which backend a URL names, and the default one (S4; DESIGN.md section 5).

Accepted forms (the SQLite forms follow SQLAlchemy: everything after `sqlite:///` is the path):

- `sqlite:////abs/path/state.db`: an absolute path (four slashes: three, then the path's own `/`);
- `sqlite:///relative/path/state.db`: a path relative to the current directory at open time;
- `redis://[user:password@]host:port/db` (or `rediss://` for TLS): a Redis server.

No URL means `sqlite:///<home>/state.db` with `home` absolute: the argument, else `$PAGEDCTX_HOME`,
else `.pagedctx` in the current directory. (`PAGEDCTX_STORE` is read by `pagedctx.config`, not here.)
"""

from __future__ import annotations

import os
from pathlib import Path

from pagedctx.errors import UsageError
from pagedctx.host.store.base import Store
from pagedctx.host.store.sqlite import SqliteStore

__all__ = ["ACCEPTED_FORMS", "default_home", "default_store_url", "open_store", "sqlite_path"]

ACCEPTED_FORMS = (
    "sqlite:////abs/path/state.db (absolute), sqlite:///relative/path/state.db (relative to the "
    "current directory) or redis://host:port/db"
)
_SQLITE = "sqlite://"
_REDIS = ("redis://", "rediss://")


def default_home() -> Path:
    """`$PAGEDCTX_HOME`, else `.pagedctx` in the current directory, made absolute."""
    return Path(os.environ.get("PAGEDCTX_HOME") or ".pagedctx").expanduser().absolute()


def default_store_url(home: Path | None = None) -> str:
    """`sqlite:///<home>/state.db` with an absolute home (see `default_home`)."""
    base = Path(home).expanduser().absolute() if home is not None else default_home()
    return f"sqlite:///{base / 'state.db'}"


def sqlite_path(url: str) -> Path:
    """The file a `sqlite:///...` URL names (relative paths against the current directory)."""
    rest = url[len(_SQLITE) :]
    if not rest.startswith("/"):
        raise UsageError(f"store URL {url!r} names a host; SQLite URLs have none: use {ACCEPTED_FORMS}")
    path = rest[1:]
    if not path or path.endswith("/"):
        raise UsageError(f"store URL {url!r} names no file: use {ACCEPTED_FORMS}")
    return Path(path).absolute()


def open_store(url: str | None = None, *, home: Path | None = None) -> Store:
    """Open the store a URL names (the default SQLite file when `url` is None)."""
    if url is None:
        url = default_store_url(home)
    if url.lower().startswith(_SQLITE):
        return SqliteStore(sqlite_path(url))
    if url.lower().startswith(_REDIS):
        from pagedctx.host.store.redis import RedisStore

        return RedisStore(url)
    raise UsageError(f"unknown store URL {url!r}: use {ACCEPTED_FORMS}")
