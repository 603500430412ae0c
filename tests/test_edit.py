"""Chunk-anchored edits (S6, S7, E3): by id on the current file, all or nothing, inside the pins."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import FailCode, ScopeConflict
from pagedctx.evidence.task import Pins
from pagedctx.host.code.chunker import chunk_file
from pagedctx.host.edit.batch_write import EditRefused
from pagedctx.host.edit.editor import apply_modifications
from pagedctx.host.edit.modification import ActionType, CodeModification

NO_FORMAT: dict[str, tuple[tuple[str, ...], ...]] = {}
EVERYTHING = Pins(allowed_paths=("**",))

# language: (file, source, target chunk, new definition of it, an extra definition, broken code)
LANGUAGES = {
    "python": (
        "pkg/calc.py",
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
        "add",
        "def add(a, b):\n    return b + a\n",
        "def mul(a, b):\n    return a * b\n",
        "def add(a, b:\n    return (\n",
    ),
    "go": (
        "calc/calc.go",
        "package calc\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n\n"
        "func Sub(a, b int) int {\n\treturn a - b\n}\n",
        "Add",
        "func Add(a, b int) int {\n\treturn b + a\n}",
        "func Mul(a, b int) int {\n\treturn a * b\n}",
        "func Add(a, b int) int {\n\treturn (a +\n",
    ),
    "typescript": (
        "src/calc.ts",
        "export function add(a: number, b: number): number {\n  return a + b;\n}\n\n"
        "export function sub(a: number, b: number): number {\n  return a - b;\n}\n",
        "add",
        "export function add(a: number, b: number): number {\n  return b + a;\n}",
        "export function mul(a: number, b: number): number {\n  return a * b;\n}",
        "export function add(a: number, b: number): number {\n  return (a +\n",
    ),
    "javascript": (
        "src/calc.js",
        "function add(a, b) {\n  return a + b;\n}\n\nfunction sub(a, b) {\n  return a - b;\n}\n",
        "add",
        "function add(a, b) {\n  return b + a;\n}",
        "function mul(a, b) {\n  return a * b;\n}",
        "function add(a, b) {\n  return (a +\n",
    ),
    "rust": (
        "src/calc.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n"
        "pub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
        "add",
        "pub fn add(a: i32, b: i32) -> i32 {\n    b + a\n}",
        "pub fn mul(a: i32, b: i32) -> i32 {\n    a * b\n}",
        "pub fn add(a: i32, b: i32) -> i32 {\n    (a +\n",
    ),
    "java": (
        "src/Calc.java",
        "class Calc {\n    int add(int a, int b) {\n        return a + b;\n    }\n\n"
        "    int sub(int a, int b) {\n        return a - b;\n    }\n}\n",
        "Calc.add",
        "int add(int a, int b) {\n        return b + a;\n    }",
        "int mul(int a, int b) {\n    return a * b;\n}",
        "int add(int a, int b) {\n        return (a +\n",
    ),
    "c": (
        "src/calc.c",
        "int add(int a, int b) {\n    return a + b;\n}\n\nint sub(int a, int b) {\n    return a - b;\n}\n",
        "add",
        "int add(int a, int b) {\n    return b + a;\n}",
        "int mul(int a, int b) {\n    return a * b;\n}",
        "int add(int a, int b) {\n    return (a +\n",
    ),
    "cpp": (
        "src/calc.cpp",
        "int add(int a, int b) {\n    return a + b;\n}\n\nint sub(int a, int b) {\n    return a - b;\n}\n",
        "add",
        "int add(int a, int b) {\n    return b + a;\n}",
        "int mul(int a, int b) {\n    return a * b;\n}",
        "int add(int a, int b) {\n    return (a +\n",
    ),
}


def repo_with(tmp_path: Path, language: str) -> tuple[Path, str, str]:
    path, source, *_ = LANGUAGES[language]
    root = tmp_path / "repo"
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(source)
    return root, path, source


def chunk_ids(root: Path, path: str) -> list[str]:
    return [c.id for c in chunk_file(path, (root / path).read_bytes()).chunks]


def mod(path: str, action: ActionType, target: str | None = None, content: str = "") -> CodeModification:
    return CodeModification(
        file_path=path,
        target_chunk_id=f"{path}::{target}" if target else None,
        action_type=action,
        new_content=content,
    )


@pytest.mark.parametrize("language", list(LANGUAGES))
def test_each_action_type_lands_where_its_chunk_is(language: str, tmp_path: Path) -> None:
    """S7: MODIFY, INSERT_AFTER, APPEND, DELETE, CREATE_FILE by chunk id; the result parses cleanly."""
    root, path, source = repo_with(tmp_path, language)
    _, _, target, new, extra, _ = LANGUAGES[language]
    sibling = target.rsplit(".", 1)[0] + ".sub" if "." in target else "sub"
    sibling = sibling if language != "go" else "Sub"
    mods = [
        mod(path, ActionType.MODIFY, target, new),
        mod(path, ActionType.INSERT_AFTER, target, extra),
        mod(path, ActionType.DELETE, sibling),
    ]
    report = apply_modifications(root, mods, EVERYTHING, formatters=NO_FORMAT)
    text = (root / path).read_text()
    assert report.applied and [f.path for f in report.files] == [path]
    assert "b + a" in text and ("a * b" in text) and "a - b" not in text
    assert text.index("b + a") < text.index("a * b")
    assert chunk_file(path, text.encode()).errors == ()
    appended = apply_modifications(
        root,
        [
            mod(
                path,
                ActionType.APPEND,
                content=extra.replace("mul", "div").replace("Mul", "Div").replace("*", "/"),
            )
        ],
        EVERYTHING,
        formatters=NO_FORMAT,
    )
    after = (root / path).read_text()
    assert appended.applied and "a / b" in after and chunk_file(path, after.encode()).errors == ()
    assert after.index("a * b") < after.index("a / b")
    new_file = path.rsplit("/", 1)[0] + "/extra" + path[path.rfind(".") :]
    created = apply_modifications(
        root, [mod(new_file, ActionType.CREATE_FILE, content=source)], EVERYTHING, formatters=NO_FORMAT
    )
    assert created.files[0].created and (root / new_file).read_text() == source


@pytest.mark.parametrize("language", list(LANGUAGES))
def test_a_result_that_does_not_parse_is_refused_and_nothing_is_written(
    language: str, tmp_path: Path
) -> None:
    """S7/E2: a new syntax error refuses the batch (PREFLIGHT_FAILED); files byte-identical."""
    root, path, source = repo_with(tmp_path, language)
    _, _, target, new, _, broken = LANGUAGES[language]
    other = "other" + path[path.rfind(".") :]
    (root / other).write_text(source)
    before = {p: (root / p).read_bytes() for p in (path, other)}
    good = mod(other, ActionType.MODIFY, target, new)  # fine on its own, refused with the batch
    with pytest.raises(EditRefused) as caught:
        apply_modifications(
            root, [good, mod(path, ActionType.MODIFY, target, broken)], EVERYTHING, formatters=NO_FORMAT
        )
    assert caught.value.code is FailCode.PREFLIGHT_FAILED and "does not parse" in caught.value.message
    assert {p: (root / p).read_bytes() for p in before} == before
    assert not [p for p in (root / path).parent.iterdir() if p.name.endswith(".edit")]


def test_two_edits_to_one_file_each_find_their_chunk_anew(tmp_path: Path) -> None:
    """S7: the second edit's chunk moved when the first grew the file; it is found by id, not offset."""
    root, path, _ = repo_with(tmp_path, "python")
    longer = "def add(a, b):\n    '''Add.'''\n    total = a + b\n    return total\n"
    mods = [
        mod(path, ActionType.MODIFY, "add", longer),
        mod(path, ActionType.MODIFY, "sub", "def sub(a, b):\n    return -(b - a)\n"),
    ]
    apply_modifications(root, mods, EVERYTHING, formatters=NO_FORMAT)
    text = (root / path).read_text()
    assert text == longer + "\n\ndef sub(a, b):\n    return -(b - a)\n"


