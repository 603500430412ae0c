"""Sealing evidence (E8): an HMAC-SHA256 over a canonical JSON document, keyed outside the evidence.

A plain list of sha256 sums proves nothing to a reader when the writer of the folder can rewrite the
list too. The harness seals what it writes (the manifest, the starting snapshot) with a secret key
that lives outside every evidence folder and every repository: `PAGEDCTX_EVIDENCE_KEY_FILE`, else
`$XDG_CONFIG_HOME/pagedctx/evidence.key` (`~/.config/...`), 32 random bytes made with mode 0600 at
first use. A seal records the key's id (a hash of the key, not the key), so a verifier holding
another key says so instead of calling the evidence tampered.

Why an HMAC and not a signed in-toto statement: the collector and the verdict engine are the same
party (the harness), so a shared secret gives the same guarantee with no key infrastructure and no
new dependency. When the verifier is a different party than the collector, a public-key signature
(in-toto / sigstore) is the right tool; see docs/evidence.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from pagedctx.errors import UsageError

__all__ = ["KEY_ENV", "EvidenceKey", "canonical", "key_path", "load_key", "secret_paths", "secrets_within"]

KEY_ENV = "PAGEDCTX_EVIDENCE_KEY_FILE"
KEY_BYTES = 32


def key_path() -> Path:
    """Where the evidence key lives (see the module docstring)."""
    chosen = os.environ.get(KEY_ENV)
    if chosen:
        return Path(chosen)
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "pagedctx" / "evidence.key"


def secret_paths() -> tuple[Path, ...]:
    """What no snapshot, image or sandbox may hold or see, even inside a tree or under a bound
    folder: the evidence key and pagedctx's own home."""
    found = [key_path()]
    if os.environ.get("PAGEDCTX_HOME"):
        found.append(Path(os.environ["PAGEDCTX_HOME"]))
    return tuple(p for p in found if p.exists())


def secrets_within(tree: Path, secrets: tuple[Path, ...] | None = None) -> frozenset[str]:
    """The secret paths inside `tree`, relative to it (POSIX), for a walk that must skip them."""
    root = tree.resolve()
    found = set()
    for path in secret_paths() if secrets is None else secrets:
        real = path.resolve()
        if real == root or root in real.parents:
            found.add(real.relative_to(root).as_posix())
    return frozenset(found)


def canonical(document: object) -> bytes:
    """One byte form per JSON value (sorted keys, no spaces, UTF-8): what a seal covers."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


class EvidenceKey:
    """The harness's secret; `seal` and `verify` canonical JSON documents with it."""

    def __init__(self, secret: bytes, path: Path) -> None:
        if len(secret) < 16:
            raise UsageError(
                f"the evidence key {path} is too short ({len(secret)} bytes): delete it to make a new one"
            )
        self._secret = secret
        self.path = path
        self.key_id = hashlib.sha256(b"pagedctx-evidence-key\x00" + secret).hexdigest()[:16]

    def seal(self, document: object) -> str:
        return hmac.new(self._secret, canonical(document), hashlib.sha256).hexdigest()

    def verify(self, document: object, seal: str) -> bool:
        return hmac.compare_digest(self.seal(document), seal)

    def __repr__(self) -> str:  # never the secret
        return f"EvidenceKey(path={str(self.path)!r}, key_id={self.key_id!r})"


def load_key(*, create: bool) -> EvidenceKey:
    """The evidence key; made (0600, its folder 0700) when `create` and absent.

    Raises UsageError when the key is missing and may not be made (a verifier never invents a key:
    evidence sealed with a key it cannot read is unverifiable, not valid) or cannot be read.
    """
    path = key_path()
    try:
        return EvidenceKey(path.read_bytes(), path)
    except FileNotFoundError:
        if not create:
            raise UsageError(
                f"no evidence key at {path}: evidence can only be verified with the key that sealed it "
                f"(set {KEY_ENV} to its file)"
            ) from None
    except OSError as exc:
        raise UsageError(f"cannot read the evidence key {path}: {exc.strerror or exc}") from exc
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # made by a concurrent harness: read theirs
        return EvidenceKey(path.read_bytes(), path)
    except OSError as exc:
        raise UsageError(
            f"cannot create the evidence key {path}: {exc.strerror or exc}; set {KEY_ENV}"
        ) from exc
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(secrets.token_bytes(KEY_BYTES))
    return EvidenceKey(path.read_bytes(), path)
