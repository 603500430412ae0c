"""The verdict engine (E1, E4, E5, E8): PASS only when every check and every acceptance test holds.

Decided from the evidence folder and the contract alone, never from a claim: the E8 checks
(`validator`), then the acceptance tests as SWE-bench judges them: each FAIL_TO_PASS and
PASS_TO_PASS test, by its full node id, must be reported `passed` by the harness's JUnit results
(failed, errored, skipped or absent: the verdict fails); a run that executed no test fails; a
non-zero EXIT_CODE fails. The harness's own record (`logs/commands.json`) must show the run was the
contract's: exactly its `test_commands`, its test files put back from the task's base, no file
shadowing them, and (unless the contract says `junit_only`) each command's JUnit counts agreeing
with its runner's own summary; otherwise the evidence is not of the contract's run
(EVIDENCE_MISSING). The reason code is the most specific failure: scope, then missing or tampered evidence,
then schema, then timeout, then tests; the fail classes come from the checks and the classifier.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from pagedctx.errors import FailCode
from pagedctx.evidence.acceptance import guarded_paths, outcome_of
from pagedctx.evidence.classifier import classify
from pagedctx.evidence.run_record import RunRecord
from pagedctx.evidence.schemas import FailClass, TaskContract, VerdictChecks, VerdictV1
from pagedctx.evidence.secrets import redact
from pagedctx.evidence.task import TaskInput
from pagedctx.evidence.validator import Check, validate_evidence
from pagedctx.evidence.workcopy import DANGEROUS

__all__ = ["judge"]

_ORDER = (
    FailCode.SANDBOX_UNAVAILABLE,
    FailCode.SCOPE_CONFLICT,
    FailCode.EVIDENCE_MISSING,
    FailCode.SCHEMA_VIOLATION,
    FailCode.TIMEOUT_EXCEEDED,
    FailCode.POLICY_VIOLATION,
    FailCode.EXECUTOR_ERROR,
    FailCode.CI_FAILED,
)


def _record(folder: Path) -> RunRecord | None:
    try:
        return RunRecord.model_validate_json((folder / "logs" / "commands.json").read_text(encoding="utf-8"))
    except (OSError, ValidationError):
        return None


def _harness_problems(contract: TaskContract, record: RunRecord) -> list[str]:
    """Why the run is not the contract's run, as the harness recorded it (empty when it is)."""
    problems = []
    ran = [c.command for c in record.commands]
    expected = [redact(c)[0] for c in contract.test_commands]
    if ran != expected:
        problems.append(
            f"the commands run were not the contract's test_commands: ran {ran}, contract {expected}"
        )
    ids = contract.acceptance.fail_to_pass + contract.acceptance.pass_to_pass
    for path in guarded_paths(ids):
        state = record.restored.get(path)
        if state not in ("restored", "unchanged", "absent", "removed"):
            problems.append(
                f"{path} was not put back from the task's base before the run ({state or 'not recorded'}): "
                "collect with the contract (`pagedctx evidence collect --contract`)"
            )
    if record.shadowing:
        problems.append(f"{list(record.shadowing)} would report under a contract test file's name")
    if record.isolation != contract.isolation:
        problems.append(
            f"the tests ran with isolation {record.isolation!r}, the contract asks for {contract.isolation!r}"
        )
    if record.runner_kind != contract.runner:
        problems.append(
            f"the run was read as runner {record.runner_kind!r}, the contract names {contract.runner!r}"
        )
    if record.tree.unrecoverable:
        problems.append(
            f"{list(record.tree.unrecoverable)} changed and their bytes at the task's start were not "
            "captured (binary, or over 1 MiB at `evidence start`): the tests' tree cannot be rebuilt"
        )
    return problems + (
        _channel_problems(record) if contract.runner == "pytest" else _summary_problems(contract, record)
    )


def _summary_problems(contract: TaskContract, record: RunRecord) -> list[str]:
    """`runner: other`: each command's JUnit counts against its runner's printed summary."""
    problems: list[str] = []
    if contract.results_check == "runner_summary":
        for run in record.commands:
            if run.runner is None:
                problems.append(
                    f"`{run.command}`: no test-runner summary in its output, so its JUnit results cannot be "
                    "cross-checked (results_check: junit_only trusts them alone)"
                )
            elif (run.runner.passed, run.runner.failed) != (run.junit.passed, run.junit.failed):
                problems.append(
                    f"`{run.command}`: the JUnit results "
                    f"({run.junit.passed} passed, {run.junit.failed} failed) "
                    f"disagree with the runner's own output ({run.runner.passed} passed, "
                    f"{run.runner.failed} failed): results written by the code under test are not trusted"
                )
    return problems


