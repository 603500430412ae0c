"""Evidence and verdicts (E1-E9) from real runs of a small fixture project, fail-closed."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from evidence_project import CALC, PYTEST, contract_for, project, task_for
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import FailCode
from pagedctx.evidence.collector import collect
from pagedctx.evidence.query import query_evidence
from pagedctx.evidence.retention import RetentionPolicy, apply_retention, set_retention
from pagedctx.evidence.schema_documents import schema_documents
from pagedctx.evidence.schemas import FailClass, SubmitV1
from pagedctx.evidence.secrets import redact
from pagedctx.evidence.task import TaskInput
from pagedctx.evidence.tree import snapshot
from pagedctx.evidence.validator import validate_evidence
from pagedctx.evidence.verdict import judge


def run(
    tmp_path: Path,
    fix: str | None = CALC.replace("a - b", "a + b", 1),
    *,
    git: bool = True,
    commands: tuple[str, ...] = (PYTEST,),
    extra: dict[str, str] | None = None,
    timeout: float = 120,
) -> tuple[TaskInput, Path]:
    root = project(tmp_path, git=git)
    task = task_for(root)
    pre = snapshot(root)
    if fix is not None:
        (root / "calc.py").write_text(fix)
    for name, text in (extra or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    contract = contract_for(task).model_copy(update={"test_commands": commands})
    folder = collect(
        task,
        root,
        pre=pre,
        contract=contract,
        artifacts_root=tmp_path / "artifacts",
        decisions=["swap the operator"],
        timeout=timeout,
    )
    return task, folder


@pytest.mark.parametrize("git", [True, False])
def test_a_real_fix_passes_with_complete_evidence(tmp_path: Path, git: bool) -> None:
    """E6/E8/E5: the harness's record of a real run; every check true; PASS."""
    task, folder = run(tmp_path, git=git, extra={"new/helper.py": "X = 1\n"})
    assert folder == tmp_path / "artifacts" / "scc_tasks" / task.task_id
    for name in (
        "logs",
        "diff",
        "reports",
        "metrics",
        "screenshots",
        "evidence/pre_state.json",
        "manifest.json",
    ):
        assert (folder / name).exists(), name
    log = (folder / "selftest.log").read_text().splitlines()
    assert (
        log[-1] == "EXIT_CODE=0" and f"$ {PYTEST}" in log and any(line.startswith("# cwd ") for line in log)
    )
    submit = SubmitV1.model_validate_json((folder / "submit.json").read_text())
    assert (
        submit.status == "DONE"
        and submit.changed_files == ("calc.py",)
        and submit.new_files == ("new/helper.py",)
    )
    assert all(check.ok for check in validate_evidence(folder, task))
    verdict = judge(contract_for(task), folder, task)
    assert verdict.verdict == "PASS", verdict.messages
    assert verdict.reason_code is None and all(verdict.checks.model_dump().values())