def test_missing_or_ambiguous_targets_are_refused(tmp_path: Path) -> None:
    root, path, _ = repo_with(tmp_path, "python")
    with pytest.raises(EditRefused) as caught:
        apply_modifications(root, [mod(path, ActionType.DELETE, "nope")], EVERYTHING, formatters=NO_FORMAT)
    assert caught.value.code is FailCode.MERGE_CONFLICT and "pkg/calc.py::add" in caught.value.message
    (root / path).write_text("def f():\n    return 1\n\n\ndef f():\n    return 2\n")
    assert chunk_ids(root, path) == [f"{path}::f", f"{path}::f#2"]
    apply_modifications(root, [mod(path, ActionType.DELETE, "f#2")], EVERYTHING, formatters=NO_FORMAT)
    assert (root / path).read_text() == "def f():\n    return 1\n"
    with pytest.raises(EditRefused, match="does not exist") as missing:
        apply_modifications(
            root, [mod("pkg/gone.py", ActionType.DELETE, "f")], EVERYTHING, formatters=NO_FORMAT
        )
    assert missing.value.code is FailCode.FILE_NOT_FOUND
    with pytest.raises(EditRefused, match="exists"):
        apply_modifications(
            root, [mod(path, ActionType.CREATE_FILE, content="x = 1\n")], EVERYTHING, formatters=NO_FORMAT
        )


