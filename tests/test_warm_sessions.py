"""A process keeps what an ask rebuilt (issue 34: serve at the cost of a lookup; P3, P12).

`WarmSessions` (host/records/warm.py) keeps a session's page state, the Router's page search and
its dialogue of turns between asks. It is a cache of what the store says: every test here holds
a warm session to the cold one (a process that keeps nothing) and finds them equal, answer for
answer and context for context, through new turns, merges, a dropped transaction and another
process's writes.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedctx.engine import Engine, fixed_clock
from pagedctx.errors import InputFormatError
from pagedctx.host.blocks.dialogue import DialogueProvider
from pagedctx.host.records.registry import SessionRegistry
from pagedctx.host.records.trace import RoundEvent, snapshots
from pagedctx.host.records.warm import WarmSessions
from pagedctx.host.store.sqlite import SqliteStore
from pagedctx.host.text.bm25 import Corpus, GrowingCorpus
from pagedctx.host.text.keywords import consensus_keywords, counted_keywords
from pagedctx.pages import Page
from pagedctx.protocol.tokens import token_counter
from pagedctx.session import Session

START = datetime(2026, 3, 1, 9, tzinfo=UTC)
COUNTER = token_counter()
TOPICS = ["Lisbon trip", "sourdough starter", "bike gears", "cello lessons", "garden hose", "tax forms"]


def _engine(store: Path, *, warm: int | None = None) -> Engine:
    engine = Engine.open("local", store=f"sqlite:///{store}", runtime="inproc", clock=fixed_clock(START))
    if warm is None:
        return engine
    return Engine(engine.config, clock=engine.clock, roles=engine.roles, warm=[WarmSessions(warm)])


def _turns(rng: random.Random, start: int, count: int) -> list[tuple[str, str]]:
    out = []
    for i in range(start, start + count):
        topic = rng.choice(TOPICS)
        speaker = "user" if i % 2 == 0 else "assistant"
        out.append((speaker, f"message {i} about the {topic}: detail {rng.randint(0, 999)} and item{i}"))
    return out


def _exchange(engine: Engine, step: int, rng: random.Random, *, fail: bool = False) -> tuple[str, str | None]:
    """One served request: new turns, the ask, the answer turn, in one transaction; a failing
    request raises inside the transaction (nothing of it lands)."""
    with Session(engine, "t.s", keep_trace=True) as session, session.locked(30), session.atomic():
        question = f"what did I say about the {rng.choice(TOPICS)}?"
        session.add_turns([*_turns(rng, 1000 * step, 3 + step % 4), ("user", question)])
        result = session.ask(question, budget=1500, merges="deferred")
        session.add_turn("assistant", result.answer or "(none)")
        if fail:
            raise RuntimeError("the request failed after its ask")
    with Session(engine, "t.s", keep_trace=True) as session:
        session.consolidate()
    return result.xml, result.answer


def _trace(engine: Engine) -> tuple[list[tuple[str, int, list[str]]], int]:
    """The session's store trace as every page after each event (`snapshots`), and how many of
    its events list every page."""
    with Session(engine, "t.s", keep_trace=True) as session:
        events = [RoundEvent.model_validate_json(line) for line in session.trace_lines()]
    seen = [
        (event.state_digest, event.round, sorted(line.model_dump_json() for line in pages))
        for event, pages in snapshots(events)
    ]
    return seen, sum(event.snapshot == "full" for event in events)


def _persisted(engine: Engine) -> tuple[object, ...]:
    with Session(engine, "t.s") as session:
        state = session.state
        pages = {pid: page.model_dump(mode="json") for pid, page in state.pages.items()}
        views = {pid: view.value for pid, view in state.views.items()}
        return pages, views, dict(state.parents), state.flow, state.round, session.turns


def test_a_warm_session_answers_and_persists_exactly_as_a_cold_one(tmp_path: Path) -> None:
    """Issue 34: what a process kept (state, page search, dialogue) changes no answer, no context
    and no stored page, over asks that add turns, merge the far field, and a request that failed
    after its ask (its transaction dropped, the warm parts it touched not trusted after)."""
    warm, cold = _engine(tmp_path / "warm.db"), _engine(tmp_path / "cold.db", warm=0)
    warm_rng, cold_rng = random.Random(7), random.Random(7)
    for step in range(9):
        fail = step == 4
        outcomes = []
        for engine, rng in ((warm, warm_rng), (cold, cold_rng)):
            try:
                outcomes.append(_exchange(engine, step, rng, fail=fail))
            except RuntimeError:
                outcomes.append(("failed", None))
        assert outcomes[0] == outcomes[1], f"ask {step}: the warm session answered otherwise"
        assert _persisted(warm) == _persisted(cold), f"ask {step}: the stored pages differ"
    assert len(warm.warm) == 1 and len(cold.warm) == 0
    warm_trace, warm_full = _trace(warm)
    cold_trace, cold_full = _trace(cold)
    assert warm_trace == cold_trace  # every round's pages and digest, read back from the stream
    assert cold_full == 8 and warm_full == 2  # each ask lists every page again, cold; warm: after a drop


def test_another_process_writing_the_session_makes_the_warm_state_unused(tmp_path: Path) -> None:
    """A session written by another process (another replica) since this one kept it: the
    version in its meta is another, so the state is read from the store, and the page search is
    brought up to date from the pages, not trusted."""
    store = tmp_path / "shared.db"
    here = _engine(store)
    other = Engine(here.config, clock=here.clock, roles=here.roles, warm=[WarmSessions()])  # another process
    reference = _engine(tmp_path / "ref.db", warm=0)
    rng_a, rng_b = random.Random(3), random.Random(3)
    for step in range(6):
        writer = here if step % 3 != 1 else other  # every third request lands on the other replica
        got = _exchange(writer, step, rng_a)
        assert got == _exchange(reference, step, rng_b), f"ask {step}"
    assert _persisted(here) == _persisted(reference)
    assert _trace(here)[0] == _trace(reference)[0]  # the stream goes on only from this process's last event


def test_the_registry_reuses_the_state_it_saved_while_meta_names_its_version(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"))
    warm = WarmSessions()
    registry = SessionRegistry(store, "s", warm)
    with Session(_engine(tmp_path / "s.db", warm=0), "s") as session:
        session.add_turns(_turns(random.Random(1), 0, 6))
        session.ask("the bike gears?", budget=1500)
    state = registry.load()  # cold: read from the store, then kept
    assert SessionRegistry(store, "s", warm).load() is state
    registry.save(state.model_copy(update={"round": state.round + 1}))
    again = SessionRegistry(store, "s", warm).load()
    assert again.round == state.round + 1
    assert SessionRegistry(store, "s", WarmSessions()).load().round == again.round  # another process
    meta = store.get("pagedctx/session/s/meta") or ""
    store.set("pagedctx/session/s/meta", meta.replace('"version"', '"v"'))
    assert SessionRegistry(store, "s", warm).load() is not again  # no version: always read
    store.close()


def test_warm_sessions_is_a_bounded_lru_and_a_search_is_lent_to_one_ask() -> None:
    warm = WarmSessions(2)
    from pagedctx.host.text.page_search import PageSearch
    from pagedctx.pages import SessionState

    searches = [PageSearch() for _ in range(3)]
    for i, search in enumerate(searches):
        warm.keep_search(("db", f"s{i}"), search, SessionState())
    assert len(warm) == 2 and warm.take_search(("db", "s0")) is None  # the least recent went
    taken = warm.take_search(("db", "s2"))
    assert taken is not None and taken[0] is searches[2]
    assert warm.take_search(("db", "s2")) is None  # lent: a second ask builds its own
    warm.forget(("db", "s1"))
    assert warm.take_search(("db", "s1")) is None
    from pages_factory import build, original

    bounded = WarmSessions(8, pages=10)  # pages too: a long session's parts take memory
    six = build(*(original(n) for n in range(1, 7)))
    bounded.keep_state(("db", "a"), "v1", six, {})
    bounded.keep_state(("db", "b"), "v1", six, {})
    bounded.keep_state(("db", "b"), "v2", six, {})  # 12 pages held: the least recent goes
    assert bounded.state(("db", "a"), "v1") is None and bounded.state(("db", "b"), "v2") is not None
    nothing = WarmSessions(0)
    nothing.keep_search(("db", "s"), PageSearch(), SessionState())
    assert len(nothing) == 0
    with pytest.raises(ValueError, match="0 or more"):
        WarmSessions(-1)
    with pytest.raises(ValueError, match="0 or more"):
        WarmSessions(4, pages=-1)


# --- the dialogue, grown turn by turn ------------------------------------------------------------


def _turn_dicts(count: int, seed: int, *, backwards_at: int | None = None) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        moment = START + timedelta(minutes=i if i != backwards_at else -5)
        text = f"{rng.choice(TOPICS)} turn {i}: MyClass.method_{i % 5} failed at step {rng.randint(1, 9)}"
        out.append({"id": f"t{i + 1}", "speaker": ["user", "assistant", "tool"][i % 3], "text": text,
                    "timestamp": moment.isoformat()})  # fmt: skip
    return out


def _provider_shape(provider: DialogueProvider) -> tuple[object, ...]:
    pieces = [provider.piece(h).model_dump(mode="json") for h in provider.handles]  # type: ignore[union-attr]
    return pieces, provider.notes, [b.model_dump(mode="json") for b in provider.roots()]


@settings(max_examples=40, deadline=None)
@given(count=st.integers(1, 30), cuts=st.lists(st.integers(1, 29), max_size=4), seed=st.integers(0, 99))
def test_a_dialogue_extended_turn_by_turn_is_the_dialogue_built_at_once(
    count: int, cuts: list[int], seed: int
) -> None:
    """`DialogueProvider.extended`: the same pieces, root block, notes and search as `from_turns`
    of every turn, however the turns arrived, the root's search grown, not rebuilt."""
    turns = _turn_dicts(count, seed, backwards_at=count // 2 if count > 2 else None)
    whole = DialogueProvider.from_turns("session:x", turns, COUNTER)
    bounds = sorted({c for c in cuts if c < count})
    provider = DialogueProvider.from_turns("session:x", turns[: bounds[0] if bounds else count], COUNTER)
    provider.search(provider.root, ["failed"])  # its search built, to be grown
    for start, stop in zip(bounds, [*bounds[1:], count], strict=False):
        grown = provider.extended(turns[start:stop], COUNTER)
        assert grown is not None and grown._models.get(grown.root) is not None  # its search grown
        provider = grown
    assert _provider_shape(provider) == _provider_shape(whole)
    for words in (["failed"], ["Lisbon", "trip"], ["method_3"], ["nothing-here"]):
        assert provider.search(provider.root, words) == whole.search(whole.root, words)


def test_a_turn_id_used_before_is_refused_when_the_dialogue_grows() -> None:
    turns = _turn_dicts(4, 1)
    provider = DialogueProvider.from_turns("session:x", turns[:3], COUNTER)
    with pytest.raises(InputFormatError, match="'t2' already used"):
        provider.extended([{**turns[3], "id": "t2"}], COUNTER)
    assert provider.extended(turns[3:], COUNTER) is not None  # the refused one changed nothing


def test_a_search_handed_to_a_grown_dialogue_is_rebuilt_by_the_one_that_gave_it() -> None:
    turns = _turn_dicts(6, 2)
    provider = DialogueProvider.from_turns("session:x", turns[:4], COUNTER)
    before = provider.search(provider.root, ["failed"])
    provider.extended(turns[4:], COUNTER)
    assert provider.search(provider.root, ["failed"]) == before


@settings(max_examples=200, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(["a", "b", "rare"]), max_size=8), min_size=1, max_size=30),
    cut=st.integers(0, 30),
    query=st.lists(st.sampled_from(["a", "b", "c", "d", "rare", "zzz"]), max_size=5),
)
def test_a_growing_corpus_scores_exactly_as_the_corpus_of_its_rows(
    docs: list[list[str]], cut: int, query: list[str]
) -> None:
    grown = GrowingCorpus()
    grown.add(docs[:cut])
    assert grown.scores(query).tobytes() == Corpus.of(docs[:cut]).scores(query).tobytes()
    grown.add(docs[cut:])  # the arrays kept from the query before grow with the rows added
    assert len(grown) == len(docs)
    assert grown.scores(query).tobytes() == Corpus.of(docs).scores(query).tobytes()
    assert grown.scores(query[::-1]).tobytes() == Corpus.of(docs).scores(query[::-1]).tobytes()


