"""The verdict's tests run where the code under test cannot reach the harness (issue 31; E1, E8).

Each class of route the issue names has its tests here: the tree the tests run on
(`evidence.workcopy`), the results channel (`evidence.channel`), and the sandbox itself
(`evidence.sandbox`) seen from inside by a probe test that must pass. The whole attack kit,
through the CLI, is tests/test_verdict_attacks.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from evidence_project import CALC, project, task_for
from hypothesis import given
from hypothesis import strategies as st

from pagedctx.errors import FailCode
from pagedctx.evidence import sandbox
from pagedctx.evidence.channel import ChannelEnds, open_channel
from pagedctx.evidence.collector import collect
from pagedctx.evidence.schemas import Acceptance, TaskContract, VerdictV1
from pagedctx.evidence.tamper import runner_access
from pagedctx.evidence.task import Pins
from pagedctx.evidence.tree import snapshot
from pagedctx.evidence.verdict import judge
from pagedctx.evidence.workcopy import ReadTree, harness_tree, read_tree

FIXED = CALC.replace("return a - b", "return a + b", 1)
IDS = ("tests/test_calc.py::test_add",)
PYTEST = "python -m pytest -q -p no:cacheprovider --junitxml=$PAGEDCTX_REPORTS/junit.xml tests"


def _tree(files: dict[str, str]) -> ReadTree:
    return ReadTree(files={k: (v.encode(), 0o644) for k, v in files.items()})


START = {
    "calc.py": CALC,
    "conftest.py": "# root hooks\n",
    "pytest.ini": "[pytest]\n",
    "pyproject.toml": "[project]\nname='x'\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "tests/test_other.py": "def test_other():\n    pass\n",
    "tests/helpers.py": "X = 1\n",
    "docs/notes.md": "notes\n",
}
BROAD = Pins(allowed_paths=("**",))


def _image(candidate: dict[str, str], pins: Pins = BROAD) -> tuple[dict[str, str], dict[str, str]]:
    start = _tree(START).state()
    image = harness_tree(start, _tree(candidate), pins, IDS)
    return {k: v.decode() for k, (v, _) in image.files.items()}, dict(image.dropped)


def test_the_files_that_decide_come_from_the_start_whatever_the_candidate_wrote() -> None:
    """Class 2 (E1): tests, their package __init__, every conftest and pytest.ini, the runner's
    configuration on the way from the root, and test modules beside a contract test: the start's."""
    candidate = {k: v + "# tampered\n" for k, v in START.items()}
    candidate |= {
        "tests/sub/conftest.py": "pytest_plugins = ['evil']\n",  # a new conftest anywhere
        "tests/pytest.ini": "[pytest]\naddopts = -k nothing\n",
        "tests/.pytest.ini": "[pytest]\n",
        "tests/tox.ini": "[pytest]\n",  # on the way to the tests
        "tests/test_zzz.py": "import calc\ncalc.add = lambda a, b: a + b\n",  # collected beside them
    }
    files, dropped = _image(candidate)
    for path in ("conftest.py", "pytest.ini", "pyproject.toml", "tests/__init__.py", "tests/test_calc.py"):
        assert files[path] == START[path], path
    assert files["tests/test_other.py"] == START["tests/test_other.py"]
    for new in (
        "tests/sub/conftest.py",
        "tests/pytest.ini",
        "tests/.pytest.ini",
        "tests/tox.ini",
        "tests/test_zzz.py",
    ):
        assert new not in files and dropped[new] == "decides_the_run", new
    assert files["calc.py"] == START["calc.py"] + "# tampered\n"  # the candidate's work stands
    assert files["tests/helpers.py"] == START["tests/helpers.py"] + "# tampered\n"