def _channel_problems(record: RunRecord) -> list[str]:
    """Why the harness plugin's report cannot be trusted (pytest): a record that does not check, a
    session that never reached its end, no session at all, or a cross-check that disagrees."""
    problems: list[str] = []
    if record.sandbox_unavailable is None and not any(run.channel.started for run in record.commands):
        problems.append(
            "no pytest session reported to the harness: the contract's tests did not run under pytest "
            "with the harness plugin (a command that is not pytest needs `runner: other`)"
        )
    for run in record.commands:
        channel = run.channel
        problems += [f"`{run.command}`: {p}" for p in channel.problems]
        if channel.started and not channel.ended:
            problems.append(
                f"`{run.command}`: the pytest session never reached its end (stopped early: os._exit, "
                "a crash, a kill): nothing it reported is trusted"
            )
        passed = channel.counts()[0]
        if run.runner is not None and run.runner.passed != passed:
            problems.append(
                f"`{run.command}`: the runner's printed summary ({run.runner.passed} passed) disagrees "
                f"with the harness plugin ({passed} passed)"
            )
        if (run.junit.passed or run.junit.failed) and run.junit.passed != passed:
            problems.append(
                f"`{run.command}`: the JUnit files ({run.junit.passed} passed) disagree with the harness "
                f"plugin ({passed} passed): results written by the code under test are not trusted"
            )
    return problems


def _policy_problems(record: RunRecord) -> list[str]:
    """Changes that reach for the runner or slip code past the diff (POLICY_VIOLATION)."""
    problems = [
        f"{path} (not a test) reaches for {', '.join(labels)}: code under test must not inspect or "
        "steer the test runner or the harness (docs/evidence.md)"
        for path, labels in sorted(record.runner_access.items())
    ]
    dangerous = sorted(path for path, why in record.tree.dropped.items() if why in DANGEROUS)
    if dangerous:
        problems.append(
            f"{dangerous} were left out of the tests' tree: compiled code the diff cannot show, or a new "
            "module that would shadow the standard library or an installed package"
        )
    return problems


