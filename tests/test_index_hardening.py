"""Issue 13 items 13, 17 and 19: the index and its store under ordinary use (S1, S4, C4).

- Item 13: reading an index that is current needs no lock, so a long `pagedctx index` in another
  process does not stop `select --repo`, `pcr --repo` or a session; a writer waits for the lock
  (bounded, saying so on stderr) and then fails naming the holder. Real second processes hold the
  lock, on SQLite and on a real redis-server.
- Item 17: `pcr` and `select` refuse a store with no index the same way; re-indexing from
  select/pcr/run keeps the settings `pagedctx index` used (an explicit new one wins and is kept).
- Item 19: one store holds unrelated repositories anywhere on disk (S1: several roots together);
  select and pcr keep to the repository they are asked about.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sample_repo import write_files
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import ConfigError, StoreError, UsageError
from pagedctx.host.ingest import writes as writes_module
from pagedctx.host.ingest.index import Index
from pagedctx.host.ingest.update import DEFAULT_WAIT_SECONDS, index_wait_seconds
from pagedctx.host.session.setup import SessionInputs, prepare
from pagedctx.host.store import keys
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.tokens import DEFAULT_TOKENIZER, token_counter

# A second process that takes the index lock, says so, and keeps it until stdin closes or a delay.
HOLDER = (
    "import sys, time\n"
    "from pagedctx.host.store.url import open_store\n"
    "store = open_store(sys.argv[1])\n"
    "with store.lock('index', ttl_seconds=600):\n"
    "    print('locked', flush=True)\n"
    "    if sys.argv[2] == 'stdin':\n"
    "        sys.stdin.read()\n"
    "    else:\n"
    "        time.sleep(float(sys.argv[2]))\n"
    "print('released', flush=True)\n"
)

ONE = {
    "shop/cart.py": (
        "def shared_total(items):\n"
        '    """Sum the cart."""\n'
        "    return sum(price_of(i) for i in items)\n\n\n"
        "def price_of(item):\n"
        "    return item.price\n"
    ),
    "shop/tax.py": "def cart_tax(total):\n    return total * 0.2\n",
}
TWO = {
    "ledger/book.py": (
        "def shared_total(entries):\n"
        '    """Sum the ledger."""\n'
        "    return sum(e.amount for e in entries)\n\n\n"
        "class Ledger:\n"
        "    def close_books(self):\n"
        "        return shared_total([])\n"
    ),
}


def bump(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 5_000_000_000))


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.integration)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'state.db'}"
    return str(request.getfixturevalue("redis_url"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write_files(tmp_path / "a" / "checkout" / "one", ONE)


@pytest.fixture
def other(tmp_path: Path) -> Path:
    return write_files(tmp_path / "b" / "two", TWO)


class Holder:
    """A real second process holding the index lock of a store."""

    def __init__(self, url: str, hold: str = "stdin") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, url, hold],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == "locked", f"the lock holder did not start: {line!r}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for holder in started:
        holder.close()


def cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), input=stdin, env=env)
    return result.exit_code, result.stdout, result.stderr


def need(ref: str, view: str = "definition") -> str:
    return f"<pcr>\n<need>\nref: {ref}\nview: {view}\n</need>\n</pcr>\n"


def prepare_session(index: Index, repo: Path) -> None:
    prepare(
        SessionInputs(repos=(repo,)),
        intent="sum the cart",
        budget=Budget(total=2000),
        counter=token_counter(DEFAULT_TOKENIZER),
        now=datetime.now(UTC),
        index=index,
    )


# --------------------------------------------------------------------------------------------------
# item 13: readers never need the writer's lock; writers wait, bounded, then name the holder


def test_a_current_index_is_read_while_another_process_holds_the_lock(
    store_url: str, repo: Path, holders: list[Holder]
) -> None:
    """Issue 13 item 13 (S1, S4): with the lock held elsewhere and nothing to re-index, `select
    --repo`, `pcr --repo`, a session's preparation and `Index.update` all answer at once."""
    index = Index.open(store_url)
    index.update([repo])
    holders.append(holder := Holder(store_url))
    started = time.monotonic()
    code, out, err = cli("select", "--repo", str(repo), "--store", store_url, "--intent", "cart total")
    assert code == 0, err
    assert {c["path"] for c in json.loads(out)["chunks"]} <= {"shop/cart.py", "shop/tax.py"}
    code, out, err = cli("pcr", "--repo", str(repo), "--store", store_url, "-", stdin=need("cart_tax"))
    assert code == 0, err
    assert "total * 0.2" in out
    prepare_session(index, repo)
    report = index.update([repo])
    assert report.parsed == [] and report.unchanged == 2 and report.files == 2
    assert time.monotonic() - started < 20  # nobody waited for the holder
    assert holder.proc.poll() is None  # and it still holds the lock
    assert "being updated" not in err