def test_outside_the_pins_the_start_stands_and_unsafe_files_never_enter() -> None:
    """Classes 1 and 2: files outside the pins keep the start's bytes; compiled modules and new
    modules named like the runner or the standard library are left out, with their reason."""
    candidate = dict(START) | {
        "docs/notes.md": "changed\n",
        "calc.py": FIXED,
        "pytest.py": "raise SystemExit(0)\n",
        "json.py": "x = 1\n",
        "_pytest/__init__.py": "",
        "calc.cpython-311-x86_64-linux-gnu.so": "\x7fELF",
        "calc.pyc": "bytes",
        "pkg/__init__.py": "",
        "pkg/json.py": "x = 1\n",  # a submodule of a package: not a top-level name
        "tools/calc.py": FIXED,  # on sys.path before the root, the tests would import it; a caller not
        "tests/calc.py": FIXED,  # tests/ is a package here: tests.calc, not calc
        "scripts/calc/__init__.py": FIXED,
        "scripts/tool.py": "x = 1\n",  # a new module of a new name: the candidate's
    }
    pins = Pins(
        allowed_paths=(
            "calc.py",
            "pytest.py",
            "json.py",
            "_pytest/**",
            "calc.*",
            "pkg/**",
            "tests/calc.py",
            "scripts/**",
        )
    )
    files, dropped = _image(candidate, pins)
    assert files["docs/notes.md"] == "notes\n" and dropped["docs/notes.md"] == "outside_pins"
    assert files["calc.py"] == FIXED
    for path, why in (
        ("pytest.py", "shadows"),
        ("json.py", "shadows"),
        ("_pytest/__init__.py", "shadows"),
        ("calc.cpython-311-x86_64-linux-gnu.so", "compiled"),
        ("calc.pyc", "compiled"),
        ("tools/calc.py", "shadows"),
        ("scripts/calc/__init__.py", "shadows"),
    ):
        assert path not in files and dropped[path] == why, path
    assert files["pkg/json.py"] == "x = 1\n" and files["scripts/tool.py"] == "x = 1\n"
    assert files["tests/calc.py"] == FIXED


def test_a_file_whose_start_bytes_were_never_captured_is_unrecoverable() -> None:
    """Fail closed: a binary test file changed by the candidate cannot be put back."""
    start = _tree(START).state().model_copy(update={"texts": {}})
    image = harness_tree(start, _tree(START | {"tests/test_calc.py": "x"}), BROAD, IDS)
    assert image.unrecoverable == ("tests/test_calc.py",)


def test_the_read_passes_over_symlinks_special_files_and_skipped_folders(tmp_path: Path) -> None:
    """Class 1: what the snapshot never sees never reaches the tests either (and is recorded)."""
    (tmp_path / "tests" / "artifacts").mkdir(parents=True)
    (tmp_path / "tests" / "artifacts" / "conftest.py").write_text("evil\n")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "real.ini").write_text("[pytest]\n")
    (tmp_path / "pytest.ini").symlink_to(tmp_path / "real.ini")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path / "pkg", target_is_directory=True)
    os.mkfifo(tmp_path / "fifo")
    read = read_tree(tmp_path)
    assert sorted(read.files) == ["real.ini"]
    assert read.passed_over == {
        "fifo": "special_file",
        "linked": "symlink",
        "node_modules/": "skipped_folder",
        "pytest.ini": "symlink",
        "tests/artifacts/": "skipped_folder",
    }


@given(
    st.dictionaries(
        st.sampled_from([*sorted(START), "conftest.py", "tests/conftest.py", "tests/test_new.py", "new.py"]),
        st.text(max_size=20),
        max_size=8,
    )
)
def test_property_every_deciding_file_is_the_starts(candidate: dict[str, str]) -> None:
    """Property (E1): whatever the candidate's tree, a path that decides the run holds the start's
    bytes in the image, or is absent when the start had none."""
    start = _tree(START).state()
    image = harness_tree(start, _tree(candidate), BROAD, IDS)
    for path in image.from_start:
        assert image.files.get(path, (None,))[0] == (START[path].encode() if path in START else None)
    for path in candidate:
        if path.endswith("conftest.py") or path.startswith("tests/test_"):
            assert image.files.get(path, (None,))[0] == (START[path].encode() if path in START else None)


def _ends(tmp_path: Path) -> ChannelEnds:
    ends = open_channel(tmp_path, tmp_path)
    ends.close()
    return ends


def _write(ends: ChannelEnds, records: list[dict[str, object]], key: bytes | None = None) -> None:
    lines = []
    for record in records:
        body = json.dumps(record, sort_keys=True, separators=(",", ":"))
        mac = hmac.new(key or ends.nonce, body.encode(), hashlib.sha256).hexdigest()
        lines.append(f"{body}\t{mac}\n")
    ends.path.write_text("".join(lines))