def test_a_failing_required_test_fails_as_ci_failed(tmp_path: Path) -> None:
    """E1: FAIL_TO_PASS still failing -> FAIL, CI_FAILED, test_failure."""
    task, folder = run(tmp_path, fix=None)
    submit = json.loads((folder / "submit.json").read_text())
    assert submit["status"] == "FAILED" and submit["reason_code"] == "CI_FAILED"
    verdict = judge(contract_for(task), folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.CI_FAILED
    assert FailClass.TEST_FAILURE in verdict.fail_class and not verdict.checks.tests_passed
    assert any("FAIL_TO_PASS test_calc.py::test_add: failed" in m for m in verdict.messages)


def test_skipped_or_missing_required_tests_fail(tmp_path: Path) -> None:
    """E1 (as SWE-bench): a required test skipped or never run is not a pass."""
    task, folder = run(tmp_path)
    skipped = judge(contract_for(task, pass_to_pass=("test_calc.py::test_later",)), folder, task)
    assert skipped.verdict == "FAIL" and any("test_later: skipped" in m for m in skipped.messages)
    missing = judge(contract_for(task, fail_to_pass=("test_calc.py::test_mul",)), folder, task)
    assert missing.verdict == "FAIL" and any("test_mul: not run" in m for m in missing.messages)


def test_a_run_that_executed_no_test_fails(tmp_path: Path) -> None:
    task, folder = run(tmp_path, commands=("true",))
    verdict = judge(contract_for(task), folder, task)
    assert verdict.verdict == "FAIL" and any("no test was executed" in m for m in verdict.messages)


def test_a_tampered_selftest_log_fails_the_verdict(tmp_path: Path) -> None:
    """E8: the log no longer matches the manifest: EVIDENCE_MISSING, whatever it claims."""
    task, folder = run(tmp_path, fix=None)
    log = folder / "selftest.log"
    log.write_text(log.read_text().replace("EXIT_CODE=1", "EXIT_CODE=0"))
    verdict = judge(contract_for(task), folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.EVIDENCE_MISSING
    assert any("selftest.log does not match its sha256" in m for m in verdict.messages)
    assert not verdict.checks.evidence_present


def test_a_diff_outside_the_pins_fails_as_scope_conflict(tmp_path: Path) -> None:
    task, folder = run(tmp_path, extra={"docs/notes.md": "rewritten\n"})
    verdict = judge(contract_for(task), folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.SCOPE_CONFLICT
    assert verdict.fail_class[0] is FailClass.SCOPE_VIOLATION and not verdict.checks.scope_valid


def test_missing_artifacts_and_a_lying_submit_fail(tmp_path: Path) -> None:
    task, folder = run(tmp_path)
    submit = json.loads((folder / "submit.json").read_text())
    submit["changed_files"] = []
    (folder / "submit.json").write_text(json.dumps(submit))
    from pagedctx.evidence.run_record import write_manifest

    write_manifest(folder)  # even re-signed, the claim must match the real diff
    verdict = judge(contract_for(task), folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.SCHEMA_VIOLATION
    (folder / "report.md").unlink()
    gone = judge(contract_for(task), folder, task)
    assert gone.reason_code is FailCode.EVIDENCE_MISSING and "report.md" in gone.messages[0]


def test_a_timeout_is_its_own_failure(tmp_path: Path) -> None:
    task, folder = run(tmp_path, commands=("sleep 5",), timeout=0.5)
    assert (folder / "selftest.log").read_text().rstrip().endswith("EXIT_CODE=124")
    verdict = judge(contract_for(task), folder, task)
    assert verdict.verdict == "FAIL" and FailClass.TIMEOUT in verdict.fail_class


def test_secrets_are_redacted_and_a_committed_secret_is_a_policy_violation(tmp_path: Path) -> None:
    """E7: nothing secret reaches disk; a key committed in the diff fails the verdict (security)."""
    fixed = CALC.replace("a - b", "a + b", 1) + "\nAPI_KEY = 'sk-proj-abcdefghijklmnopqrstuvwx'\n"
    command = f"echo token=supersecret123 && {PYTEST}"
    task, folder = run(tmp_path, fix=fixed, commands=(command,))
    everything = "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())
    assert "supersecret123" not in everything and "abcdefghijklmnopqrstuvwx" not in everything
    assert "[REDACTED:openai_key]" in (folder / "patch.diff").read_text()
    contract = contract_for(task).model_copy(update={"test_commands": (command,)})
    verdict = judge(contract, folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.POLICY_VIOLATION
    assert verdict.fail_class[0] is FailClass.SECURITY_VIOLATION
    assert redact("password: 'hunter22xyz'")[0] == "password: '[REDACTED:assignment]'"


def test_query_and_retention_over_an_artifacts_root(tmp_path: Path) -> None:
    """E7/E9: query by task, type, status and date; routine evidence goes after 30 days, pinned stays."""
    task, folder = run(tmp_path / "a")
    other, failed = run(tmp_path / "b", fix=None)
    root = tmp_path / "a" / "artifacts"
    shutil.move(str(failed), str(root / "scc_tasks" / other.task_id))
    failed = root / "scc_tasks" / other.task_id
    assert [e.task_id for e in query_evidence(root, status="FAILED")] == [other.task_id]
    assert [e.task_id for e in query_evidence(root, task_id=task.task_id, kind="patch")] == [task.task_id]
    assert query_evidence(root, kind="verdict") == []
    old = datetime.now(UTC) - timedelta(days=45)
    os.utime(folder, (old.timestamp(), old.timestamp()))
    os.utime(failed, (old.timestamp(), old.timestamp()))
    assert [e.task_id for e in query_evidence(root, until=datetime.now(UTC) - timedelta(days=40))] == sorted(
        [task.task_id, other.task_id]
    )
    set_retention(failed, RetentionPolicy.model_validate({"class": "high_impact", "days": 90}))
    os.utime(failed, (old.timestamp(), old.timestamp()))
    report = apply_retention(root, dry_run=True)
    assert report.removed == (task.task_id,) and folder.exists()
    assert apply_retention(root).removed == (task.task_id,) and not folder.exists() and failed.exists()
    with pytest.raises(ValueError, match="90 to 180"):
        RetentionPolicy.model_validate({"class": "high_impact", "days": 400})


def test_the_exported_json_schemas_match_the_models() -> None:
    """E4/E5: docs/schemas/ is what the models export (regenerate: pagedctx evidence schemas)."""
    folder = Path(__file__).parent.parent / "docs" / "schemas"
    for name, text in schema_documents().items():
        assert (folder / name).read_text() == text, f"{name} is stale: run `pagedctx evidence schemas`"
    submit = json.loads((folder / "scc.submit.v1.schema.json").read_text())
    assert submit["properties"]["schema_version"]["const"] == "scc.submit.v1"
    codes = [c["code"] for c in json.loads((folder / "fail_codes.json").read_text())]
    assert codes == [c.value for c in FailCode]


def collect_args(task_file: Path, root: Path, art: Path, command: str) -> list[str]:
    return [
        "evidence",
        "collect",
        "--task",
        str(task_file),
        "--repo",
        str(root),
        "--artifacts",
        str(art),
        "--command",
        command,
    ]


def test_cli_from_start_to_verdict(tmp_path: Path) -> None:
    """Seed 001 8.3: start -> apply -> collect -> validate -> verdict -> query -> classify -> retain."""
    root = project(tmp_path)
    task = task_for(root)
    task_file, contract_file = tmp_path / "task.json", tmp_path / "contract.json"
    task_file.write_text(task.model_dump_json())
    contract_file.write_text(contract_for(task).model_dump_json())
    art = tmp_path / "art"
    runner = CliRunner()
    assert (
        runner.invoke(
            app, ["evidence", "start", "--task", str(task_file), "--repo", str(root), "--artifacts", str(art)]
        ).exit_code
        == 0
    )
    mods = tmp_path / "mods.json"
    fix = {
        "file_path": "calc.py",
        "target_chunk_id": "calc.py::add",
        "action_type": "MODIFY",
        "new_content": "def add(a, b):\n    return a + b\n",
    }
    mods.write_text(json.dumps([fix]))
    applied = runner.invoke(
        app, ["apply", str(mods), "--repo", str(root), "--pins", str(task_file), "--no-format"]
    )
    assert applied.exit_code == 0, applied.stderr
    collected = runner.invoke(
        app,
        [
            *collect_args(task_file, root, art, PYTEST),
            "--contract",
            str(contract_file),
            "--decision",
            "fix add",
        ],
    )
    assert collected.exit_code == 0, collected.stderr
    folder = Path(collected.stdout.strip())
    assert not list((art / "scc_tasks" / ".starts").iterdir())  # the sealed start is gone once used
    assert (
        runner.invoke(
            app, ["evidence", "validate", "--evidence-dir", str(folder), "--task", str(task_file)]
        ).exit_code
        == 0
    )
    judged = runner.invoke(
        app,
        [
            "verdict",
            "--contract",
            str(contract_file),
            "--evidence-dir",
            str(folder),
            "--task",
            str(task_file),
            "--output",
            str(folder / "verdict.json"),
        ],
    )
    assert judged.exit_code == 0 and json.loads(judged.stdout)["verdict"] == "PASS"
    found = runner.invoke(app, ["evidence", "query", "--artifacts", str(art), "--status", "PASS"])
    assert [e["task_id"] for e in json.loads(found.stdout)] == [task.task_id]
    classified = runner.invoke(app, ["evidence", "classify", "--logs", str(folder / "selftest.log")])
    assert json.loads(classified.stdout)["fail_class"] == []
    kept = runner.invoke(app, ["evidence", "retain", "--artifacts", str(art), "--pin", task.task_id])
    assert json.loads(kept.stdout)["kept"] == [task.task_id]
    (folder / "selftest.log").write_text("EXIT_CODE=0\n")
    tampered = runner.invoke(
        app, ["verdict", "--contract", str(contract_file), "--evidence-dir", str(folder)]
    )
    assert tampered.exit_code == 1 and json.loads(tampered.stdout)["reason_code"] == "EVIDENCE_MISSING"
    no_start = runner.invoke(app, collect_args(task_file, root, tmp_path / "none", "true"))
    assert no_start.exit_code == 2 and "evidence start" in no_start.stderr


def test_a_missing_dependency_is_an_executor_error(tmp_path: Path) -> None:
    """E2: a test run that cannot import what it needs fails as EXECUTOR_ERROR, external_dependency."""
    broken = CALC.replace("def add", "import not_installed_anywhere\n\n\ndef add", 1)
    task, folder = run(tmp_path, fix=broken)
    verdict = judge(contract_for(task), folder, task)
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.EXECUTOR_ERROR
    assert FailClass.EXTERNAL_DEPENDENCY in verdict.fail_class
