"""Whether a bundle's own files are as they were written (D3, P15): a replay of a bundle whose
manifest, trace, contexts, calls or input copies changed after it was written is `tampered`,
never `reproduced`.

- The manifest carries a seal over itself (`seal_of`): `sha256:<hex>` of its canonical JSON, or,
  when `PAGEDCTX_BUNDLE_KEY` is set where it is written, `hmac-sha256:<hex>` keyed with it. An edit
  of the manifest alone (a date, a step, a setting a replay would not notice) breaks the seal; an
  HMAC seal also stops anyone without the key from re-sealing a forged manifest. A bundle written
  before seals has none: it is checked by the rest.
- The manifest holds the digests of the record files (as far as it accounts for them:
  `committed`); each must match.
- Every input copy (dialogues, documents, copied sources, an evolution's base tree) must hash to
  the name it is kept under.
- Each recorded context must hash to what the trace says was rendered that round (a session's
  `xml_sha256`; an evolution's `payload_sha256`), so a contexts file edited together with the
  manifest's digests is still caught.

What lies outside the bundle (the package version, the repository files on disk) is not the
bundle's integrity: replays report those as causes of a divergence.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pagedctx.host.records.bundle import BundleManifest, EvolveManifest, committed, sha256_hex

__all__ = ["KEY_VARIABLE", "bundle_key", "evolve_tampering", "seal_of", "session_tampering"]

KEY_VARIABLE = "PAGEDCTX_BUNDLE_KEY"


def bundle_key() -> bytes | None:
    """The key bundles are sealed and checked with (`PAGEDCTX_BUNDLE_KEY`), None when unset."""
    value = os.environ.get(KEY_VARIABLE, "")
    return value.encode("utf-8") if value else None


def seal_of(manifest: BaseModel, key: bytes | None) -> str:
    """The seal of a manifest: over its canonical JSON without its own seal."""
    data = manifest.model_dump(mode="json", exclude={"seal"})
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if key is not None:
        return "hmac-sha256:" + hmac.new(key, text, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(text).hexdigest()


def _seal_problem(manifest: BundleManifest | EvolveManifest) -> str | None:
    seal = manifest.seal
    if seal is None:
        return None  # written before seals: the rest is checked
    key = bundle_key()
    if seal.startswith("hmac-sha256:"):
        if key is None:
            return (
                f"the manifest is sealed with a key: set {KEY_VARIABLE} to the key it was written with "
                "to check it"
            )
        expected = seal_of(manifest, key)
    elif key is not None:  # anyone can write a keyless seal: with a key, only a keyed one counts
        return f"the manifest is not sealed with {KEY_VARIABLE}'s key (a keyless seal anyone could write)"
    else:
        expected = seal_of(manifest, None)
    if not hmac.compare_digest(expected, seal):
        return "the manifest changed since it was written (its seal does not match)"
    return None


def _copy_problem(folder: Path, digest: str, what: str) -> str | None:
    copy = folder / "inputs" / digest
    if not copy.is_file():
        return f"the bundle's copy of {what} is missing (inputs/{digest})"
    if sha256_hex(copy.read_bytes()) != digest:
        return f"the bundle's copy of {what} was altered (inputs/{digest})"
    return None


def _record_problems(
    folder: Path, digests: dict[str, str], read: Callable[[str], bytes], calls: str
) -> list[str]:
    out = []
    for name, digest in sorted(digests.items()):
        if not (folder / name).is_file() or sha256_hex(read(name)) != digest:
            what = "the recorded model calls" if name == calls else f"the bundle's {name}"
            out.append(f"{what} changed since the bundle was written ({name})")
    return out


def _lines(data: bytes, folder: Path, name: str, problems: list[str]) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL record file; a line that is not one is a problem."""
    out = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if not isinstance(item, dict):
            problems.append(f"{name} line {number} is not a JSON object ({folder / name})")
            continue
        out.append(item)
    return out


def session_tampering(folder: Path, manifest: BundleManifest) -> list[str]:
    """What of a session bundle's own files changed since it was written (module docstring)."""
    problems = [p for p in (_seal_problem(manifest),) if p is not None]
    records = {name: committed(folder, manifest, name) for name in (manifest.trace, manifest.contexts)}
    read = lambda name: records[name] if name in records else committed(folder, manifest, name)  # noqa: E731
    problems += _record_problems(folder, manifest.digests, read, manifest.calls)
    for item in (*manifest.dialogues, *manifest.docs):
        problem = _copy_problem(folder, item.sha256, item.name)
        if problem is not None:
            problems.append(problem)
    for repo in manifest.repos:
        if repo.sources:
            for path, digest in sorted(repo.files.items()):
                problem = _copy_problem(folder, digest, f"{path} ({repo.root})")
                if problem is not None:
                    problems.append(problem)
    # the n-th round event of the trace is round n of the contexts file (both numbered on across asks)
    rendered = [
        str(e.get("xml_sha256", ""))
        for e in _lines(records[manifest.trace], folder, manifest.trace, problems)
    ]
    for line in _lines(records[manifest.contexts], folder, manifest.contexts, problems):
        position, xml = line.get("round"), line.get("xml")
        if not isinstance(position, int) or not isinstance(xml, str) or not 0 <= position < len(rendered):
            continue
        if rendered[position] != sha256_hex(xml.encode("utf-8")):
            problems.append(
                f"the recorded context of round {position} is not the one the trace says was rendered "
                f"({manifest.contexts})"
            )
    return problems


def evolve_tampering(
    folder: Path, manifest: EvolveManifest, payload_digest: Callable[[Any], str]
) -> list[str]:
    """What of an evolve bundle's own files changed since it was written (module docstring);
    `payload_digest`: how the trace digests a generator payload."""
    problems = [p for p in (_seal_problem(manifest),) if p is not None]
    whole = lambda name: (folder / name).read_bytes()  # noqa: E731 - an evolve bundle's files are whole
    problems += _record_problems(folder, manifest.digests, whole, manifest.calls)
    for path, digest in sorted(manifest.base.items()):
        problem = _copy_problem(folder, digest, path)
        if problem is not None:
            problems.append(problem)
    trace = folder / manifest.trace
    contexts = folder / manifest.contexts
    events = _lines(trace.read_bytes(), folder, manifest.trace, problems) if trace.is_file() else []
    digests = {int(e["number"]): e.get("payload_sha256") for e in events if isinstance(e.get("number"), int)}
    items = _lines(contexts.read_bytes(), folder, manifest.contexts, problems) if contexts.is_file() else []
    for item in items:
        number = item.get("attempt")
        payload = item.get("payload")
        if not isinstance(number, int) or number not in digests or payload is None:
            continue  # an attempt without a payload (the original), or not in the trace
        if digests[number] != payload_digest(payload):
            problems.append(
                f"the recorded payload of attempt {number} is not the one the trace says was sent "
                f"({manifest.contexts})"
            )
    return problems