def test_the_channel_trusts_only_the_plugins_records_in_order(tmp_path: Path) -> None:
    """Class 5: records without the nonce, out of order, or a session without its end are not a pass."""
    ends = _ends(tmp_path)
    good = [
        {"seq": 0, "kind": "start", "rootdir": str(tmp_path)},
        {"seq": 1, "kind": "test", "id": "t.py::a", "when": "call", "outcome": "passed"},
        {"seq": 2, "kind": "end", "exitstatus": 0},
    ]
    _write(ends, good)
    assert ends.read().results == {"t.py::a": "passed"} and ends.read().ended
    _write(ends, good, key=b"guessed")
    assert ends.read().problems and not ends.read().results
    _write(ends, [good[0], {**good[2], "seq": 2}])
    assert "out of order" in ends.read().problems[0]
    _write(ends, good[:2])
    report = ends.read()
    assert report.started and not report.ended


def test_outcomes_fold_from_every_phase(tmp_path: Path) -> None:
    """A teardown failure errors a passed test; a test that began and never ended is an error."""
    ends = _ends(tmp_path)
    records: list[dict[str, object]] = [{"seq": 0, "kind": "start", "rootdir": str(tmp_path)}]
    phases = [("a", "setup", "passed"), ("a", "call", "passed"), ("a", "teardown", "failed")]
    phases += [("b", "setup", "passed"), ("c", "setup", "skipped"), ("d", "call", "failed")]
    for name, when, outcome in phases:
        records.append(
            {"seq": len(records), "kind": "test", "id": f"t.py::{name}", "when": when, "outcome": outcome}
        )
    records.append({"seq": len(records), "kind": "collect", "id": "u.py", "outcome": "failed"})
    records.append({"seq": len(records), "kind": "end", "exitstatus": 1})
    _write(ends, records)
    assert ends.read().results == {
        "t.py::a": "error",
        "t.py::b": "error",
        "t.py::c": "skipped",
        "t.py::d": "failed",
        "u.py": "error",
    }


def test_the_diff_check_names_code_that_reaches_for_the_runner() -> None:
    """Test detection is inherent to test-based verdicts: its obvious forms in non-test files fail."""
    diff = textwrap.dedent(
        """\
        diff --git a/calc.py b/calc.py
        --- a/calc.py
        +++ b/calc.py
        @@ -1 +1,2 @@
        +import sys; FAKE = "pytest" in sys.modules
        +import os; os._exit(0)
        diff --git a/util.py b/util.py
        --- a/util.py
        +++ b/util.py
        @@ -1 +1,2 @@
        +import sys; sys.meta_path.insert(0, object())
        +if __name__ == "__main__": pass
        diff --git a/tests/test_x.py b/tests/test_x.py
        --- a/tests/test_x.py
        +++ b/tests/test_x.py
        @@ -1 +1 @@
        +import pytest
        """
    )
    assert runner_access(diff) == {
        "calc.py": [
            "the test runner (pytest)",
            "the loaded modules (sys.modules)",
            "an exit that skips the runner's end (os._exit)",
        ],
        "util.py": ["the import system (import hooks)"],
    }


# -- through the sandbox ---------------------------------------------------------------------------


def _layout(tmp_path: Path, probe: str = "") -> tuple[Path, TaskContract]:
    root = project(tmp_path, git=False)
    (root / "tests").mkdir()
    (root / "test_calc.py").rename(root / "tests" / "test_calc.py")
    (root / "conftest.py").write_text("import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n")
    if probe:
        (root / "tests" / "test_probe.py").write_text(textwrap.dedent(probe))
    task = task_for(root)
    ids = ("tests/test_calc.py::test_add", *(("tests/test_probe.py::test_probe",) if probe else ()))
    contract = TaskContract(
        task_id=task.task_id,
        acceptance=Acceptance(fail_to_pass=ids),
        test_commands=(PYTEST.replace("python", sys.executable),),
    )
    return root, contract


