"""The selection catalog follows the index by deltas and selects exactly as one built from scratch
(issue 20; S5 L0-L2, P8): real files, a real tree-sitter index in SQLite, real selections."""

from __future__ import annotations

import random
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pagedctx.errors import PagedctxError
from pagedctx.host.ingest.index import Index
from pagedctx.host.select import catalog_cache, postings, select_context
from pagedctx.host.select.catalog import Catalog
from pagedctx.host.select.catalog_cache import read_snapshot, save_snapshot
from pagedctx.host.select.catalog_delta import build_catalog, follow
from pagedctx.host.select.file_parts import CollectedParts
from pagedctx.host.select.rank import rank
from pagedctx.host.store.url import open_store
from pagedctx.protocol.budget import Budget

PATHS = ("pkg/a.py", "pkg/b.py", "pkg/sub/c.py", "pkg/a_b.py", "lib/e.py", "lib.py", "pkg/sub.py")
NAMES = ("parse_options", "render", "load_settings", "Router", "mount", "cache_value", "helper", "Parser")
WORDS = ("parse", "options", "render", "settings", "router", "mount", "cache", "value", "help", "tree")
INTENTS = (
    "parse the options",
    "render settings",
    "`Router.mount` cache value",
    "load_settings helper",
    "tree parse render mount",
    "Parser",
)


def source(seed: int) -> str:
    """A small Python module whose names overlap with the other files' (shared symbols)."""
    rng = random.Random(seed)
    lines: list[str] = []
    for number in range(rng.randint(0, 3)):
        name = rng.choice(NAMES)
        callee = rng.choice(NAMES)
        doc = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
        if name[0].isupper():
            lines += [
                f"class {name}:",
                f'    """{doc}."""',
                "",
                f"    def {rng.choice(NAMES).lower()}(self, value):",
                f"        return {callee}(value)",
                "",
                "",
            ]
        else:
            lines += [
                f"def {name}(value{number}):",
                f'    """{doc}."""',
                f"    def inner_{number}():",
                f"        return {callee}(value{number})",
                f"    return inner_{number}() + {rng.choice(NAMES)}",
                "",
                "",
            ]
    return "\n".join(lines) + "\n"


def canonical(catalog: Catalog) -> dict[str, Any]:
    """Everything a catalog says, with ids of names replaced by the names (ids depend on history)."""
    rows = range(len(catalog))
    symbols = catalog.symbols

    def terms(field: Any, names: list[str]) -> list[dict[str, int]]:
        out = []
        for r in rows:
            start, stop = int(field.forward_ptr[r]), int(field.forward_ptr[r + 1])
            out.append(
                {
                    names[t]: int(f)
                    for t, f in zip(
                        field.forward_terms[start:stop], field.forward_tf[start:stop], strict=True
                    )
                }
            )
        return out

    def inverted(lists: Any, names: list[str]) -> dict[str, list[tuple[int, int]]]:
        out = {}
        for key in range(lists.keys):
            start, stop = int(lists.ptr[key]), int(lists.ptr[key + 1])
            if stop > start:
                out[names[key]] = list(
                    zip(lists.rows[start:stop].tolist(), lists.data[start:stop].tolist(), strict=True)
                )
        return out

    # Stamps are left out: a file rewritten with the same content is re-stamped by the index
    # without a new generation; the catalog keeps the stamp it read (the content is the same).
    return {
        "strings": (catalog.ids, catalog.qualnames, catalog.kinds, catalog.paths),
        "arrays": [
            getattr(catalog, name).tolist()
            for name in (
                "file_tokens",
                "file_start",
                "file_count",
                "path_of",
                "start_line",
                "end_line",
                "parent_of",
            )
        ],
        "refs": [[symbols[s] for s in catalog.referenced(r).tolist()] for r in rows],
        "defined": [[symbols[s] for s in catalog.defined_by(r).tolist()] for r in rows],
        "defs": inverted(catalog.defs, symbols),
        "users": inverted(catalog.users, symbols),
        "head": (terms(catalog.head, catalog.head_terms.names), catalog.head.lengths.tolist()),
        "body": (terms(catalog.body, catalog.body_terms.names), catalog.body.lengths.tolist()),
        "head_postings": inverted(catalog.head.postings, catalog.head_terms.names),
        "body_postings": inverted(catalog.body.postings, catalog.body_terms.names),
    }


def selections(index: Index, catalog: Catalog) -> list[Any]:
    out: list[Any] = []
    for intent in INTENTS:
        try:
            ranking = rank(catalog, intent)
            picked = select_context(index, intent, Budget(total=600), catalog=catalog)
        except PagedctxError as exc:
            out.append((type(exc).__name__, str(exc)))
            continue
        out.append((ranking.scores.tobytes(), picked))
    return out


