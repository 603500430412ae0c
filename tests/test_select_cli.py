"""`pagedctx select` (issue 5 item 3): the JSON contract, the XML and text forms, clear errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sample_repo import write_repo
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.protocol.paged_context.parse import parse_document

_NOW = re.compile(r'"CURRENT_TIME" value="[^"]+"')
CHUNK_KEYS = [
    "id",
    "path",
    "qualname",
    "kind",
    "start_line",
    "end_line",
    "mode",
    "tokens",
    "score",
    "why",
    "role",
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "repo")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["select", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_form_is_the_exact_contract(repo: Path, tmp_path: Path) -> None:
    """S5 output as the issue 5 JSON contract: keys, order, paths relative to ROOT, 1-based lines."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = run(
        "--repo", str(repo), "--store", store, "--intent", "parse the port", "--budget", "500"
    )
    assert code == 0, err
    data = json.loads(out)
    assert list(data) == ["budget", "tokens", "policy", "full_files", "chunks"]
    assert data["budget"] == 500 and data["tokens"] <= 500 and data["policy"] == "baseline"
    assert data["chunks"], "something is selected"
    for chunk in data["chunks"]:
        assert list(chunk) == CHUNK_KEYS
        assert chunk["mode"] in {"body", "skeleton"} and chunk["why"] in {"l1", "l2", "promoted"}
        assert chunk["role"] == ("test" if "test" in chunk["path"] else "source")
        assert (repo / chunk["path"]).is_file()
        lines = (repo / chunk["path"]).read_text().splitlines()
        assert 1 <= chunk["start_line"] <= chunk["end_line"] <= len(lines)
    for full in data["full_files"]:
        assert list(full) == ["path", "tokens", "role"] and (repo / full["path"]).is_file()
    port = next(c for c in data["chunks"] if c["qualname"] == "parse_port")
    lines = (repo / port["path"]).read_text().splitlines()
    assert lines[port["start_line"] - 1].startswith("def parse_port")
    again = run("--store", store, "--intent", "parse the port", "--budget", "500")
    assert json.loads(again[1]) == data, "same selection without re-indexing"


def test_paths_are_relative_to_root_when_the_store_holds_more(repo: Path, tmp_path: Path) -> None:
    """Issue 5: paths relative to ROOT even when the index base is a parent of ROOT."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    (repo.parent / "other").mkdir()
    (repo.parent / "other" / "x.py").write_text("def unrelated():\n    return 0\n")
    assert (
        CliRunner().invoke(app, ["index", str(repo), str(repo.parent / "other"), "--store", store]).exit_code
        == 0
    )
    code, out, err = run("--repo", str(repo), "--store", store, "--intent", "bind socket", "--budget", "300")
    assert code == 0, err
    paths = [c["path"] for c in json.loads(out)["chunks"]]
    assert "app/server.py" in paths


def test_xml_form_is_a_valid_paged_context(repo: Path, tmp_path: Path) -> None:
    """S5 + P1/P17: chunks as Original pages, files and directories as Consolidated pages."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = run(
        "--repo",
        str(repo),
        "--store",
        store,
        "--intent",
        "Router Mount",
        "--budget",
        "400",
        "--format",
        "xml",
    )
    assert code == 0, err
    doc = parse_document(out)
    assert doc.query == "Router Mount"
    types: dict[str, int] = {}

    def walk(nodes: object) -> None:
        for node in nodes:  # type: ignore[attr-defined]
            types[node.type] = types.get(node.type, 0) + 1
            walk(node.children)

    walk(doc.flow)
    assert types.get("Original", 0) >= 1 and types.get("Consolidated", 0) >= 2


