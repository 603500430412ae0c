"""Diamond selection (S5) and its baseline ranking, on a small real repository indexed by tree-sitter."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from sample_repo import write_repo

from pagedctx.errors import EnvelopeViolation, UsageError
from pagedctx.host.ingest.index import Index
from pagedctx.host.models.base import ModelRequest
from pagedctx.host.models.recorded import ScriptedBackend
from pagedctx.host.models.runner import ModelModuleRunner
from pagedctx.host.select import SelectOptions, select_context
from pagedctx.host.select.catalog_cache import _MEMO, GRACE_SECONDS, catalog_dir, load_catalog
from pagedctx.host.select.catalog_delta import build_catalog
from pagedctx.host.select.file_parts import file_part
from pagedctx.host.select.policy import BaselineSelectionPolicy, ModelSelectionPolicy
from pagedctx.host.select.selection import Candidate, Selection
from pagedctx.host.store.url import open_store
from pagedctx.host.text.terms import split_identifier, terms
from pagedctx.protocol.budget import Budget


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "repo")


@pytest.fixture
def index(repo: Path, tmp_path: Path) -> Index:
    idx = Index(open_store(f"sqlite:///{tmp_path / 'state.db'}"))
    idx.update([repo])
    return idx


def by_id(selection: Selection) -> dict[str, Any]:
    return {c.id: c for c in selection.chunks}


# --- terms -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "parts"),
    [
        ("parseHTTPOptions_v2", ["parse", "http", "options", "v", "2"]),
        ("parse_options", ["parse", "options"]),
        ("ParseOptions", ["parse", "options"]),
        ("XMLHttpRequest", ["xml", "http", "request"]),
        ("$el", ["el"]),
    ],
)
def test_identifiers_split_on_camel_snake_and_digits(word: str, parts: list[str]) -> None:
    """S5 baseline: identifiers split the way people write them."""
    assert split_identifier(word) == parts


_IDENTIFIER_LIKE = st.lists(
    st.sampled_from([*"aZ9_$-.", "ab", "AB", "Ab", "aB", "HTTP", "Options", "v2", "__", "\u00e9", "\u00c9"]),
    max_size=12,
).map("".join)


@settings(max_examples=800, deadline=None)
@given(_IDENTIFIER_LIKE)
def test_an_identifier_splits_as_its_pieces_between_separators_do(word: str) -> None:
    """S5 baseline (issue 20): one case-splitting pass over the whole identifier gives the parts of
    its pieces between `_`, `$` and `-` split one by one (how they were split before)."""
    camel = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")  # terms._CAMEL
    pieces = re.split(r"[_$\-]+", word)
    assert split_identifier(word) == [m.group(0).lower() for piece in pieces for m in camel.finditer(piece)]


def test_terms_keep_the_whole_identifier_and_drop_stopwords() -> None:
    """S5 baseline: `parse_options` yields its parts and its whole form; stopwords go."""
    assert terms("the parse_options of it") == ["pars", "option", "parseoptions"]
    assert terms("values value") == ["valu", "valu"]
    assert terms("parses parsing parsed") == ["pars", "pars", "pars"]


# --- catalog -------------------------------------------------------------------------------------------


def test_a_file_part_keeps_each_symbol_once_in_order() -> None:
    """S5 L0: a chunk record's symbols become sorted unique lists, whether or not they came so."""
    record = {"id": "a.py::f", "qualname": "f", "kind": "function", "start_line": 1, "end_line": 2}
    record |= {"name": "f", "skeleton": "def f(): ...", "parent": None}
    given_sorted = file_part(
        "a.py", "", [record | {"symbols_referenced": ["a", "b"], "symbols_defined": ["f"]}]
    )
    unsorted = file_part(
        "a.py", "", [record | {"symbols_referenced": ["b", "a", "b"], "symbols_defined": []}]
    )
    assert (given_sorted.refs.lists(), given_sorted.defined.lists()) == ([["a", "b"]], [["f"]])
    assert (unsorted.refs.lists(), unsorted.defined.lists()) == ([["a", "b"]], [[]])


