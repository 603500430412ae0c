"""The task's output and its judgement (E1, E4, E5; seed 001 section 8.2.3): `scc.submit.v1`,
`scc.verdict.v1`, the acceptance contract the verdict engine reads, and the fail-code catalog.

Every model here is exported as JSON Schema under docs/schemas/ (`pagedctx evidence schemas`),
and a test keeps those files equal to the models.
"""

from __future__ import annotations

import enum
from pathlib import PurePosixPath
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from pagedctx.errors import FailCode

__all__ = [
    "FAIL_CODES",
    "Acceptance",
    "Artifacts",
    "FailClass",
    "FailCodeInfo",
    "SubmitV1",
    "TaskContract",
    "TestsRun",
    "VerdictChecks",
    "VerdictV1",
]


class FailClass(enum.StrEnum):
    """E1: why a verdict failed, as a class."""

    TIMEOUT = "timeout"
    TEST_FAILURE = "test_failure"
    LINT_ERROR = "lint_error"
    TYPE_ERROR = "type_error"
    SECURITY_VIOLATION = "security_violation"
    SCOPE_VIOLATION = "scope_violation"
    EXTERNAL_DEPENDENCY = "external_dependency"


class FailCodeInfo(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    code: FailCode
    meaning: str
    trigger: str
    action: str


FAIL_CODES: tuple[FailCodeInfo, ...] = tuple(
    FailCodeInfo(code=FailCode(code), meaning=meaning, trigger=trigger, action=action)
    for code, meaning, trigger, action in (
        (
            "SCOPE_CONFLICT",
            "Modified disallowed files",
            "changed_files include paths outside pins.allowed_paths",
            "Restrict edits to allowed scope; re-run with corrected pins",
        ),
        (
            "CI_FAILED",
            "Tests failed",
            "tests.passed=false or non-zero exit",
            "Fix failures; attach logs; retry",
        ),
        (
            "SCHEMA_VIOLATION",
            "Output schema invalid",
            "submit.json missing required fields",
            "Regenerate submit.json to match schema; retry",
        ),
        (
            "PINS_INSUFFICIENT",
            "Context pins insufficient",
            "Required inputs not pinned",
            "Request additional pins or move required info into pinned scope",
        ),
        (
            "POLICY_VIOLATION",
            "Role policy violated",
            "Forbidden tools/actions used",
            "Stop; escalate to policy owner; retry with compliant approach",
        ),
        (
            "BUDGET_EXCEEDED",
            "Budget exceeded",
            "Token/time/compute budget exceeded",
            "Reduce scope; split task; retry",
        ),
        (
            "TIMEOUT_EXCEEDED",
            "Execution timeout",
            "Execution exceeds configured timeout",
            "Split task; optimize steps; retry",
        ),
        (
            "EXECUTOR_ERROR",
            "Executor internal failure",
            "Runtime error, model API error",
            "Retry; include stack trace hash",
        ),
        (
            "PREFLIGHT_FAILED",
            "Preflight validation failed",
            "Role/pins/task metadata validation fails",
            "Fix config and rerun preflight",
        ),
        (
            "FILE_NOT_FOUND",
            "Required file missing",
            "A pinned file referenced does not exist",
            "Add/restore the file or correct the path",
        ),
        (
            "PERMISSION_DENIED",
            "Permission blocked",
            "OS/filesystem permissions prevent read/write",
            "Adjust permissions; change location; retry",
        ),
        (
            "MERGE_CONFLICT",
            "Patch cannot apply cleanly",
            "Patch application fails due to divergent base",
            "Rebase/update; regenerate patch; retry",
        ),
        (
            "EVIDENCE_MISSING",
            "Evidence incomplete",
            "Required artifacts absent",
            "Recreate missing evidence; ensure paths are correct",
        ),
        (
            "NEEDS_CLARIFICATION",
            "Task ambiguity",
            "Goal unclear or contradictory requirements",
            "Ask targeted questions; proceed after clarification",
        ),
        (
            "SANDBOX_UNAVAILABLE",
            "No sandbox for the tests",
            "bubblewrap missing or namespaces refused; the tests were not run",
            "Install bubblewrap (Debian: bubblewrap); or opt out explicitly with isolation: none",
        ),
    )
)


class TestsRun(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    commands: tuple[str, ...]
    passed: bool
    summary: str


class Artifacts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    report_md: str
    selftest_log: str
    evidence_dir: str
    patch_diff: str
    submit_json: str


class SubmitV1(BaseModel):
    """E4 `submit.json` (scc.submit.v1), with the rules the schema can state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal["scc.submit.v1"] = "scc.submit.v1"
    task_id: str
    status: Literal["DONE", "NEED_INPUT", "FAILED"]
    reason_code: FailCode | None = None
    changed_files: tuple[str, ...]
    new_files: tuple[str, ...]
    tests: TestsRun
    artifacts: Artifacts
    exit_code: int
    needs_input: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _rules(self) -> SubmitV1:
        if self.status == "DONE" and self.exit_code != 0:
            raise ValueError(f"status DONE needs exit_code 0, got {self.exit_code}")
        if not self.tests.passed and self.status == "DONE":
            raise ValueError("tests failed, so the status cannot be DONE (FAILED with CI_FAILED)")
        if self.status == "NEED_INPUT" and not self.needs_input:
            raise ValueError("status NEED_INPUT needs the questions in needs_input")
        return self


class Acceptance(BaseModel):
    """What must hold for PASS, as SWE-bench judges: tests that must now pass, tests that must keep
    passing. Each by its full node id, `path/to/test_file.py::[Class::]name` (pytest's form): the
    file part is what the harness restores from the task's base before the run, and results match
    the id exactly, never by a short name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()

    @field_validator("fail_to_pass", "pass_to_pass")
    @classmethod
    def _node_ids(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        for test_id in ids:
            file, sep, rest = test_id.partition("::")
            parts = PurePosixPath(file).parts
            if (
                not sep
                or not rest
                or "." not in PurePosixPath(file).name
                or file.startswith("/")
                or any(p in ("..", ".") for p in parts)
                or "\\" in file
            ):
                raise ValueError(
                    f"{test_id!r} is not a full node id: write `path/to/test_file.py::[Class::]test_name` "
                    "(a relative file path inside the repository, then the test)"
                )
        return ids

    @model_validator(mode="after")
    def _some(self) -> Acceptance:
        if not self.fail_to_pass and not self.pass_to_pass:
            raise ValueError("acceptance names no test: a verdict needs at least one (fail-closed)")
        return self


class TaskContract(BaseModel):
    """The contract a verdict is judged against: the task (E3), its acceptance tests, and the exact
    commands the harness runs (`evidence collect --contract` runs these and nothing else).

    `results_check`: `runner_summary` (the default) cross-checks each command's JUnit counts against
    the runner's own summary in its output (pytest, Jest, Vitest, cargo, gotestsum) and fails when
    there is none; `junit_only` trusts the JUnit files alone, for runners whose output has no summary
    the harness knows (weaker: code under test can write JUnit files).

    `runner`: `pytest` (the default): the results come from the harness plugin over the harness's
    channel, and JUnit files and the runner's summary are cross-checks only; `other` (Jest, cargo,
    go test, ...): from the JUnit files, under `results_check`. `pytest_plugins`: the plugin
    modules allowed besides the harness's (autoload is off: `pytest_asyncio.plugin`, `xdist.plugin`,
    ...). `isolation`: `sandbox` (the default; no sandbox here fails closed with
    SANDBOX_UNAVAILABLE) or `none`, an explicit opt-out that every verdict then shows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    acceptance: Acceptance
    test_commands: tuple[str, ...] = Field(min_length=1)
    timeout_seconds: int = Field(default=900, gt=0)
    results_check: Literal["runner_summary", "junit_only"] = "runner_summary"
    runner: Literal["pytest", "other"] = "pytest"
    pytest_plugins: tuple[
        Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")], ...
    ] = ()
    isolation: Literal["sandbox", "none"] = "sandbox"


class VerdictChecks(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_valid: bool
    scope_valid: bool
    tests_passed: bool
    evidence_present: bool


class VerdictV1(BaseModel):
    """E5 `scc.verdict.v1`, with E1's status, fail classes, evidence paths and verifier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal["scc.verdict.v1"] = "scc.verdict.v1"
    task_id: str
    verdict: Literal["PASS", "FAIL"]
    reason_code: FailCode | None = None
    messages: tuple[str, ...] = ()
    checks: VerdictChecks
    fail_class: tuple[FailClass, ...] = ()
    evidence_paths: tuple[str, ...] = ()
    timestamps: dict[Literal["submitted_at", "evaluated_at"], AwareDatetime]
    links: dict[str, str] = Field(default_factory=dict)
    verifier: str = "pagedctx-verdict-engine"
    isolation: Literal["sandbox", "none"] = "sandbox"  # `none`: the tests ran outside any sandbox
    notes: tuple[str, ...] = ()  # what a reader must know even of a PASS (an opted-out sandbox)

    @model_validator(mode="after")
    def _fail_explained(self) -> VerdictV1:
        if self.verdict == "FAIL" and (
            self.reason_code is None or (not self.fail_class and not self.messages)
        ):
            raise ValueError("a FAIL verdict carries a reason_code and says why")
        if self.verdict == "PASS" and (
            self.reason_code is not None or not all(self.checks.model_dump().values())
        ):
            raise ValueError("a PASS verdict has every check true and no reason_code")
        return self