@settings(max_examples=200, deadline=None)
@given(keywords=st.lists(st.lists(st.sampled_from([f"k{i}" for i in range(40)] + [" ", "a,b"]), max_size=6)))
def test_counted_keywords_are_the_consensus_of_the_pieces(keywords: list[list[str]]) -> None:
    class _P:
        def __init__(self, words: list[str]) -> None:
            self.keywords = tuple(words)

    pieces = [_P(words) for words in keywords]
    count: dict[str, int] = {}
    first: dict[str, int] = {}
    for piece in pieces:
        for word in piece.keywords:
            count[word] = count.get(word, 0) + 1
            first.setdefault(word, len(first))
    assert counted_keywords(count, first, 3) == consensus_keywords(pieces, 3)
    assert counted_keywords(count, first) == consensus_keywords(pieces)


# --- the history's order, kept from state to state ---------------------------------------------


def _page(n: int, minutes: int, kind: str) -> Page:
    from pagedctx.pages import ConsolidatedPage, Origin, OriginalPage

    stamp = START + timedelta(minutes=minutes)
    if kind == "merged":
        return ConsolidatedPage(id=f"{n:08x}", depth=0, timestamp=stamp, summary="s", source_ids=(),
                                origin=Origin.HISTORY)  # fmt: skip
    origin = Origin.STORAGE if kind == "file" else Origin.HISTORY
    return OriginalPage(id=f"{n:08x}", depth=0, timestamp=stamp, summary="s", content="c", origin=origin,
                        draft=kind == "draft")  # fmt: skip