def test_catalog_holds_every_chunk_and_the_symbol_graph(index: Index) -> None:
    """S5 L0: the catalog has every chunk, who references what, and who defines what."""
    catalog = build_catalog(index)
    assert len(catalog) == index.status().chunks
    row = catalog.row("app/config.py::load_settings")
    assert row is not None
    referenced = {catalog.symbols[s] for s in catalog.referenced(row).tolist()}
    assert {"parse_port", "Settings", "get"} <= referenced
    port = catalog.symbol("parse_port")
    assert port is not None
    assert [catalog.ids[r] for r in catalog.defining(port).tolist()] == ["app/config.py::parse_port"]
    assert row in catalog.users_of(port).tolist()
    mount = catalog.row("router/router.go::Router.Mount")
    assert mount is not None and int(catalog.parent_of[mount]) == -1, "a Go method is not inside its struct"
    assert "Router" in {catalog.symbols[s] for s in catalog.referenced(mount).tolist()}


def test_catalog_is_kept_and_follows_a_change_by_a_delta(index: Index, repo: Path) -> None:
    """S5 L0 (issue 20): built once, read from disk after, and after a change only the changed
    file is read: in memory the catalog follows the index; from disk the snapshot is followed."""
    _MEMO.clear()
    first, load = load_catalog(index)
    assert load.source == "built" and load.saved
    assert load_catalog(index)[1].source == "memory"
    _MEMO.clear()
    again, load = load_catalog(index)
    assert load.source == "disk" and again.ids == first.ids
    (repo / "app" / "extra.py").write_text("def brand_new_helper():\n    return 1\n")
    index.update([repo])
    fresh, load = load_catalog(index)
    assert load.source == "followed" and load.files == 1 and not load.saved
    assert "app/extra.py::brand_new_helper" in fresh.ids
    _MEMO.clear()
    followed, load = load_catalog(index)
    assert (load.source, load.files) == ("disk", 1), "the snapshot is a file behind: that file is read"
    assert followed.ids == fresh.ids
    _, load = load_catalog(index, persist=True)
    assert load.saved, "persist writes a snapshot once the catalog drifted at all"
    _MEMO.clear()
    assert load_catalog(index)[1].files == 0


def test_older_snapshots_are_removed_after_their_grace(index: Index, repo: Path) -> None:
    """Issue 20 (cache race): a new snapshot never replaces a folder; older ones go only once
    older than the grace period, so a reader that chose one still finds it."""
    _MEMO.clear()
    load_catalog(index)
    folder = catalog_dir(index.store.url)
    old = next(folder.iterdir())
    (repo / "app" / "extra.py").write_text("def brand_new_helper():\n    return 1\n")
    index.update([repo])
    load_catalog(index, persist=True)
    assert old.exists(), "a snapshot just replaced is kept for readers that chose it"
    os.utime(old, (time.time() - 10 * GRACE_SECONDS,) * 2)
    (repo / "app" / "extra.py").write_text("def brand_new_helper():\n    return 2\n")
    index.update([repo])
    load_catalog(index, persist=True)
    names = sorted(p.name for p in folder.iterdir())
    assert old.name not in names and len(names) == 2, names


def test_a_corrupt_cache_is_rebuilt_not_trusted(index: Index) -> None:
    """Bad input never corrupts state: a damaged snapshot is passed over and rebuilt."""
    _MEMO.clear()
    load_catalog(index)
    _MEMO.clear()
    folder = next(catalog_dir(index.store.url).iterdir())
    (folder / "strings.json").write_text("{not json")
    catalog, load = load_catalog(index)
    assert load.source == "built" and len(catalog) == index.status().chunks
    _MEMO.clear()
    for array in catalog_dir(index.store.url).glob("*/*.npy"):
        array.write_bytes(b"\x93NUMPY garbage")
    again, load = load_catalog(index)
    assert load.source == "built" and again.ids == catalog.ids


# --- the pipeline --------------------------------------------------------------------------------------


def test_core_chunks_come_first_with_their_bodies(index: Index) -> None:
    """S5 L1: the chunk the intent is about is core and shown with its body."""
    selection = select_context(
        index, "refuse a port number outside the valid range in parse_port", Budget(total=2000)
    )
    chunks = by_id(selection)
    port = chunks["app/config.py::parse_port"]
    assert port.why in {"l1", "promoted"} and port.mode == "body"
    assert selection.policy == "baseline"


def test_diffusion_pulls_one_hop_definitions_but_not_ambiguous_names(index: Index) -> None:
    """S5 L2: what the core references is pulled in; `get` (5 definitions) is not followed."""
    options = SelectOptions(promote_density=1.0)
    selection = select_context(
        index, "load_settings reads the settings file", Budget(total=600), options=options
    )
    chunks = by_id(selection)
    assert "app/config.py::load_settings" in chunks
    assert chunks["app/config.py::parse_port"].why in {"l1", "l2"}
    assert not any(cid.endswith("::get") and c.why == "l2" for cid, c in chunks.items())


