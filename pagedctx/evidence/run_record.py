"""What an evidence folder holds and how its parts are read (E6, E8): its place
(`evidence_dir`) and layout, `RunRecord` (`logs/commands.json`: the commands as the harness ran
them, the isolation, the tree the tests ran on), the test outcomes from the runners' JUnit XML
(`junit_results`, the worse outcome standing), and the sealed `manifest.json` (`write_manifest`).
The collector writes these; the verdict and the validator read them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Literal

from lxml import etree
from pydantic import BaseModel, ConfigDict

from pagedctx.evidence.acceptance import RestoreState
from pagedctx.evidence.channel import ChannelReport
from pagedctx.evidence.runner_output import RunnerCounts
from pagedctx.evidence.seal import EvidenceKey, load_key
from pagedctx.evidence.workcopy import DropReason

__all__ = [
    "ANNOTATIONS",
    "LAYOUT",
    "MANIFEST_FORMAT",
    "RANK",
    "CommandRun",
    "JUnitCounts",
    "RunRecord",
    "TreeRecord",
    "evidence_dir",
    "junit_counts",
    "junit_results",
    "write_manifest",
]


LAYOUT = ("logs", "diff", "reports", "metrics", "screenshots", "evidence")


MANIFEST_FORMAT = "pagedctx.manifest.v2"


ANNOTATIONS = frozenset(
    {"verdict.json", "retention.json"}
)  # written after collection, never read by a verdict


RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


class JUnitCounts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    passed: int = 0
    failed: int = 0
    skipped: int = 0


class CommandRun(BaseModel):
    """One command as the harness ran it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str  # as written down (secrets redacted)
    exit_code: int
    started: datetime
    finished: datetime
    junit: JUnitCounts
    runner: RunnerCounts | None  # the runner's own summary from its output; None when none was found
    channel: ChannelReport = ChannelReport()  # what the harness plugin reported (pytest)


class TreeRecord(BaseModel):
    """How the tree the tests ran on was made from the start and the candidate's tree."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_start: tuple[str, ...] = ()  # files that decide the run: the start's bytes
    dropped: dict[str, DropReason] = {}  # the candidate's version left out, and why
    unrecoverable: tuple[str, ...] = ()  # start bytes needed but never captured


class RunRecord(BaseModel):
    """`logs/commands.json`: what the harness did, for the verdict to check against the contract."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    commands: tuple[CommandRun, ...]
    restored: dict[str, RestoreState] = {}
    shadowing: tuple[str, ...] = ()  # files whose JUnit class name collides with a contract test file
    isolation: Literal["sandbox", "none"] = "sandbox"
    sandbox_unavailable: str | None = None  # why no sandbox could be made (nothing was run)
    runner_kind: Literal["pytest", "other"] = "pytest"
    tree: TreeRecord = TreeRecord()
    runner_access: dict[str, list[str]] = {}  # non-test files whose added lines reach for the runner


def evidence_dir(artifacts_root: Path, task_id: str) -> Path:
    return artifacts_root / "scc_tasks" / task_id


def junit_results(reports: Path) -> dict[str, str]:
    """test id (`classname::name`) -> passed | failed | skipped | error, from every JUnit XML file;
    an id reported twice keeps the worse outcome (a duplicate can never turn a failure into a pass)."""
    results: dict[str, str] = {}
    for path in sorted(reports.rglob("*.xml")):
        try:
            root = etree.parse(str(path), etree.XMLParser(resolve_entities=False, no_network=True)).getroot()
        except etree.XMLSyntaxError:
            continue
        for case in root.iter("testcase"):
            name = case.get("name", "")
            test_id = f"{case.get('classname')}::{name}" if case.get("classname") else name
            kinds = {child.tag for child in case}
            outcome = next((k for k in ("error", "failure", "skipped") if k in kinds), "passed")
            outcome = "failed" if outcome == "failure" else outcome
            if RANK[outcome] >= RANK.get(results.get(test_id, "passed"), 0):
                results[test_id] = outcome
    return results


def junit_counts(results: dict[str, str]) -> JUnitCounts:
    values = list(results.values())
    return JUnitCounts(
        passed=values.count("passed"),
        failed=values.count("failed") + values.count("error"),
        skipped=values.count("skipped"),
    )


def write_manifest(folder: Path, key: EvidenceKey | None = None) -> dict[str, str]:
    """Write `manifest.json`: every file's sha256, sealed with the evidence key (made if absent)."""
    key = key or load_key(create=True)
    files = {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        and path.name != "manifest.json"
        and path.relative_to(folder).as_posix() not in ANNOTATIONS
    }
    body = {"format": MANIFEST_FORMAT, "files": files, "key_id": key.key_id}
    (folder / "manifest.json").write_text(
        json.dumps({**body, "seal": key.seal(body)}, indent=2, sort_keys=True) + "\n"
    )
    return files