_EDITS = st.lists(
    st.tuples(
        st.sampled_from(["set", "remove"]),
        st.integers(0, 1),  # which of two sessions
        st.integers(0, 60),  # the page
        st.integers(0, 20),  # minutes: ties are broken by id
        st.sampled_from(["turn", "turn", "draft", "merged", "file"]),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(edits=_EDITS)
def test_the_history_order_and_paged_blocks_kept_from_state_to_state_are_those_built_afresh(
    edits: list[tuple[str, int, int, int, str]],
) -> None:
    """`history_order` and `paged_blocks` (host/roles/history_order.py) brought up to date by what
    changed equal sorting (gathering) the pages of each state afresh, through pages added,
    replaced (another time, a draft made a turn), removed, and two sessions' states in turn."""
    from types import SimpleNamespace
    from typing import cast

    from pagedctx.host.roles.history_order import HistoryOrder, history_order, paged_blocks
    from pagedctx.pages import SessionState, handle_for
    from pagedctx.pages.pmap import PMap

    first = _page(1000, 0, "turn")
    sessions: list[PMap[str, Page]] = [PMap.adopt({"a-first": first}), PMap.adopt({"b-first": first})]
    for action, which, n, minutes, kind in edits:
        pages = sessions[which]
        key = f"{'ab'[which]}{n:03d}"
        if action == "set":
            page = _page(n, minutes, kind)
            block = handle_for(f"block {minutes % 5}") if kind != "merged" else None  # shared by pages too
            pages = pages.set(key, page.model_copy(update={"id": f"{n + 1:08x}", "pblock": block}))
        elif key in pages:
            pages = pages.remove_many([key])
        sessions[which] = pages
        kept = history_order(cast(SessionState, SimpleNamespace(pages=pages)))
        fresh = HistoryOrder.of(pages)
        assert (kept.pages, kept.turns) == (fresh.pages, fresh.turns)
        assert kept.newest_first == [pid for _, pid in reversed(fresh.pages)]
        assert kept.position == {pid: i for i, (_, pid) in enumerate(fresh.turns)}
        assert (kept.turn_ids, kept.said) == (fresh.turn_ids, fresh.said)  # carried over when appended
        for within in (timedelta(minutes=2), timedelta(0)):
            assert kept.sitting_starts(within) == fresh.sitting_starts(within)
        state = cast(SessionState, SimpleNamespace(pages=pages))
        assert set(paged_blocks(state)) == {p.pblock for p in pages.values() if p.pblock is not None}


def test_a_document_checked_here_is_not_validated_again_and_another_still_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The view the host checked is parsed by a role in this process without a second schema
    validation (the same bytes, by digest); any other document still is validated and refused."""
    from pagedctx.errors import ContextFormatError
    from pagedctx.protocol.paged_context import parse

    engine = _engine(tmp_path / "s.db", warm=0)
    with Session(engine, "t.s") as session:
        session.add_turns(_turns(random.Random(5), 0, 6))
        xml = session.ask("the garden hose?", budget=1500).xml
    monkeypatch.setattr(parse, "validation_errors", lambda root: pytest.fail("validated again"))
    assert parse.parse_tree(xml) is not None
    monkeypatch.undo()
    broken = xml.replace("<Query>", "<Query><Bogus/>", 1)
    with pytest.raises(ContextFormatError, match="schema"):
        parse.parse_tree(broken)


def test_a_registry_read_while_a_save_lands_is_read_again_not_torn(tmp_path: Path) -> None:
    """A merge reads the registry without the session's lock; a save landing between its reads
    of pages and views used to give a state of two saves (refused as broken). It is read again."""
    store = SqliteStore(str(tmp_path / "s.db"))
    with Session(_engine(tmp_path / "s.db", warm=0), "s") as session:
        session.add_turns(_turns(random.Random(2), 0, 8))
        session.ask("the cello lessons?", budget=1500)
    writer = SessionRegistry(store, "s")
    before = writer.load()
    from pages_factory import ok, original

    from pagedctx.pages import add_pages

    after = ok(add_pages(before, [original(999)]))  # a save with one page more: pages and views change

    class Interleaved:
        """The store, with a save landing right after the reader took the pages."""

        def __init__(self) -> None:
            self.landed = False

        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

        def hgetall(self, key: str) -> dict[str, str]:
            got = store.hgetall(key)
            if key.endswith("/pages") and not self.landed:
                self.landed = True
                writer.save(after)
            return got

    reader = SessionRegistry(Interleaved(), "s")  # type: ignore[arg-type]
    read = reader.load()
    assert set(read.pages) == set(after.pages) == set(read.views)
    store.close()


def test_one_token_counter_serves_many_threads() -> None:
    """A server's threads share its engine's counter; its LRU evicting under them raised KeyError
    and 'OrderedDict mutated during iteration' (500s in bench/serve.py). Counts stay exact."""
    import threading

    from pagedctx.protocol.tokens import CachedCounter

    counter = CachedCounter("words", lambda text: len(text.split()), max_entries=8)
    failures: list[BaseException] = []

    def count(seed: int) -> None:
        try:
            for i in range(4000):
                words = (seed * 7 + i) % 23 + 1
                assert counter.count(" ".join(["w"] * words)) == words
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=count, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:1]
    assert counter.hits + counter.misses == 8 * 4000