def test_negative_selection_keeps_types_whole_and_skeletons_functions() -> None:
    """S5 L2.5 baseline: types keep bodies; a long function only called gets its skeleton."""
    policy = BaselineSelectionPolicy()

    def cand(cid: str, kind: str, body: int, skeleton: int = 20, score: float = 0.1) -> Candidate:
        return Candidate(
            id=cid, path="a.go", qualname=cid, kind=kind, skeleton="s", score=score,
            body_tokens=body, skeleton_tokens=skeleton,
        )  # fmt: skip

    core = [cand("core", "function", 300, score=2.0)]
    deps = [
        cand("Shape", "struct", 400),
        cand("Handler", "interface", 500),
        cand("big_helper", "function", 400),
        cand("tiny_helper", "function", 25),
        cand("named_helper", "function", 400, score=1.5),
    ]
    assert policy.keep_bodies("x", core, deps) == {"Shape", "Handler", "tiny_helper", "named_helper"}


def test_a_mostly_selected_file_is_promoted_whole(index: Index) -> None:
    """S5 auto-promotion: past 50% of a file's chunks in body mode, the whole file is included."""
    selection = select_context(
        index, "shout and whisper a greeting: upper-case and lower-case text", Budget(total=2000)
    )
    assert "app/tiny.py" in [f.path for f in selection.full_files]
    inside = [c for c in selection.chunks if c.path == "app/tiny.py"]
    assert inside and all(c.why == "promoted" and c.tokens == 0 for c in inside)
    assert selection.tokens == sum(f.tokens for f in selection.full_files) + sum(
        c.tokens for c in selection.chunks
    )


def test_promotion_can_be_switched_off(index: Index) -> None:
    """S5 auto-promotion: the threshold is an option (1.0: never)."""
    selection = select_context(
        index, "shout and whisper a greeting", Budget(total=2000), options=SelectOptions(promote_density=1.0)
    )
    assert selection.full_files == []


def test_a_method_inside_a_selected_body_is_not_repeated(index: Index) -> None:
    """S5 fit: a definition inside a body already shown is never shown again."""
    selection = select_context(index, "Router Mount Dispatch routes Handler", Budget(total=4000))
    chunks = by_id(selection)
    router = chunks.get("router/router.go::Router")
    if router is not None and router.mode == "body" and router.why != "promoted":
        assert "router/router.go::Router.Mount" not in chunks
    for chunk in selection.chunks:
        if chunk.mode == "body" and chunk.why != "promoted":
            nested = [
                c for c in selection.chunks
                if c is not chunk and c.path == chunk.path and c.why != "promoted"
                and chunk.start_line <= c.start_line and c.end_line <= chunk.end_line
            ]  # fmt: skip
            assert nested == [], f"{chunk.id} repeats {[c.id for c in nested]}"


def test_the_budget_is_exact_and_tiny_budgets_give_small_selections(index: Index) -> None:
    """S5 fit: exact token counts; a budget too small for anything selects nothing."""
    counter = index.counter
    for budget in (1, 5, 40, 150):
        selection = select_context(index, "bind the server socket", Budget(total=budget))
        assert selection.tokens <= budget
        for chunk in selection.chunks:
            if chunk.why == "promoted":
                continue
            stored = index.chunk(chunk.id)
            assert stored is not None
            text = stored.body if chunk.mode == "body" else stored.skeleton
            assert chunk.tokens == counter.count(text)


def test_a_selection_reads_the_stored_counts_and_loads_no_tokenizer(index: Index) -> None:
    """S5 fit (issue 20): the counts stored with the chunks are the selection's, so a process that
    only selects never loads the tokenizer; a chunk stored without counts is counted, the same."""
    fresh = Index(index.store)
    stored = select_context(fresh, "bind the server socket", Budget(total=150))
    assert fresh._counter is None
    counter = index.counter
    counted = [c for c in stored.chunks if c.why != "promoted"]
    assert len(counted) >= 3
    for chunk in counted:
        found = index.chunk(chunk.id)
        assert found is not None
        assert chunk.tokens == counter.count(found.body if chunk.mode == "body" else found.skeleton)
    bare = {}
    for chunk_id, raw in index.store.hgetall("sys/chunks").items():
        record = json.loads(raw)
        record.pop("counted_by")
        bare[chunk_id] = json.dumps(record)
    index.store.hset("sys/chunks", bare)
    assert select_context(Index(index.store), "bind the server socket", Budget(total=150)) == stored