def test_line_numbers_and_unanchored_edits_are_refused_by_the_model() -> None:
    """S6: no line numbers; anchored actions need a chunk id of their own file."""
    with pytest.raises(ValidationError, match="line"):
        CodeModification.model_validate(
            {
                "file_path": "a.py",
                "action_type": "MODIFY",
                "target_chunk_id": "a.py::f",
                "new_content": "x",
                "line": 3,
            }
        )
    with pytest.raises(ValidationError, match="needs target_chunk_id"):
        CodeModification(file_path="a.py", action_type=ActionType.MODIFY, new_content="def f(): pass")
    with pytest.raises(ValidationError, match="is not in file_path"):
        CodeModification(file_path="a.py", action_type=ActionType.DELETE, target_chunk_id="b.py::f")


def test_escapes_and_paths_outside_the_pins_are_scope_conflicts(tmp_path: Path) -> None:
    """E3: `..`, absolute paths, symlinks leaving the root, forbidden or unlisted paths: SCOPE_CONFLICT."""
    root, path, source = repo_with(tmp_path, "python")
    outside = tmp_path / "outside.py"
    outside.write_text(source)
    (root / "pkg" / "link.py").symlink_to(outside)
    pins = Pins(allowed_paths=("pkg/",), forbidden_paths=("pkg/secret.py",))
    (root / "pkg" / "secret.py").write_text(source)
    (root / "docs").mkdir()
    (root / "docs" / "x.py").write_text(source)
    for bad in (
        "../outside.py",
        str(outside),
        "pkg/link.py",
        "pkg/secret.py",
        "docs/x.py",
        "pkg/../docs/x.py",
    ):
        with pytest.raises(ScopeConflict) as caught:
            apply_modifications(root, [mod(bad, ActionType.DELETE, "add")], pins, formatters=NO_FORMAT)
        assert caught.value.code is FailCode.SCOPE_CONFLICT, bad
    assert outside.read_text() == source and (root / "pkg" / "secret.py").read_text() == source
    apply_modifications(root, [mod(path, ActionType.DELETE, "add")], pins, formatters=NO_FORMAT)
    with pytest.raises(ValidationError, match="both allowed and forbidden"):
        Pins(allowed_paths=("a",), forbidden_paths=("a",))