def _judge(
    root: Path, contract: TaskContract, tmp_path: Path, edit: dict[str, str], name: str = "a"
) -> VerdictV1:
    task = task_for(root).model_copy(update={"pins": Pins(allowed_paths=("**",))})
    pre = snapshot(root)
    for path, text in edit.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    folder = collect(task, root, pre=pre, contract=contract, artifacts_root=tmp_path / name)
    return judge(contract, folder, task)


PROBE = """\
    import os, socket, subprocess, sys, sysconfig

    def test_probe():
        key = os.environ.get("KEY_SEEN_BY_HARNESS", "")
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    environ = open(f"/proc/{name}/environ", "rb").read()
                except OSError:
                    continue
                assert b"PAGEDCTX_EVIDENCE_KEY_FILE" not in environ and b"PYTEST_ADDOPTS" not in environ
        assert not any(k.startswith(("PAGEDCTX_EVIDENCE", "PYTEST_ADDOPTS")) for k in os.environ)
        for secret in ("__KEY__", "__HOME__"):
            assert not os.path.exists(secret), secret
        try:
            assert open("/etc/shadow").read() == ""  # the host's secrets are masked
        except OSError:
            pass
        try:
            open(os.path.join(sysconfig.get_paths()["purelib"], "planted.pth"), "w").write("import os")
            raise AssertionError("site-packages is writable")
        except OSError:
            pass
        with socket.socket() as s:
            s.settimeout(1)
            try:
                s.connect(("__ADDRESS__", 1))
                raise AssertionError("the network is reachable")
            except OSError:
                pass
        assert os.getppid() != 0 and len([p for p in os.listdir("/proc") if p.isdigit()]) < 20
    """


@pytest.mark.slow
def test_the_sandbox_hides_the_key_the_home_the_network_and_the_harness(tmp_path: Path) -> None:
    """Classes 4 and 6: a probe test inside the run sees no key, no home, no harness process or
    environment, no network, and a read-only site-packages; the honest fix passes with it."""
    key = Path(os.environ["PAGEDCTX_EVIDENCE_KEY_FILE"])
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_bytes(os.urandom(32))
    marker = Path.home() / f".pagedctx-probe-{os.getpid()}-{tmp_path.name}"  # the user's home, seen?
    marker.write_text("private")
    address = socket_address()
    probe = PROBE.replace("__KEY__", str(key)).replace("__HOME__", str(marker))
    root, contract = _layout(tmp_path, probe.replace("__ADDRESS__", address))
    os.environ["PYTEST_ADDOPTS"] = "-k test_probe"  # the harness's own environment never reaches the run
    try:
        verdict = _judge(root, contract, tmp_path, {"calc.py": FIXED})
    finally:
        del os.environ["PYTEST_ADDOPTS"]
        marker.unlink()
    assert verdict.verdict == "PASS", verdict.messages


def socket_address() -> str:
    """An address of this machine other than loopback (or a public one when it has none)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            return str(probe.getsockname()[0])
        except OSError:
            return "192.0.2.1"


@pytest.mark.slow
def test_a_run_that_never_reaches_its_end_fails_even_hidden_from_the_diff_check(tmp_path: Path) -> None:
    """Class 5: code under test ends the process early, the exit obfuscated past the diff check,
    after writing an all-pass JUnit file and a fake summary: no end record, FAIL."""
    root, contract = _layout(tmp_path)
    forge = textwrap.dedent(
        """\
        import os as _o
        def add(a, b):
            d = _o.environ.get("PAGED" + "CTX_REPORTS", "/tmp")
            case = '<testcase classname="tests.test_calc" name="test_add"/>'
            open(d + "/ju" + "nit.xml", "w").write("<testsuite>" + case + "</testsuite>")
            print("==== 1 passed in 0.01s ====", flush=True)
            getattr(_o, "_e" + "xit")(0)

        def sub(a, b):
            return a - b
        """
    )
    verdict = _judge(root, contract, tmp_path, {"calc.py": forge})
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.EVIDENCE_MISSING
    assert any("never reached its end" in m for m in verdict.messages)
    assert any("FAIL_TO_PASS tests/test_calc.py::test_add: error" in m for m in verdict.messages)


@pytest.mark.slow
def test_a_file_swapped_while_the_harness_reads_cannot_decide(tmp_path: Path) -> None:
    """Class 3: a process swaps the test file for a trivial one and back, as fast as it can, while
    collect runs: the tests run on the start's test file, so the unfixed code still fails."""
    root, contract = _layout(tmp_path)
    test_file = root / "tests" / "test_calc.py"
    original = test_file.read_text()
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            test_file.write_text("def test_add():\n    pass\n")
            test_file.write_text(original)

    task = task_for(root).model_copy(update={"pins": Pins(allowed_paths=("**",))})
    pre = snapshot(root)
    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        folder = collect(task, root, pre=pre, contract=contract, artifacts_root=tmp_path / "art")
    finally:
        stop.set()
        swapper.join()
    assert judge(contract, folder, task).verdict == "FAIL"