def test_a_writer_waits_for_the_lock_and_says_so(store_url: str, repo: Path, holders: list[Holder]) -> None:
    """Issue 13 item 13: a real change while another process holds the lock: the update waits (one
    message naming the holder), then runs once the holder releases."""
    index = Index.open(store_url)
    index.update([repo])
    holders.append(holder := Holder(store_url, hold="1.5"))
    bump(repo / "shop" / "tax.py", "def cart_tax(total):\n    return total * 0.25\n")
    said: list[str] = []
    started = time.monotonic()
    report = index.update([repo], wait_seconds=60, on_wait=said.append)
    assert time.monotonic() - started >= 0.5
    assert report.parsed == ["shop/tax.py"]
    assert len(said) == 1 and "waiting" in said[0] and f":{holder.pid}:" in said[0]
    assert holder.proc.wait(30) == 0


def test_a_writer_gives_up_after_the_wait_naming_the_holder(
    store_url: str, repo: Path, holders: list[Holder]
) -> None:
    """Issue 13 item 13: past the wait the typed StoreError names the holder; through the CLI the
    wait is PAGEDCTX_INDEX_WAIT seconds, said on stderr, and the exit code is 2."""
    index = Index.open(store_url)
    index.update([repo])
    holders.append(holder := Holder(store_url))
    bump(repo / "shop" / "tax.py", "def cart_tax(total):\n    return total * 0.3\n")
    started = time.monotonic()
    with pytest.raises(StoreError, match=f"held by [^ ]+:{holder.pid}:") as caught:
        index.update([repo], wait_seconds=0.6, on_wait=lambda _: None)
    assert time.monotonic() - started >= 0.6
    assert "waited 0.6 s" in caught.value.message
    env = {"PAGEDCTX_INDEX_WAIT": "0.4"}
    code, _, err = cli("select", "--repo", str(repo), "--store", store_url, "--intent", "tax", env=env)
    assert code == 2
    assert "waiting up to 0.4 s" in err and f":{holder.pid}:" in err
    assert "Traceback" not in err
    holder.release()
    code, _, err = cli("select", "--repo", str(repo), "--store", store_url, "--intent", "tax", env=env)
    assert code == 0, err


def test_the_store_lock_waits_across_processes(store_url: str, holders: list[Holder]) -> None:
    """S4: `Store.lock(wait_seconds=...)` on both backends: refused at once by default, taken once a
    real holder process leaves, and a StoreError naming the holder when the wait runs out."""
    store = open_store(store_url)
    try:
        holders.append(holder := Holder(store_url, hold="1.0"))
        with pytest.raises(StoreError, match="being updated by another process"), store.lock("index", 60):
            pass
        said: list[str] = []
        with store.lock("index", 60, wait_seconds=30, on_wait=said.append):
            assert holder.proc.poll() is not None or holder.proc.wait(5) == 0
        assert said and f":{holder.pid}:" in said[0]
        holders.append(second := Holder(store_url))
        started = time.monotonic()
        with pytest.raises(StoreError, match=f":{second.pid}:"), store.lock("index", 60, wait_seconds=0.3):
            pass
        assert 0.3 <= time.monotonic() - started < 10
    finally:
        store.close()