def assert_same(index: Index, followed: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(postings, "_SPLICE_MAX", 0)  # from scratch by inverting, the other code path
        scratch = build_catalog(index)
    assert canonical(followed) == canonical(scratch)
    assert selections(index, followed) == selections(index, scratch)


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[tuple[Path, Index]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "keep.py").write_text(source(1000))  # a root is never empty
    yield repo, Index(open_store(f"sqlite:///{tmp_path / 'state.db'}"))
    shutil.rmtree(tmp_path, ignore_errors=True)


OPS = st.lists(
    st.tuples(
        st.sampled_from(("write", "write", "remove")),
        st.sampled_from(PATHS),
        st.integers(0, 40),
        st.booleans(),  # update the index after this step (else the next delta holds several files)
    ),
    min_size=1,
    max_size=7,
)


def run_ops(
    repo: Path, index: Index, ops: list[tuple[str, str, int, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    index.update([repo])
    catalog = build_catalog(index)
    for step, (kind, rel, seed, now) in enumerate(ops):
        path = repo / rel
        if kind == "write":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source(seed))
        elif path.exists():
            path.unlink()
        if now or step == len(ops) - 1:
            index.update([repo])
            catalog = follow(catalog, index)
            if step % 3 == 2:  # through a snapshot on disk now and then
                catalog = read_snapshot(save_snapshot(catalog, repo.parent / "snapshots"))
            assert_same(index, catalog, monkeypatch)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_property_a_followed_catalog_selects_exactly_as_one_built_from_scratch(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    ops: list[tuple[str, str, int, bool]],
) -> None:
    """Issue 20 done-means (S5 L0): after any sequence of file edits, adds and removes (one file
    or several per index update, some through a snapshot on disk), the catalog updated by deltas
    equals one built from scratch, array for array, and gives the same rankings and selections."""
    tmp = tmp_path_factory.mktemp("ops")
    repo = tmp / "repo"
    repo.mkdir()
    (repo / "keep.py").write_text(source(1000))
    index = Index(open_store(f"sqlite:///{tmp / 'state.db'}"))
    try:
        run_ops(repo, index, ops, monkeypatch)
    finally:
        index.store.close()
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_fixed_sequence_of_edits_adds_and_removes(
    workspace: tuple[Path, Index], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20 (S5 L0): the same check on one sequence, for the quick suite: an add, an edit, a
    delta of two files, a remove, a file emptied, then an add back."""
    repo, index = workspace
    ops = [
        ("write", "pkg/a.py", 3, True),
        ("write", "pkg/a.py", 4, True),
        ("write", "pkg/b.py", 5, False),
        ("write", "lib.py", 6, True),
        ("remove", "pkg/a.py", 0, True),
        ("write", "pkg/b.py", 0, True),
        ("write", "pkg/a.py", 7, True),
    ]
    run_ops(repo, index, ops, monkeypatch)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**31 - 1) | st.integers(0, 5), max_size=300))
def test_inverting_orders_entries_as_a_stable_argsort(keys: list[int]) -> None:
    """Issue 20: the order `Postings.invert` sorts entries by (key, position joined in one int64)
    is a stable argsort's: within a key, rows stay ascending."""
    array = np.array(keys, dtype=np.int32)
    assert postings._stable_order(array).tolist() == np.argsort(array, kind="stable").tolist()


def test_splicing_postings_equals_inverting_them() -> None:
    """Issue 20: the inverted lists spliced after a delta are the ones inverting the new forward
    lists gives, rows ascending within each key."""
    rng = np.random.default_rng(3)
    lengths = rng.integers(0, 5, size=30)
    keys = rng.integers(0, 12, size=int(lengths.sum())).astype(np.int32)
    ptr = postings.ptr_of(lengths)
    data = rng.integers(1, 4, size=len(keys)).astype(np.int32)
    before = postings.Postings.invert(12, ptr, keys, data)
    # remove rows 5..9, insert 3 new rows at 5..7, add keys up to 14
    new_lengths = rng.integers(0, 5, size=3)
    new_keys = rng.integers(0, 14, size=int(new_lengths.sum())).astype(np.int32)
    new_data = rng.integers(1, 4, size=len(new_keys)).astype(np.int32)
    new_ptr = postings.ptr_of(new_lengths)
    row_map = np.full(30, -1, dtype=np.int32)
    row_map[:5] = np.arange(5)
    row_map[10:] = np.arange(8, 28)
    runs = [postings.Run(0, 5), postings.Run(part=(new_ptr, new_keys)), postings.Run(10, 30)]
    fwd_ptr, fwd_keys = postings.splice_forward(ptr, keys, runs)
    _, fwd_data = postings.splice_forward(
        ptr, data, [runs[0], postings.Run(part=(new_ptr, new_data)), runs[2]]
    )
    rows_here = np.repeat(np.arange(5, 8, dtype=np.int32), np.diff(new_ptr))
    spliced = before.spliced(
        14,
        row_map=row_map,
        removed_keys=keys[ptr[5] : ptr[10]],
        added_keys=new_keys,
        added_rows=rows_here,
        added_data=new_data,
    )
    fresh = postings.Postings.invert(14, fwd_ptr, fwd_keys, fwd_data)
    for ours, theirs in ((spliced.ptr, fresh.ptr), (spliced.rows, fresh.rows), (spliced.data, fresh.data)):
        assert ours.tolist() == theirs.tolist()


ROW_NAMES = st.sampled_from(["get", "set", "x", "http", "parse", "value", "Cls.m"])


@settings(max_examples=60, deadline=None)
@given(files=st.lists(st.lists(st.lists(ROW_NAMES, max_size=6), max_size=4), max_size=5))
def test_packed_rows_hold_the_counts_of_each_row_in_order(files: list[list[list[str]]]) -> None:
    """Issue 20 item 2 (S5 L0): a file part's rows, packed (`postings.Rows`), give each row's names
    with their counts in order of first appearance, as `dict(Counter(row))`; the names of a file in
    order of first appearance over its rows; the same after a pickle (how a part leaves a worker);
    and rows joined over files give every file's rows in turn, with ids from any vocabulary."""
    import pickle
    from collections import Counter

    packed = [postings.Rows.counted(rows) for rows in files]
    for rows, part in zip(files, packed, strict=True):
        assert part.mappings() == [dict(Counter(row)) for row in rows]
        assert part.names == list(dict.fromkeys(name for row in rows for name in row))
        again = pickle.loads(pickle.dumps(part))
        assert again.mappings() == part.mappings() and again.names == part.names
        assert again.sums().tolist() == [len(row) for row in rows]
    joined = postings.Rows.joined(packed)
    assert joined.mappings() == [dict(Counter(row)) for rows in files for row in rows]
    vocabulary = {
        name: 10 + i for i, name in enumerate(["Cls.m", "get", "http", "parse", "set", "value", "x"])
    }
    flat = [vocabulary[name] for rows in files for row in rows for name in dict.fromkeys(row)]
    assert joined.ids(vocabulary).tolist() == flat
    assert postings.Rows.listed([["a", "b"], []]).lists() == [["a", "b"], []]
    symbols = [["b", "x"], [], ["a", "b", "c"], ["x"]]  # each sorted and unique, names shared
    listed = postings.Rows.listed(symbols)
    assert listed == postings.Rows.of([dict.fromkeys(row, 1) for row in symbols])
    assert (listed.names, listed.ptr.tolist(), listed.keys.tolist()) == (
        ["b", "x", "a", "c"],
        [0, 2, 2, 5, 6],
        [0, 1, 2, 0, 3, 1],
    )
    assert listed.counts.tolist() == [1] * 6 and listed.counts.dtype == np.int32


def test_parts_made_by_the_parsing_workers_build_the_same_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 20 item 2 (S5 L0): the workers that parse a file also make its part of the catalog
    (`CollectedParts`, what `pagedctx index` passes); built from those parts, with no chunk read
    back, then followed after an edit from the parts of that update, the catalog equals one built
    from scratch (70 files: the update parses them in worker processes)."""
    repo = tmp_path / "repo"
    for number in range(70):
        (repo / f"m{number // 10}").mkdir(parents=True, exist_ok=True)
        (repo / f"m{number // 10}" / f"f{number}.py").write_text(source(number))
    index = Index(open_store(f"sqlite:///{tmp_path / 'state.db'}"), workers=2)
    parts = CollectedParts()
    index.update([repo], hook=parts.hook())
    assert len(parts.parts) == 70
    built = build_catalog(index, parts.parts)
    assert_same(index, built, monkeypatch)
    (repo / "m3" / "f31.py").write_text(source(500))
    again = CollectedParts()
    index.update([repo], hook=again.hook())
    assert list(again.parts) == ["m3/f31.py"]
    assert_same(index, follow(built, index, again.parts), monkeypatch)


def test_readers_never_see_a_half_written_snapshot(workspace: tuple[Path, Index]) -> None:
    """Issue 20 (the cache race seen once as a bm25s ResourceWarning under load): while one thread
    writes snapshots and prunes the others at once (no grace), readers that load from disk always
    get the whole catalog: a snapshot appears complete or not at all, and one removed under a
    reader is passed over."""
    repo, index = workspace
    for number in range(8):
        (repo / f"f{number}.py").write_text(source(number))
    index.update([repo])
    expected = build_catalog(index)
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            while not stop.is_set():
                folder = catalog_cache.catalog_dir(index.store.url)
                catalog_cache._prune(folder, save_snapshot(expected, folder), grace_seconds=0.0)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(40):
            catalog_cache._MEMO.clear()
            loaded, _ = catalog_cache.load_catalog(index, grace_seconds=0.0)
            assert canonical(loaded) == canonical(expected)
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
