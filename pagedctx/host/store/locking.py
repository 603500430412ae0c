"""The store locks' shared parts (both backends): who holds a lock (`lock_owner`), whether that
process is gone (`owner_is_gone`: a lock of a dead process on this host is taken over at once), the
message naming the holder, and the wait that polls a backend's one attempt (`acquire_waiting`).
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable
from datetime import datetime

from pagedctx.errors import StoreError

__all__ = ["acquire_waiting", "lock_held_message", "lock_owner", "owner_is_gone"]


def lock_owner() -> str:
    """A lock owner id: `hostname:pid:random`, unique per acquisition."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def owner_is_gone(owner: str) -> bool:
    """True when a lock owner was a process on this host that no longer runs (killed, crashed).

    Such a lock is taken over at once instead of blocking until its time-to-live runs out.
    """
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def lock_held_message(name: str, owner: str, expires_at: float) -> str:
    """The StoreError text for a lock held by someone else (shared by both backends)."""
    until = datetime.fromtimestamp(expires_at).astimezone().isoformat(timespec="seconds")
    return (
        f"the {name} is being updated by another process (lock '{name}' held by {owner} until {until}); "
        f"wait for it to finish and retry, or, if that process is gone, retry after {until} "
        "when its lock expires"
    )


_POLL_FIRST_SECONDS = 0.05
_POLL_MAX_SECONDS = 1.0


def acquire_waiting(
    name: str,
    attempt: Callable[[], tuple[str, float] | None],
    *,
    wait_seconds: float,
    on_wait: Callable[[str], None] | None,
) -> None:
    """Call `attempt` until it takes lock `name` or `wait_seconds` have passed (shared by both backends).

    `attempt()` returns None when it took the lock, else the holder and when its lock expires. The
    first time it has to wait, `on_wait` gets one message naming the holder; when the wait runs
    out, StoreError names the holder (the latest one) and how long it waited.
    """
    if not wait_seconds >= 0 or wait_seconds == float("inf"):
        raise StoreError(f"lock '{name}': wait_seconds must be a finite number >= 0, got {wait_seconds}")
    deadline = time.monotonic() + wait_seconds
    pause = _POLL_FIRST_SECONDS
    told = False
    while True:
        held = attempt()
        if held is None:
            return
        owner, expires_at = held
        left = deadline - time.monotonic()
        if left <= 0:
            waited = f" (waited {wait_seconds:g} s for it)" if wait_seconds > 0 else ""
            raise StoreError(lock_held_message(name, owner, expires_at) + waited)
        if not told and on_wait is not None:
            on_wait(
                f"waiting up to {wait_seconds:g} s for another process to finish updating the {name} "
                f"(lock '{name}' held by {owner})"
            )
            told = True
        time.sleep(min(pause, left))
        pause = min(pause * 2, _POLL_MAX_SECONDS)