def test_the_wait_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13 item 13: PAGEDCTX_INDEX_WAIT seconds (default 60); a bad value is a ConfigError."""
    monkeypatch.delenv("PAGEDCTX_INDEX_WAIT", raising=False)
    assert index_wait_seconds() == DEFAULT_WAIT_SECONDS == 60
    monkeypatch.setenv("PAGEDCTX_INDEX_WAIT", "2.5")
    assert index_wait_seconds() == 2.5
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv("PAGEDCTX_INDEX_WAIT", bad)
        with pytest.raises(ConfigError, match="PAGEDCTX_INDEX_WAIT"):
            index_wait_seconds()


def test_an_update_killed_before_its_tree_is_finished_by_the_next_reader(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13 item 13 (S1, P17): a writer that dies after its files but before the tree leaves a
    mark, so the next update, even with every file current, rebuilds the tree (it never trusts a
    half-written index as current)."""
    index = Index.open(f"sqlite:///{tmp_path / 'state.db'}")
    index.update([repo])
    before = index.meta().generation
    write_files(repo, {"shop/extra.py": "def extra():\n    return 1\n"})

    def die(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the process is killed here

    monkeypatch.setattr(writes_module.Writer, "write_tree", die)
    with pytest.raises(KeyboardInterrupt):
        index.update([repo])
    monkeypatch.undo()
    assert index.file("shop/extra.py") is not None  # the files landed, the tree did not
    report = index.update([repo])
    assert report.parsed == []
    (root,) = index.root_blocks()
    shop = index.block(root.children[0])
    assert shop is not None and shop.source == "shop" and len(shop.children) == 3
    assert index.meta().generation > before


# --------------------------------------------------------------------------------------------------
# item 17: no index is one clear error; re-indexing keeps the index's own settings


def test_pcr_and_select_without_an_index_say_how_to_build_one(tmp_path: Path) -> None:
    """Issue 13 item 17 (C4): `pcr` on a store with no index is a usage error (exit 2), like
    `select`, and both say to run `pagedctx index ROOT` or to pass --repo."""
    store = f"sqlite:///{tmp_path / 'empty.db'}"
    code, out, err = cli("pcr", "--store", store, "-", stdin=need("anything"))
    assert code == 2 and out == ""
    assert "no index" in err and "pagedctx index ROOT" in err and "--repo" in err
    code2, out2, err2 = cli("select", "--store", store, "--intent", "anything")
    assert code2 == 2 and out2 == ""
    assert "pagedctx index ROOT" in err2 and "--repo" in err2


def test_reindexing_keeps_the_settings_of_pagedctx_index(repo: Path, tmp_path: Path) -> None:
    """Issue 13 item 17 (S1): a file only a wider `--max-file-size` admits stays indexed through
    select --repo, pcr --repo and a session's preparation; an explicit new setting wins and stays."""
    store = f"sqlite:///{tmp_path / 'state.db'}"
    big = repo / "shop" / "catalog.py"
    lines = "".join(f"entry {n:07d} with some padding text\n" for n in range(32_000))
    big.write_text(
        f'def catalogue_lookup(code):\n    return code\n\n\nDATA = """\n{lines}"""\n', encoding="utf-8"
    )
    assert big.stat().st_size > 1 << 20
    code, _, err = cli("index", str(repo), "--store", store, "--max-file-size", "3000000", "--json")
    assert code == 0, err
    index = Index.open(store)
    assert index.file("shop/catalog.py") is not None
    code, _, err = cli("select", "--repo", str(repo), "--store", store, "--intent", "catalogue lookup")
    assert code == 0, err
    assert index.file("shop/catalog.py") is not None, "select --repo dropped what index had added"
    code, out, err = cli("pcr", "--repo", str(repo), "--store", store, "-", stdin=need("catalogue_lookup"))
    assert code == 0, err
    assert "status: missing" not in out
    prepare_session(index, repo)
    assert index.file("shop/catalog.py") is not None
    assert index.update([repo]).parsed == []
    # An explicit new setting wins, and is kept by the next re-index from select.
    code, _, err = cli("index", str(repo), "--store", store, "--max-file-size", "60", "--json")
    assert code == 0, err
    assert index.paths() == ["shop/tax.py"]
    code, _, err = cli("select", "--repo", str(repo), "--store", store, "--intent", "tax")
    assert code == 0, err
    assert index.paths() == ["shop/tax.py"]
    assert {s.path: s.reason for s in index.status().skipped} == {
        "shop/cart.py": "too_large",
        "shop/catalog.py": "too_large",
    }


def test_a_bad_max_file_size_is_a_usage_error(repo: Path, tmp_path: Path) -> None:
    """Issue 13 item 17: a size limit below one byte is refused before anything is indexed."""
    with pytest.raises(UsageError, match="max_file_bytes"):
        Index.open(f"sqlite:///{tmp_path / 's.db'}").update([repo], max_file_bytes=0)
    code, _, err = cli(
        "index", str(repo), "--store", f"sqlite:///{tmp_path / 's.db'}", "--max-file-size", "0"
    )
    assert code == 2 and "Traceback" not in err


# --------------------------------------------------------------------------------------------------
# item 19: one store, any number of repositories anywhere on disk


def test_one_default_store_holds_two_unrelated_repositories(
    repo: Path, other: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13 item 19 (S1): from one folder, with the default store, index two repositories in
    unrelated folders; select and pcr in each keep to that repository."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    for root in (repo, other):
        code, _, err = cli("index", str(root), "--json")
        assert code == 0, err
    code, out, _ = cli("index", "--status", "--json")
    assert json.loads(out)["files"] == 3
    for root, own in ((repo, "shop/cart.py"), (other, "ledger/book.py")):
        code, out, err = cli("select", "--repo", str(root), "--intent", "shared total", "--budget", "800")
        assert code == 0, err
        paths = {c["path"] for c in json.loads(out)["chunks"]}
        assert own in paths and all((root / p).is_file() for p in paths)
        code, out, err = cli("pcr", "--repo", str(root), "-", stdin=need("shared_total"))
        assert code == 0, err
        assert "ambiguous" not in out and "status: missing" not in out
        assert ("Sum the cart" in out) == (root == repo) and ("Sum the ledger" in out) == (root == other)
    # Without --repo the store answers about both.
    code, out, _ = cli("pcr", "-", stdin=need("shared_total"))
    assert code == 0 and "ambiguous" in out


def test_adding_an_unrelated_root_equals_a_fresh_index_and_keeps_units(
    store_url: str, repo: Path, other: Path, tmp_path: Path
) -> None:
    """Issue 13 item 19 (S1, S4): a root outside the base moves the base up; the store then equals
    a fresh index of both roots key for key, chunks keep their unit numbers, updates stay incremental."""
    index = Index.open(store_url)
    index.update([repo])
    units = {c.id: index.unit_of(c.id) for p in index.paths() for c in index.chunks_in_file(p)}
    report = index.update([other])
    assert report.parsed == ["b/two/ledger/book.py"]
    assert index.meta().base == str(tmp_path)
    assert index.scope_of([repo]) == ("a/checkout/one",) and index.scope_of([other]) == ("b/two",)
    assert {c: index.unit_of(f"a/checkout/one/{c}") for c in units} == units
    assert index.chunk("a/checkout/one/shop/tax.py::cart_tax") is not None
    assert index.chunk("shop/tax.py::cart_tax") is None
    assert [c.id for c in index.defining("price_of")] == ["a/checkout/one/shop/cart.py::price_of"]
    fresh = Index.open(f"sqlite:///{tmp_path / 'fresh.db'}")
    fresh.update([repo, other])
    for key in (keys.CHUNKS, keys.FILES_META, keys.BLOCKS, keys.HANDLES, "pagedctx/files"):
        assert index.store.hgetall(key) == fresh.store.hgetall(key), key
    symbols = sorted(fresh.store.scan_keys(keys.SYMBOL_PREFIX))
    assert sorted(index.store.scan_keys(keys.SYMBOL_PREFIX)) == symbols
    for key in symbols:
        assert index.store.smembers(key) == fresh.store.smembers(key), key
    assert index.meta().roots == ["a/checkout/one", "b/two"]
    assert index.update([repo]).parsed == [] and index.update([other]).parsed == []
    bump(repo / "shop" / "tax.py", "def cart_tax(total):\n    return total * 0.5\n")
    assert index.update([repo, other]).parsed == ["a/checkout/one/shop/tax.py"]
    scoped = index.within([other])
    assert [c.id for c in scoped.defining("shared_total")] == ["b/two/ledger/book.py::shared_total"]
    assert scoped.paths() == ["b/two/ledger/book.py"] and scoped.file("a/checkout/one/shop/tax.py") is None


def test_ignore_files_above_a_repository_do_not_reach_into_it(
    tmp_path: Path, repo: Path, other: Path
) -> None:
    """Issue 13 item 19 (S1): once two repositories share a base, a .gitignore in a folder above a
    repository's own top (its `.git`) does not apply to it, as git would not apply it."""
    (tmp_path / ".gitignore").write_text("*.py\n", encoding="utf-8")
    for root in (repo, other):
        (root / ".git").mkdir()
    index = Index.open(f"sqlite:///{tmp_path / 'state.db'}")
    index.update([repo])
    index.update([other])
    assert index.paths() == [
        "a/checkout/one/shop/cart.py",
        "a/checkout/one/shop/tax.py",
        "b/two/ledger/book.py",
    ]


def test_a_root_inside_a_repository_obeys_its_ignore_files_whatever_the_base(
    tmp_path: Path, repo: Path, other: Path
) -> None:
    """Issue 13 item 19 (S1): a sub-folder root of a git repository honours the repository's
    .gitignore above it (as git does), alone or sharing its store's base with an unrelated root."""
    (repo / ".git").mkdir()
    (repo / ".gitignore").write_text("*.gen.py\n", encoding="utf-8")
    write_files(repo, {"shop/made.gen.py": "def made():\n    return 1\n"})
    alone = Index.open(f"sqlite:///{tmp_path / 'alone.db'}")
    alone.update([repo / "shop"])
    assert alone.paths() == ["cart.py", "tax.py"]
    shared = Index.open(f"sqlite:///{tmp_path / 'shared.db'}")
    shared.update([repo / "shop", other])
    assert "a/checkout/one/shop/made.gen.py" not in shared.paths()
    assert "a/checkout/one/shop/cart.py" in shared.paths()