def test_output_order_is_by_path_and_line(index: Index) -> None:
    """S5: stable order: path, then first line."""
    selection = select_context(index, "server settings socket port", Budget(total=3000))
    keys = [(c.path, c.start_line, c.id) for c in selection.chunks]
    assert keys == sorted(keys)
    assert [f.path for f in selection.full_files] == sorted(f.path for f in selection.full_files)


def test_bad_requests_are_usage_errors(index: Index) -> None:
    """Bad input gets a typed error naming the problem."""
    with pytest.raises(UsageError, match="intent is empty"):
        select_context(index, "   ", Budget(total=100))
    with pytest.raises(ValidationError, match="greater than 0"):  # no Budget of 0 to select with
        Budget(total=0)


def test_an_empty_index_selects_nothing(tmp_path: Path) -> None:
    """S5: no chunks, no selection (and no crash)."""
    idx = Index(open_store(f"sqlite:///{tmp_path / 'empty.db'}"))
    selection = select_context(idx, "anything at all", Budget(total=1000))
    assert selection.chunks == [] and selection.full_files == [] and selection.tokens == 0


VOCABULARY = (
    "port settings socket server load parse router mount dispatch handler shout whisper greeting get "
    "timeout range bind serve connection request file lookup variant zebra quantum"
)
WORDS = st.sampled_from(VOCABULARY.split())


@settings(max_examples=40)
@given(words=st.lists(WORDS, min_size=1, max_size=8), budget=st.integers(min_value=1, max_value=3000))
def test_property_never_over_budget_and_identical_across_runs(
    shared_index: Index, words: list[str], budget: int
) -> None:
    """S5 (issue 5 done-means): any intent, any budget: within budget, and the same selection twice,
    including from a catalog read back from disk."""
    intent = " ".join(words)
    first = select_context(shared_index, intent, Budget(total=budget))
    assert first.tokens <= budget
    assert first.tokens == sum(f.tokens for f in first.full_files) + sum(c.tokens for c in first.chunks)
    _MEMO.clear()
    assert select_context(shared_index, intent, Budget(total=budget)) == first


@pytest.fixture(scope="module")
def shared_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("shared")
    write_repo(root / "repo")
    idx = Index(open_store(f"sqlite:///{root / 'state.db'}"))
    idx.update([root / "repo"])
    return idx


# --- policies --------------------------------------------------------------------------------------------