def _tests(contract: TaskContract, folder: Path, evidence_ok: bool) -> tuple[bool, list[str], list[str]]:
    """(tests passed, test problems, harness problems: the evidence is not of the contract's run)."""
    if not evidence_ok:
        return False, ["test results not trusted: the evidence failed its checks"], []
    record = _record(folder)
    if record is None:
        return False, [], ["logs/commands.json is missing or invalid: the harness's record of the run"]
    harness = _harness_problems(contract, record)
    try:
        results: dict[str, str] = json.loads((folder / "reports" / "results.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False, ["reports/results.json is missing: no test result to judge"], harness
    if not results:
        return False, ["no test was executed (a run without tests fails)"], harness
    problems = [
        f"`{run.command}`: the runner reported {run.runner.failed} failed"
        for run in record.commands
        if run.runner is not None and run.runner.failed
    ]
    problems += [
        f"`{run.command}`: pytest ended with exit status {run.channel.exitstatus}"
        for run in record.commands
        if run.channel.ended and run.channel.exitstatus != 0
    ]
    for kind, ids in (
        ("FAIL_TO_PASS", contract.acceptance.fail_to_pass),
        ("PASS_TO_PASS", contract.acceptance.pass_to_pass),
    ):
        for test_id in ids:
            outcome = outcome_of(results, test_id)
            if outcome != "passed":
                problems.append(f"{kind} {test_id}: {outcome or 'not run'}")
    return not problems and not harness, problems, harness


def _secrets_in_diff(folder: Path) -> bool:
    try:
        counts = json.loads((folder / "metrics" / "redactions.json").read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return bool(counts.get("patch.diff"))


def judge(contract: TaskContract, folder: Path, task: TaskInput | None = None) -> VerdictV1:
    """The verdict for an evidence folder under a contract (see the module docstring)."""
    checks: list[Check] = validate_evidence(folder, task)
    failed = [c for c in checks if not c.ok]
    codes = {c.code for c in failed if c.code is not None}
    evidence_ok = not ({FailCode.EVIDENCE_MISSING, FailCode.SCHEMA_VIOLATION} & codes) and bool(checks)
    log = (
        (folder / "selftest.log").read_text(encoding="utf-8", errors="replace")
        if (folder / "selftest.log").is_file()
        else ""
    )
    exit_line = log.rstrip("\n").rsplit("\n", 1)[-1] if log else ""
    tests_ok, problems, harness = _tests(contract, folder, evidence_ok)
    if harness:
        codes.add(FailCode.EVIDENCE_MISSING)
    record = _record(folder) if evidence_ok else None
    notes: list[str] = []
    if record is not None and record.sandbox_unavailable is not None:
        codes.add(FailCode.SANDBOX_UNAVAILABLE)
        problems.append(
            f"the tests were not run: no sandbox can be made here ({record.sandbox_unavailable}); install "
            "bubblewrap, or opt out explicitly with `isolation: none` in the contract"
        )
    if record is not None and record.isolation == "none":
        notes.append(
            "UNSANDBOXED: the contract opted out of the sandbox (isolation: none); the code under test "
            "could reach the harness"
        )
    policy = _policy_problems(record) if record is not None else []
    if policy:
        codes.add(FailCode.POLICY_VIOLATION)
        problems += policy
    if exit_line != "EXIT_CODE=0":
        tests_ok = False
        problems.append(f"the commands ended with {exit_line or 'no EXIT_CODE line'}")
    diff = (
        (folder / "patch.diff").read_text(encoding="utf-8", errors="replace")
        if (folder / "patch.diff").is_file()
        else ""
    )
    classified = classify(log, diff)
    classes = list(classified.fail_class)
    if not tests_ok:
        codes.add(classified.reason_code or FailCode.CI_FAILED)
        if FailClass.TEST_FAILURE not in classes and any(
            "FAIL_TO_PASS" in p or "PASS_TO_PASS" in p for p in problems
        ):
            classes.append(FailClass.TEST_FAILURE)
    if FailCode.SCOPE_CONFLICT in codes:
        classes.insert(0, FailClass.SCOPE_VIOLATION)
    if policy:
        classes.insert(0, FailClass.SECURITY_VIOLATION)
    if classified.reason_code is FailCode.POLICY_VIOLATION or _secrets_in_diff(folder):
        codes.add(FailCode.POLICY_VIOLATION)
        classes.insert(0, FailClass.SECURITY_VIOLATION)
        problems.append("the diff carried secrets (redacted in the evidence): never commit keys or tokens")
    reason = next((code for code in _ORDER if code in codes), None)
    submitted = (
        datetime.fromtimestamp((folder / "submit.json").stat().st_mtime, UTC)
        if (folder / "submit.json").is_file()
        else datetime.now(UTC)
    )
    messages = [f"{c.name}: {c.message}" for c in failed] + harness + problems
    passed = reason is None and not messages
    names = {c.name: c.ok for c in checks}
    return VerdictV1(
        task_id=contract.task_id,
        verdict="PASS" if passed else "FAIL",
        reason_code=None if passed else (reason or FailCode.EVIDENCE_MISSING),
        messages=tuple(messages),
        checks=VerdictChecks(
            schema_valid=names.get("submit_schema", False) and names.get("patch_diff", False),
            scope_valid=names.get("scope", task is None and bool(checks)),
            tests_passed=tests_ok,
            evidence_present=names.get("artifacts", False)
            and names.get("manifest", False)
            and names.get("selftest_log", False)
            and names.get("report_md", False),
        ),
        fail_class=() if passed else tuple(dict.fromkeys(classes)),
        evidence_paths=tuple(sorted(p.relative_to(folder).as_posix() for p in folder.iterdir())),
        timestamps={"submitted_at": submitted, "evaluated_at": datetime.now(UTC)},
        links={
            name: name
            for name in ("submit.json", "report.md", "selftest.log", "patch.diff", "evidence")
            if (folder / name).exists()
        },
        isolation=record.isolation if record is not None else contract.isolation,
        notes=tuple(notes),
    )