@pytest.mark.slow
def test_no_sandbox_fails_closed_unless_the_contract_opts_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SANDBOX_UNAVAILABLE (E1 fail-closed): nothing runs; `isolation: none` runs the same image
    outside a sandbox and every verdict says so."""
    root, contract = _layout(tmp_path)
    monkeypatch.setattr(sandbox, "unavailable", lambda: "bubblewrap is not installed (test)")
    verdict = _judge(root, contract, tmp_path, {"calc.py": FIXED})
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.SANDBOX_UNAVAILABLE
    opted = contract.model_copy(update={"isolation": "none"})
    task = task_for(root).model_copy(update={"pins": Pins(allowed_paths=("**",))})
    folder = collect(task, root, pre=snapshot(root), contract=opted, artifacts_root=tmp_path / "opted")
    passed = judge(opted, folder, task)
    assert passed.verdict == "PASS" and passed.isolation == "none"
    assert passed.notes and passed.notes[0].startswith("UNSANDBOXED")
    assert "UNSANDBOXED" in (folder / "selftest.log").read_text()
    wrong = judge(contract, folder, task)  # evidence of an unsandboxed run under a sandboxed contract
    assert wrong.verdict == "FAIL" and any("isolation 'none'" in m for m in wrong.messages)


@pytest.mark.slow
def test_files_rewritten_or_made_during_the_run_cannot_decide(tmp_path: Path) -> None:
    """Class 3 within the run: code under test, imported by an earlier test module, rewrites the
    contract's test file (mounted read-only: it cannot) and makes a conftest and a test module in
    a folder not yet collected (the harness plugin reports both): FAIL."""
    root, contract = _layout(tmp_path)
    (root / "tests" / "test_a.py").write_text("import calc\n\n\ndef test_a():\n    pass\n")
    (root / "tests" / "zz").mkdir()
    (root / "tests" / "zz" / "test_z.py").write_text("def test_z():\n    pass\n")  # collected after test_a
    attack = textwrap.dedent(
        """\
        import pathlib
        _tests = pathlib.Path(__file__).parent / "tests"
        try:
            (_tests / "test_calc.py").write_text("def test_add():\\n    pass\\n")
        except OSError:
            pass
        (_tests / "zz" / "conftest.py").write_text("X = 1\\n")
        (_tests / "zz" / "test_more.py").write_text("def test_more():\\n    pass\\n")
        """
    )
    verdict = _judge(root, contract, tmp_path, {"calc.py": attack + CALC})
    assert verdict.verdict == "FAIL" and verdict.reason_code is FailCode.EVIDENCE_MISSING
    assert any("'tests/zz/conftest.py' was not in the tests' tree" in m for m in verdict.messages)
    assert any("'tests/zz/test_more.py' was not in the tests' tree" in m for m in verdict.messages)
    assert any("FAIL_TO_PASS tests/test_calc.py::test_add: failed" in m for m in verdict.messages)


def test_the_sandbox_path_and_mounts_keep_the_tree_out_of_the_system(tmp_path: Path) -> None:
    """Classes 1 and 6: PATH inside the sandbox drops relative entries and folders of the tree (a
    `bin/python` the candidate wrote never stands in for the interpreter) but keeps a skipped
    `.venv/bin` (bound read-only from the host); a secret under a bound folder is masked."""
    repo = tmp_path / "repo"
    (repo / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin").mkdir(parents=True)
    secret = tmp_path / "tools" / "evidence.key"
    secret.parent.mkdir()
    secret.write_bytes(b"k" * 32)
    plan = sandbox.SandboxPlan(repo=repo, harness=tmp_path, reports=tmp_path, hidden=(secret,))
    env_path = os.pathsep.join(
        [str(repo / "bin"), "/usr/bin", str(repo / ".venv" / "bin"), "rel", str(secret.parent)]
    )
    assert sandbox.sandbox_env(plan, env_path)["PATH"] == os.pathsep.join(
        ["/usr/bin", str(repo / ".venv" / "bin"), str(secret.parent)]
    )
    argv = sandbox.sandbox_argv(plan, ["true"], env_path)
    mounts = list(zip(argv, argv[1:], argv[2:], strict=False))
    assert ("--ro-bind", str(secret.parent), str(secret.parent)) in mounts  # a PATH folder, bound...
    assert ("--ro-bind", "/dev/null", str(secret)) in mounts  # ...with the key masked
    assert ("--ro-bind", str(repo / ".venv" / "bin"), str(repo / ".venv" / "bin")) in mounts
    assert not any(m[0] == "--ro-bind" and m[1] == str(repo / "bin") for m in mounts)
    tree = mounts.index(("--tmpfs", str(repo), "--ro-bind"))  # the image's tmpfs, then the venv over it
    assert tree < mounts.index(("--ro-bind", str(repo / ".venv" / "bin"), str(repo / ".venv" / "bin")))


def test_the_plugin_reads_its_nonce_once_and_signs_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness plugin's side of the channel, in this process: the nonce comes from the pipe
    (then the pipe is empty), its variables leave the environment, each record checks under the
    nonce, and a file made during the run inside the tree is reported as foreign."""
    import importlib

    for name in ("PYTEST_PLUGINS", "PYTHONPATH"):  # the plugin takes them out: put them back after
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
    from pagedctx.evidence import harness_plugin

    ends = open_channel(tmp_path, tmp_path)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"files": ["kept.py"]}))
    monkeypatch.setenv("PAGEDCTX_HARNESS_NONCE_FD", str(ends.nonce_fd))
    monkeypatch.setenv("PAGEDCTX_HARNESS_CHANNEL_FD", str(ends.channel_fd))
    monkeypatch.setenv("PAGEDCTX_HARNESS_ROOT", str(tmp_path))
    monkeypatch.setattr(harness_plugin, "_MANIFEST", str(manifest))
    channel = harness_plugin._Channel()
    assert channel.nonce == ends.nonce and "PAGEDCTX_HARNESS_NONCE_FD" not in os.environ
    channel.send("start", rootdir=str(tmp_path))
    channel.foreign(str(tmp_path / "kept.py"), "collected file")  # in the image: nothing said
    channel.foreign(str(tmp_path / "made.py"), "collected file")
    channel.foreign("/usr/lib/elsewhere.py", "collected file")  # outside the tree: not the image's
    channel.send("end", exitstatus=0)
    os.close(channel.fd)
    report = ends.read()
    assert report.ended and report.problems == (
        "collected file 'made.py' was not in the tests' tree: made during the run",
    )
    importlib.reload(harness_plugin)  # a nested pytest: no descriptors, an inert channel
    assert harness_plugin._CHANNEL.nonce == b""


def test_the_first_program_unpacks_the_image_and_runs_the_command(tmp_path: Path) -> None:
    """sandbox_init.py as the opt-out runs it (`host`): the image unpacked where it starts, the
    command run through the reaper with its exit code."""
    import subprocess

    from pagedctx.evidence.workcopy import TreeImage

    image = TreeImage(files={"a/b.txt": (b"hello", 0o644)}, from_start=(), dropped={}, unrecoverable=())
    fd = image.sealed_fd()
    folder = tmp_path / "tree"
    folder.mkdir()
    init = Path(sandbox.__file__).with_name("sandbox_init.py")
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(init), str(fd), "", "30", "host", "cat a/b.txt; exit 3"],
            cwd=folder,
            pass_fds=(fd,),
            capture_output=True,
            check=False,
        )
    finally:
        os.close(fd)
    assert (done.returncode, done.stdout) == (3, b"hello")
    assert subprocess.run([sys.executable, str(init)], capture_output=True, check=False).returncode == 2