def test_text_form_carries_the_code(repo: Path, tmp_path: Path) -> None:
    """S5: the text form is the selected code under headers."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = run(
        "--repo",
        str(repo),
        "--store",
        store,
        "--intent",
        "parse_port range",
        "--budget",
        "300",
        "--format",
        "text",
    )
    assert code == 0, err
    assert out.startswith("# context selected by baseline")
    assert "def parse_port(text: str) -> int:" in out


def test_errors_are_clear_and_exit_2(repo: Path, tmp_path: Path) -> None:
    """Bad input: named, exit 2, nothing on stdout."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    code, out, err = run("--store", store, "--intent", "x", "--budget", "10")
    assert code == 2 and out == "" and "no index yet" in err
    code, out, err = run("--repo", str(tmp_path / "nope"), "--store", store, "--intent", "x")
    assert code == 2 and "not a directory" in err
    code, out, err = run("--repo", str(repo), "--store", store, "--intent", "x", "--policy", "gpt")
    assert code == 2 and "unknown policy 'gpt'" in err
    code, out, err = run("--repo", str(repo), "--store", store, "--intent", "x", "--policy", "model")
    assert code == 2 and "needs models.roles.router" in err
    code, out, err = run("--repo", str(repo), "--store", store, "--intent", "  ")
    assert code == 2 and "intent is empty" in err


def test_select_alone_on_the_root_group_is_the_whole_app(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """S5 (issue 20 item 3): `pagedctx select` runs without typer when its command line is plain,
    else on a root group holding only it; help, usage errors, PagedctxError messages, exit codes and
    output are the whole app's, byte for byte, on either path."""
    from pagedctx.cli import alone
    from pagedctx.cli.select_plain import plain_arguments, run_plain

    store = f"sqlite:///{tmp_path / 'state.db'}"
    cases = [
        ["select", "--help"],
        ["select"],
        ["select", "--intent", "x", "--budget", "0"],
        ["select", "--intent", "x", "--format", "yaml"],
        ["select", "--intent", "x", "--intent", "y"],
        ["select", "--intent", "-x"],
        ["select", "--intent", "x", "extra"],
        ["select", "--intent", "x", "--store", f"sqlite:///{tmp_path / 'empty.db'}"],
        ["select", "--intent", "charge a card", "--repo", str(repo), "--store", store, "--budget", "600"],
        ["select", "--intent=validate amount", f"--store={store}", "--format", "text"],
        ["select", "--intent", "payment service", "--store", store, "--format", "xml"],
    ]

    def shown(code: int, out: str, err: str) -> tuple[int, str, str]:  # XML carries the time
        return code, _NOW.sub("NOW", out), err

    plain_runs = 0
    for args in cases:
        whole = CliRunner().invoke(app, args)
        expected = shown(whole.exit_code, whole.stdout, whole.stderr)
        lean = CliRunner().invoke(alone("select"), args)
        assert shown(lean.exit_code, lean.stdout, lean.stderr) == expected, args
        plain = plain_arguments(args[1:])
        if plain is not None:
            capsys.readouterr()
            code = run_plain(plain)
            assert shown(code, *capsys.readouterr()) == expected, args
            plain_runs += 1
    assert [CliRunner().invoke(app, args).exit_code for args in cases] == [0, *[2] * 7, 0, 0, 0]
    assert plain_runs == 4


def test_the_plain_select_knows_the_commands_options() -> None:
    """Issue 20 item 3: the options `select_plain` reads are the typer command's, and so are the
    formats: a new option runs through typer until the plain path learns it."""
    import typer

    from pagedctx.cli.select import Format
    from pagedctx.cli.select_plain import FORMATS, OPTIONS

    command = typer.main.get_command(app).commands["select"]  # type: ignore[attr-defined]
    names = {name for param in command.params for name in param.opts}
    assert names == set(OPTIONS)
    assert tuple(f.value for f in Format) == FORMATS


def test_select_from_the_command_line_imports_no_other_command(repo: Path, tmp_path: Path) -> None:
    """Issue 20 item 3: `pagedctx select` in a fresh process imports no other command's module nor
    the session's state machine, and prints the whole app's answer."""
    store = f"sqlite:///{tmp_path / 'state.db'}"
    args = ["select", "--intent", "charge a card", "--repo", str(repo), "--store", store, "--budget", "600"]
    code = (
        "import sys\n"
        f"sys.argv = ['pagedctx', *{args!r}]\n"
        "from pagedctx.cli import main\n"
        "try:\n    main()\n"
        "finally:\n"
        "    loaded = [m for m in ('pagedctx.cli.commands', 'pagedctx.cli.run', 'pagedctx.cli.evolve',\n"
        "              'pagedctx.pages.state', 'pagedctx.pages.moves') if m in sys.modules]\n"
        "    print('loaded:', loaded, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert "loaded: []" in done.stderr
    assert done.stdout == CliRunner().invoke(app, args).stdout