def test_a_formatter_that_is_not_installed_is_skipped_and_the_edit_stands(tmp_path: Path) -> None:
    """S7: the formatter and import fixer run when installed; a missing one is reported as skipped."""
    root, path, _ = repo_with(tmp_path, "python")
    os.chmod(root / path, 0o640)
    tools = {"python": (("no-such-formatter-here", "{file}"),)}
    report = apply_modifications(
        root,
        [mod(path, ActionType.MODIFY, "add", "def add(a,b):\n    return b+a\n")],
        EVERYTHING,
        formatters=tools,
    )
    assert report.files[0].formatters == ("no-such-formatter-here: skipped (not installed)",)
    assert "return b+a" in (root / path).read_text()
    assert (root / path).stat().st_mode & 0o777 == 0o640  # permissions kept by the atomic write


def test_ruff_formats_and_sorts_imports_when_it_is_installed(tmp_path: Path) -> None:
    root, path, _ = repo_with(tmp_path, "python")
    new = "import sys\nimport os\ndef mul(a,b):\n    return a*b\n"
    report = apply_modifications(root, [mod(path, ActionType.APPEND, content=new)], EVERYTHING)
    notes = report.files[0].formatters
    if any("skipped" in n for n in notes):
        pytest.skip("ruff is not installed beside this Python")
    text = (root / path).read_text()
    assert notes == ("ruff: ok", "ruff: ok") and "return a * b" in text
    assert text.index("import os") < text.index("import sys")


def test_cli_apply_prints_the_report_and_refuses_with_a_fail_code(tmp_path: Path) -> None:
    """Seed 001 8.3: `pagedctx apply MODS.json --repo ROOT --pins TASK.json`."""
    root, path, source = repo_with(tmp_path, "python")
    task = tmp_path / "task.json"
    task.write_text(json.dumps({
        "task_id": "5b0e7c1e-1f5a-4c55-9a54-2b7f0f6f5d11", "goal": "swap operands", "role": "engineer",
        "pins": {"allowed_paths": ["pkg/"], "forbidden_paths": []}, "files": [path],
    }))  # fmt: skip
    mods = tmp_path / "mods.json"
    mods.write_text(
        json.dumps(
            {
                "modifications": [
                    mod(path, ActionType.MODIFY, "add", "def add(a, b):\n    return b + a\n").model_dump(
                        mode="json"
                    )
                ]
            }
        )
    )
    args = [
        "apply",
        str(mods),
        "--repo",
        str(root),
        "--pins",
        str(task),
        "--no-format",
        "--store",
        f"sqlite:///{tmp_path / 'i.db'}",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["applied"] and report["files"][0]["path"] == path and report["reindexed"]
    mods.write_text(json.dumps([mod("../x.py", ActionType.DELETE, "f").model_dump(mode="json")]))
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 1 and json.loads(refused.stdout)["code"] == "SCOPE_CONFLICT"
    mods.write_text("{not json")
    assert CliRunner().invoke(app, args).exit_code == 2
    assert "b + a" in (root / path).read_text() and source != (root / path).read_text()


def test_a_profile_chooses_the_formatters(tmp_path: Path) -> None:
    """S7: the formatter choice is configurable (profile edit.formatters) and recorded in the report."""
    root, path, _ = repo_with(tmp_path, "python")
    task = tmp_path / "task.json"
    pins = {"allowed_paths": ["pkg/"], "forbidden_paths": []}
    task.write_text(
        json.dumps(
            {"task_id": "5b0e7c1e-1f5a-4c55-9a54-2b7f0f6f5d11", "goal": "g", "role": "r", "pins": pins}
        )
    )
    profile = tmp_path / "fmt.yaml"
    profile.write_text('edit:\n  formatters:\n    python:\n      - ["true", "{file}"]\n')
    mods = tmp_path / "mods.json"
    mods.write_text(json.dumps([mod(path, ActionType.DELETE, "sub").model_dump(mode="json")]))
    result = CliRunner().invoke(
        app, ["apply", str(mods), "--repo", str(root), "--pins", str(task), "--profile", str(profile)]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["files"][0]["formatters"] == ["true: ok"]