class ScriptedRunner:
    """A module runner answering from a script, recording what it was asked."""

    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def run(self, module: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.asked.append((module, json.loads(json.dumps(payload))))
        return self.answers[module]


def test_a_model_policy_decides_core_and_bodies(index: Index) -> None:
    """S5 L1/L2.5 by a model module: its picks are the core; its keep list decides bodies."""
    runner = ScriptedRunner(
        {
            "router_select": {"core": ["app/server.py::start_server"], "rationale": "r"},
            "negative_select": {"keep_body": ["app/server.py::bind_socket"], "rationale": "r"},
        }
    )
    policy = ModelSelectionPolicy(runner, name="scripted")
    selection = select_context(
        index,
        "start the server",
        Budget(total=5000),
        policy=policy,
        options=SelectOptions(promote_density=1.0),
    )
    chunks = by_id(selection)
    assert selection.policy == "scripted"
    assert chunks["app/server.py::start_server"].why == "l1"
    assert chunks["app/server.py::bind_socket"].mode == "body"
    assert chunks["app/server.py::bind_socket"].why == "l2"
    assert chunks["app/server.py::serve_forever"].why == "l2"
    modules = [m for m, _ in runner.asked]
    assert modules == ["router_select", "negative_select"]
    offered = {c["id"] for c in runner.asked[0][1]["candidates"]}
    assert "app/server.py::start_server" in offered


def test_a_model_naming_ids_it_was_not_offered_is_refused(index: Index) -> None:
    """M3: an answer naming unknown ids is an EnvelopeViolation, never silently trusted."""
    runner = ScriptedRunner({"router_select": {"core": ["app/nowhere.py::ghost"], "rationale": "r"}})
    with pytest.raises(EnvelopeViolation, match="not offered"):
        select_context(index, "start the server", Budget(total=500), policy=ModelSelectionPolicy(runner))


# --- explore (P16) ----------------------------------------------------------------------------------------


def test_explore_searches_only_under_the_block_and_leaves_the_rest_physical(index: Index) -> None:
    """P16/P17: BM25 inside the named block; pieces under the threshold stay physical."""
    from pagedctx.host.ingest.block_tree import BlockTree
    from pagedctx.host.select.explore import explore_code

    result = explore_code(index, BlockTree.dir_handle("app"), ["port", "range"])
    assert result.hits[0].id == "app/config.py::parse_port" and result.hits[0].score == 1.0
    assert all(h.path.startswith("app/") for h in result.hits)
    in_app = sum(len(index.chunks_in_file(p)) for p in index.paths() if p.startswith("app/"))
    assert result.physical == in_app - len(result.hits) and result.physical > 0
    router = explore_code(index, BlockTree.dir_handle("router"), ["port", "range"])
    assert all(h.path.startswith("router/") for h in router.hits)


def test_explore_a_file_block_and_refuse_unknown_handles(index: Index) -> None:
    """P16: a file block scopes to its chunks; an unknown handle is a clear error."""
    from pagedctx.host.select.explore import explore_code

    file_block = next(
        b for b in (index.block(h) for h in index.root_blocks()[0].children) if b and b.source == "router"
    )
    go_file = index.block(file_block.children[0])
    assert go_file is not None
    result = explore_code(index, go_file.handle, ["Mount", "prefix"])
    assert result.hits and result.hits[0].qualname == "Router.Mount"
    with pytest.raises(UsageError, match="no physical block"):
        explore_code(index, "pb:00000000", ["x"])
    with pytest.raises(UsageError, match="keyword"):
        explore_code(index, go_file.handle, [" "])


def test_a_scope_keeps_the_selection_to_the_repositories_asked_about(tmp_path: Path) -> None:
    """S5: a store indexing two copies of a repository selects from the one in scope only."""
    first, second = write_repo(tmp_path / "a"), write_repo(tmp_path / "b")
    idx = Index(open_store(f"sqlite:///{tmp_path / 'two.db'}"))
    idx.update([first, second])
    intent = "refuse a port number outside the valid range in parse_port"
    everything = select_context(idx, intent, Budget(total=2000))
    assert {c.path.split("/")[0] for c in everything.chunks} == {"a", "b"}
    scope = idx.scope_of([second])
    assert scope == ("b",)
    only = select_context(idx, intent, Budget(total=2000), scope=scope)
    paths = [c.path for c in only.chunks] + [f.path for f in only.full_files]
    assert only.chunks and {path.split("/")[0] for path in paths} == {"b"}
    assert select_context(idx, intent, Budget(total=2000), scope=(".",)) == everything


def test_a_model_policy_selects_through_the_module_runner(index: Index) -> None:
    """S5 + P15: L1 and L2.5 by a model (here scripted), validated through the module contracts."""

    def answer(request: ModelRequest) -> str:
        payload = json.loads(request.user)
        meta = {"confidence": 0.7, "risk": "low", "explain": "picked"}
        if request.module == "router_select":
            data = {"core": [payload["candidates"][0]["id"]], "rationale": "the first candidate"}
        else:
            data = {"keep_body": [], "rationale": "skeletons suffice"}
        return json.dumps({"ok": True, "meta": meta, "data": data})

    backend = ScriptedBackend(answer)
    policy = ModelSelectionPolicy(ModelModuleRunner(backend), name=backend.name)
    selection = select_context(
        index, "refuse a port number outside the valid range in parse_port", Budget(total=2000), policy=policy
    )
    assert selection.policy == "scripted:scripted" and selection.chunks
    assert backend.requests[0].module == "router_select"
    chosen = json.loads(backend.requests[0].user)["candidates"][0]["id"]
    assert chosen in {c.id for c in selection.chunks}


def test_a_snapshot_with_arrays_of_another_length_is_rebuilt(index: Index) -> None:
    """Bad input never corrupts state (issue 20): a snapshot whose arrays were swapped or cut, but
    are still valid files, fails its consistency check and is rebuilt."""
    _MEMO.clear()
    built, _ = load_catalog(index)
    _MEMO.clear()
    folder = next(catalog_dir(index.store.url).iterdir())
    np.save(folder / "refs.npy", np.zeros(3, dtype=np.int32))
    catalog, load = load_catalog(index)
    assert load.source == "built" and catalog.ids == built.ids
