"""Issue 13 items 9, 12 and 14: ordinary and untrusted input that used to end in a traceback.

- Item 9: an intent or Explore keywords with no search term after stop words (S5, P8, P16).
- Item 12: lone surrogates at every door (argv, model answers, worker output; P9, M2), the worker
  parser and the envelope reader sharing one strict JSON rule (duplicate keys refused), and the
  trace writer never failing on text (D3).
- Item 14: keywords and summaries of bounded size, content kept whole (P1, P4, P12).

Real parts throughout: the CLI in process (and once as a real process, for argv bytes), a real
SQLite index over a real repository, real dialogue files, the scripted model backend.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import BusFault
from pagedctx.host.blocks.base import ProviderSet, materialize
from pagedctx.host.blocks.code import CodeProvider
from pagedctx.host.blocks.dialogue import DialogueProvider
from pagedctx.host.blocks.document import DocumentProvider
from pagedctx.host.ingest.index import Index
from pagedctx.host.records.trace import RoundEvent, TraceWriter, read_trace
from pagedctx.host.roles.router import focus_terms
from pagedctx.host.select.explore import explore_code
from pagedctx.host.session.bus import apply_actions
from pagedctx.host.store.url import open_store
from pagedctx.host.text.expanded_search import ExpandedSearch
from pagedctx.host.text.intent import Intent
from pagedctx.host.text.page_search import PageSearch
from pagedctx.host.text.terms import terms
from pagedctx.pages import Origin, OriginalPage, SessionState, View
from pagedctx.pages.model import (
    MAX_KEYWORD_LENGTH,
    MAX_PAGE_KEYWORDS,
    MAX_SUMMARY_CHARS,
    SUMMARY_CUT,
    bound_summary,
    clean_keyword,
)
from pagedctx.pages.moves import add_pages
from pagedctx.pages.state import Transition
from pagedctx.protocol.modules.envelope import parse_envelope_json
from pagedctx.protocol.paged_context.parse import parse_document
from pagedctx.protocol.text import clean_text
from pagedctx.protocol.tokens import token_counter
from pagedctx.protocol.worker.instructions import Consult, Explore, Shelve, WorkerOutput, parse_worker_output

T0 = datetime(2026, 11, 1, tzinfo=UTC)
META = {"confidence": 0.9, "risk": "low", "explain": "x"}
CALC = '''\
def add(a, b):
    """Sum two numbers."""
    return a + b


def sub(a, b):
    return a - b


def total(xs):
    s = 0
    for x in xs:
        s = add(s, x)
    return s
'''
TEXT = '''\
def join_words(words):
    """Join words with spaces."""
    return " ".join(words)


def split_words(text):
    return text.split()


def shout(text):
    return text.upper() + "!"
'''
NO_TERMS = ["the", "??", "\U0001f642", "the of and"]


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "util").mkdir(parents=True)
    (root / "calc.py").write_text(CALC)
    (root / "util" / "text.py").write_text(TEXT)
    return root


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


def write_dialogue(path: Path, texts: list[str]) -> Path:
    lines = [
        json.dumps({"id": f"t{i}", "speaker": "user", "text": text, "timestamp": f"2025-03-01T09:0{i}:00Z"})
        for i, text in enumerate(texts)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------------------------------
# Item 9: no search term after stop words
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("intent", ["add", "fix the add function"])
def test_select_ranks_a_stop_word_intent_by_the_name_it_spells(repo: Path, store: str, intent: str) -> None:
    """Issue 13 item 9, S5: `add` is a BM25 stop word, yet the chunk named `add` is found by its name."""
    code, out, err = cli("select", "--repo", str(repo), "--store", store, "--intent", intent)
    assert code == 0, err
    chunks = json.loads(out)["chunks"]
    best = max(chunks, key=lambda c: c["score"])
    assert best["id"] == "calc.py::add"
    assert not any(c["path"].startswith("util/") for c in chunks), "nothing named or related there"


@pytest.mark.parametrize("intent", NO_TERMS)
def test_select_says_when_the_intent_has_no_searchable_word(repo: Path, store: str, intent: str) -> None:
    """Issue 13 item 9, S5: no term and no name: a UsageError (exit 2) saying so, no traceback."""
    code, out, err = cli("select", "--repo", str(repo), "--store", store, "--intent", intent)
    assert code == 2 and out == ""
    assert "has no searchable word" in err and "names no function, class or file" in err
    assert "Traceback" not in err


def test_run_repo_with_stop_word_intents(repo: Path, store: str) -> None:
    """Issue 13 item 9, S5 + P8: `run --repo` selects by name, or exits 2 with the same message."""
    base = ["run", "--runtime", "inproc", "--repo", str(repo), "--store", store, "--budget", "2000"]
    code, out, err = cli(*base, "--intent", "fix the add function")
    assert code == 0, err
    assert "def add(a, b):" in out
    code, out, err = cli(*base, "--intent", "the")
    assert code == 2 and "has no searchable word" in err and "Traceback" not in err


def test_a_chat_turn_without_terms_selects_no_code_but_runs(repo: Path, store: str, tmp_path: Path) -> None:
    """Issue 13 item 9, P13: with a dialogue beside the repository, "and then?" is a chat turn:
    no code is selected for it and the session runs (the repository stays addressable)."""
    dialogue = write_dialogue(tmp_path / "d.jsonl", ["Why does add subtract?", "It uses a - b by mistake."])
    base = ["run", "--runtime", "inproc", "--repo", str(repo), "--store", store, "--budget", "2000"]
    code, out, err = cli(*base, "--dialogue", str(dialogue), "--intent", "and then?")
    assert code == 0, err
    assert out.startswith("<PagedContext") and "It uses a - b by mistake." in out


@pytest.mark.parametrize("intent", ["the", "add", "fix the add function", "??", "\U0001f642"])
def test_session_router_takes_intents_without_terms(tmp_path: Path, intent: str) -> None:
    """Issue 13 item 9, P8: the session router's BM25 (plain and WordNet-widened) answers an empty
    query with nothing rather than failing; a dialogue run ends normally."""
    dialogue = write_dialogue(
        tmp_path / "d.jsonl",
        ["Why is 0 refused by the parser?", "Because parse_port checks port > 0.", "Add a test for it."],
    )
    code, out, err = cli(
        "run", "--runtime", "inproc", "--dialogue", str(dialogue), "--intent", intent, "--budget", "2000"
    )
    assert code == 0, err
    assert out.startswith("<PagedContext")
    assert focus_terms(Intent.of(intent)) == []
    expanded = ExpandedSearch()
    expanded.set_query(intent)
    for search in (PageSearch(), expanded):
        search.add("p1", terms("Why is 0 refused by the parser?"))
        assert search.top(focus_terms(Intent.of(intent)), 5) == [] and search.scores([]) == {}


def test_explore_finds_a_stop_word_name_or_says_it_searched_nothing(repo: Path, store: str) -> None:
    """Issue 13 item 9, P16: Explore(["add"]) materializes the chunk `add` (a stop word, found by
    name); keywords with no searchable word are a fault saying so, for code and prose blocks alike."""
    index = Index(open_store(store))
    index.update([str(repo)])
    found = explore_code(index, CodeProvider(index).roots()[0].handle, ["add"])
    assert [hit.qualname for hit in found.hits] == ["add"] and found.hits[0].score == 1.0
    code = CodeProvider(index)
    doc = DocumentProvider.from_text(
        "guide.md", "# Guide\n\nThe port is 6543.\n", token_counter(None), timestamp=T0
    )
    blocks = ProviderSet([code, doc])
    root = code.roots()[0].handle
    outcome = apply_actions(
        SessionState(), [Explore(reason="find it", handle=root, keywords=("add",))], blocks
    )
    assert outcome.applied and len(outcome.materialized) == 1
    page = outcome.state.pages[outcome.materialized[0]]
    assert isinstance(page, OriginalPage) and page.content.startswith("def add(a, b):")
    for handle in (root, doc.roots()[0].handle):
        refused = apply_actions(
            SessionState(), [Explore(reason="look", handle=handle, keywords=("the", "of"))], blocks
        )
        assert not refused.applied and refused.fault is not None
        assert refused.fault.code == "USAGE_ERROR" and "no searchable word" in refused.fault.message


# --------------------------------------------------------------------------------------------------
# Item 12: lone surrogates, one JSON rule, errors that are Bus Faults
# --------------------------------------------------------------------------------------------------


def test_clean_text_replaces_lone_surrogates() -> None:
    """Issue 13 item 12: free text from argv becomes Unicode text (U+FFFD per bad byte, pairs joined)."""
    assert clean_text("why \udcff refused") == "why \ufffd refused"
    assert clean_text("\ud800x\udc00") == "\ufffdx\ufffd"
    assert clean_text("\ud83d\ude00") == "\U0001f600"
    text = "caf\u00e9 \U0001f642"
    assert clean_text(text) is text


def test_invalid_utf8_intent_on_the_command_line(tmp_path: Path, repo: Path, store: str) -> None:
    """Issue 13 item 12, D3: bytes that are not UTF-8 in `--intent` (a real process, real argv) give
    U+FFFD in the query and the trace; `run --trace` and `select` end normally."""
    dialogue = write_dialogue(tmp_path / "d.jsonl", ["Why is 0 refused?", "parse_port checks port > 0."])
    trace = tmp_path / "trace.jsonl"
    script = os.fsencode(Path(sys.executable).parent / "pagedctx")
    run_args = [b"run", b"--runtime", b"inproc", b"--dialogue", os.fsencode(dialogue)]
    run_args += [b"--trace", os.fsencode(trace), b"--intent", b"why \xff refused"]
    run = subprocess.run([script, *run_args], capture_output=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr.decode("utf-8", "replace")
    assert "<Query>why \ufffd refused</Query>" in run.stdout.decode("utf-8")
    events = list(read_trace(trace))
    assert events and all(e.input == e.intent == "why \ufffd refused" for e in events)
    select_args = [b"select", b"--repo", os.fsencode(repo), b"--store", store.encode()]
    select_args += [b"--intent", b"add \xff"]
    select = subprocess.run([script, *select_args], capture_output=True, timeout=120, check=False)
    assert select.returncode == 0, select.stderr.decode("utf-8", "replace")
    assert json.loads(select.stdout)["chunks"][0]["qualname"] == "add"


def test_trace_writer_records_lone_surrogates_losslessly(tmp_path: Path) -> None:
    """Issue 13 item 12, D3: raw worker output holding lone surrogates is written (as JSON escapes,
    valid UTF-8) and reads back to the very same strings; valid text is written as before."""
    event = RoundEvent(
        session="s1",
        round=0,
        time=T0,
        policy="baseline",
        input="in \udcff",
        intent="in \udcff",
        xml_sha256="0" * 64,
        xml_tokens=1,
        budget=100,
        worker_output='Consult("why \ud800", abcd) \\ \\ud800',
        answer="a\udfff",
        state_digest="0" * 64,
    )
    path = tmp_path / "t.jsonl"
    writer = TraceWriter(path)
    writer.append(event)
    plain = event.model_copy(
        update={"input": "caf\u00e9", "intent": "x", "worker_output": "", "answer": None}
    )
    writer.append(plain)
    raw = path.read_bytes()
    raw.decode("utf-8")  # strict: the file is UTF-8
    assert raw.splitlines()[1].decode("utf-8") == plain.model_dump_json()
    assert list(read_trace(path)) == [event, plain]


def test_dialogue_files_that_are_not_unicode_text_are_refused(tmp_path: Path) -> None:
    """Issue 13 item 12, P2: a dialogue line spelling a lone surrogate, or bytes that are not UTF-8,
    is an InputFormatError naming file and line (exit 2), never a crash later in the trace."""
    good = json.dumps({"id": "t0", "speaker": "user", "text": "hi", "timestamp": "2025-03-01T09:00:00Z"})
    spelled = tmp_path / "spelled.jsonl"
    spelled.write_text(good + "\n" + good.replace('"t0"', '"t1"').replace('"hi"', '"x \\ud800"') + "\n")
    raw = tmp_path / "raw.jsonl"
    raw.write_bytes(
        good.encode() + b"\n" + good.replace('"t0"', '"t1"').encode().replace(b"hi", b"\xff") + b"\n"
    )
    for path, problem in ((spelled, "lone surrogate"), (raw, "not UTF-8")):
        code, _, err = cli(
            "run",
            "--runtime",
            "inproc",
            "--dialogue",
            str(path),
            "--intent",
            "hi",
            "--trace",
            str(tmp_path / "t"),
        )
        assert code == 2 and f"{path.name}, line 2" in err and problem in err, err


def scripted_profile(path: Path, answer: str) -> Path:
    quoted = answer.replace("'", "''")
    path.write_text(
        "runtime: inproc\nmodels:\n  roles:\n    worker:\n      backend: scripted\n      answers:\n"
        f"        - '{quoted}'\n        - '{quoted}'\n"
    )
    return path


def test_model_answer_with_a_lone_surrogate_is_a_fault_step(tmp_path: Path) -> None:
    """Issue 13 item 12, M2 + P9: a model answer spelling `\\ud800` breaks the envelope contract
    (json.lone_surrogate, twice: SCHEMA_VIOLATION); the run records a fault step and its trace."""
    answer = json.dumps(
        {"ok": True, "meta": META, "data": {"actions": [], "answer": "x", "rationale": "r"}}
    ).replace('"x"', '"port \\ud800"')
    profile = scripted_profile(tmp_path / "p.yaml", answer)
    dialogue = write_dialogue(tmp_path / "d.jsonl", ["Which port?", "Port 9090."])
    trace = tmp_path / "t.jsonl"
    args = ["run", "--profile", str(profile), "--dialogue", str(dialogue), "--intent", "which port"]
    code, _, err = cli(*args, "--trace", str(trace), "--max-rounds", "1")
    assert code == 0, err
    events = list(read_trace(trace))
    faults = [f for e in events for f in e.faults]
    assert faults and "json.lone_surrogate" in json.dumps(faults)


def test_worker_parser_refuses_lone_surrogates_anywhere() -> None:
    """Issue 13 item 12, P9: a lone surrogate (escaped or raw) anywhere in an envelope is a Bus Fault
    at its JSON path; the envelope reader reports the same place as json.lone_surrogate."""
    for text in (
        '{"ok": true, "data": {"actions": [], "answer": "a \\ud800"}}',
        '{"ok": true, "data": {"actions": [], "answer": "a \ud800"}}',
    ):
        with pytest.raises(BusFault) as caught:
            parse_worker_output(text)
        assert caught.value.expected == "$.data.answer: valid Unicode text (no lone surrogates)"
        _, found = parse_envelope_json(text)
        assert [(v.path, v.rule) for v in found] == [("$.data.answer", "json.lone_surrogate")]


def test_explore_keyword_string_part_over_100_characters_is_a_bus_fault() -> None:
    """Issue 13 item 12, P9: the comma-separated keyword string of a JSON Explore is checked part by
    part (was a pydantic ValidationError); the CLI exits 3 with the fault."""
    action = {"action": "Explore", "reason": "r", "handle": "pb:abcd", "keywords": "ok, " + "k" * 101}
    text = json.dumps({"ok": True, "data": {"actions": [action], "answer": None}})
    with pytest.raises(BusFault) as caught:
        parse_worker_output(text)
    fault = caught.value
    assert fault.expected == "$.data.actions[0].keywords: a keyword of at most 100 characters"
    assert fault.found == "$.data.actions[0].keywords: 101 characters"
    assert "Valid forms: Consult(reason, id)" in fault.message
    result = CliRunner().invoke(app, ["instructions", "parse"], input=text)
    assert result.exit_code == 3
    assert json.loads(result.stdout)["fault"]["type"] == "BusFault"


def test_repeated_keys_are_refused_by_both_readers() -> None:
    """Issue 13 item 12, P9 + M2: one rule for worker output and `envelope validate`: a repeated key
    is ambiguous and refused, at the JSON path of its object."""
    text = (
        '{"ok": true, "meta": {"confidence": 0.5, "risk": "low", "explain": "x"}, "data": {"actions": '
        '[{"action": "Consult", "reason": "r", "id": "abcd", "id": "beef"}], "answer": null, '
        '"rationale": "r"}}'
    )
    with pytest.raises(BusFault) as caught:
        parse_worker_output(text)
    assert caught.value.expected.startswith("$.data.actions[0]: each key once")
    assert caught.value.found == "$.data.actions[0]: 'id' twice"
    result = CliRunner().invoke(app, ["envelope", "validate"], input=text)
    assert result.exit_code == 1
    rules = {(v["path"], v["rule"]) for v in json.loads(result.stdout)}
    assert ("$.data.actions[0]", "json.duplicate_key") in rules
    top = '{"ok": true, "ok": true, "data": {"actions": [], "answer": null}}'
    with pytest.raises(BusFault, match=r"Bus fault at \$: expected each key once"):
        parse_worker_output(top)


def test_the_readers_agree_on_numbers() -> None:
    """Issue 13 item 12, M2: out-of-range numbers are not JSON for either reader."""
    text = '{"ok": true, "data": {"actions": [], "answer": null, "x": 1e999}}'
    with pytest.raises(BusFault):
        parse_worker_output(text)
    assert [v.rule for v in parse_envelope_json(text)[1]] == ["json.parse"]


# Any text: unicode including lone surrogates, JSON in both escape styles, envelopes whose fields are
# anything (long keyword strings, odd types), and texts with a key repeated.
ANY_CHAR = st.characters(codec=None, categories=None)
ANY_TEXT = st.text(ANY_CHAR, max_size=60)
FIELD_STRINGS = st.one_of(
    ANY_TEXT,
    st.sampled_from(["abcd", "pb:abcd", "Consult", "Explore", "Shelve", "a, b", ""]),
    st.integers(1, 300).map(lambda n: "x, " + "k" * n),
    st.integers(1, 40).map(lambda n: ", ".join(["k"] * n)),
)
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), FIELD_STRINGS)
VALUES = st.recursive(
    LEAVES,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(FIELD_STRINGS, kids, max_size=4),
    max_leaves=12,
)
ACTIONS = st.fixed_dictionaries(
    {"action": st.sampled_from(["Consult", "Explore", "Shelve"]) | FIELD_STRINGS},
    optional={
        "reason": FIELD_STRINGS | VALUES,
        "id": FIELD_STRINGS | VALUES,
        "handle": FIELD_STRINGS | VALUES,
        "keywords": FIELD_STRINGS | st.lists(FIELD_STRINGS, max_size=40) | VALUES,
    },
)
EXPLORES = st.fixed_dictionaries(  # near-valid: only the keywords (or the reason) are odd
    {
        "action": st.just("Explore"),
        "reason": st.just("why") | ANY_TEXT,
        "handle": st.just("pb:abcd"),
        "keywords": FIELD_STRINGS | st.lists(FIELD_STRINGS, max_size=40),
    }
)
ENVELOPES = st.fixed_dictionaries(
    {
        "ok": st.just(True) | VALUES,
        "data": st.fixed_dictionaries(
            {"actions": st.lists(EXPLORES | ACTIONS | VALUES, max_size=3)},
            optional={"answer": FIELD_STRINGS | VALUES},
        ),
    },
    optional={"error": VALUES},
)


@st.composite
def worker_texts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["text", "json", "repeat", "call", "explore"]))
    if kind == "text":
        return draw(ANY_TEXT)
    if kind == "call":
        return f"Explore({json.dumps(draw(ANY_TEXT))}, pb:abcd, {json.dumps(draw(FIELD_STRINGS))})"
    if kind == "explore":  # a well-formed envelope but for one field: the keywords or the answer
        data = {"actions": draw(st.lists(EXPLORES, max_size=2)), "answer": draw(FIELD_STRINGS)}
        value: object = {"ok": True, "data": data}
    else:
        value = draw(ENVELOPES | VALUES)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    if kind == "repeat" and text.startswith("{") and len(text) > 2:
        return text[:-1] + ', "ok": true}'
    return text


@settings(max_examples=800)
@given(worker_texts())
def test_worker_parser_returns_instructions_or_a_bus_fault(text: str) -> None:
    """Issue 13 item 12, P9: for any text (lone surrogates, any JSON, repeated keys, long keyword
    strings) the worker parser returns instructions or raises BusFault, never anything else; what it
    returns is valid Unicode text."""
    try:
        output = parse_worker_output(text)
    except BusFault as fault:
        assert fault.to_dict()["type"] == "BusFault"
        json.dumps(fault.to_dict(), ensure_ascii=True)
    else:
        assert isinstance(output, WorkerOutput)
        assert all(isinstance(a, Consult | Explore | Shelve) for a in output.actions)
        json.dumps(output.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")


@settings(max_examples=500)
@given(worker_texts())
def test_envelope_reader_never_raises(text: str) -> None:
    """Issue 13 item 12, M2: the envelope reader answers any text with a value and json.* violations."""
    value, found = parse_envelope_json(text)
    assert {v.rule for v in found} <= {"json.parse", "json.duplicate_key", "json.lone_surrogate"}
    if any(v.rule == "json.parse" for v in found):
        assert value is None and len(found) == 1


# --------------------------------------------------------------------------------------------------
# Item 14: bounded keywords and summaries, whole content
# --------------------------------------------------------------------------------------------------


def test_keywords_are_cut_and_bounded() -> None:
    """Issue 13 item 14, P1 + P6: a keyword is at most 64 characters and a page has at most 16."""
    assert clean_keyword(" " + "x" * 1_000_000) == "x" * MAX_KEYWORD_LENGTH
    assert clean_keyword("a" * 63 + " b") == "a" * 63  # cut, then trimmed
    page = {
        "id": "abcd",
        "depth": 0,
        "timestamp": T0,
        "summary": "s",
        "origin": Origin.HISTORY,
        "content": "c",
    }
    with pytest.raises(ValidationError, match="more than 64"):
        OriginalPage(**page, keywords=("y" * 65,))
    with pytest.raises(ValidationError, match="at most 16 keywords"):
        OriginalPage(**page, keywords=tuple(f"k{i}" for i in range(MAX_PAGE_KEYWORDS + 1)))


def test_a_summary_is_cut_with_a_marker_and_the_content_kept_whole() -> None:
    """Issue 13 item 14, P1: a summary over the bound is cut at a word and marked; content is verbatim."""
    blob = "word " * 300_000
    page = OriginalPage(id="abcd", depth=0, timestamp=T0, summary=blob, origin=Origin.HISTORY, content=blob)
    assert len(page.summary) <= MAX_SUMMARY_CHARS and page.summary.endswith("word" + SUMMARY_CUT)
    assert page.content == blob
    assert page.model_validate(page.model_dump()) == page  # bounding twice changes nothing


@given(st.text(max_size=3000), st.integers(2, 2500))
def test_bound_summary_is_a_marked_prefix(text: str, limit: int) -> None:
    """Issue 13 item 14, P1: at most `limit` characters, idempotent, a prefix of the text when cut."""
    cut = bound_summary(text, limit)
    assert len(cut) <= limit and bound_summary(cut, limit) == cut
    assert cut == text or (cut.endswith(SUMMARY_CUT) and text.startswith(cut[: -len(SUMMARY_CUT)]))


def test_a_megabyte_one_word_turn_keeps_small_pages(tmp_path: Path) -> None:
    """Issue 13 item 14, P1: the turn's page keeps its megabyte of content and gets a small summary
    and small keywords (before: a 1 MB keyword and a 1 MB `[mentions ...]` summary)."""
    blob = "invoice_" + "ab1" * 333_333
    dialogue = write_dialogue(tmp_path / "d.jsonl", ["Noted.", blob])
    provider = DialogueProvider.from_jsonl(dialogue, token_counter(None))
    big = next(p for p in provider.children(provider.root) if p.content.endswith(blob))  # "user: " first
    page = materialize(big, taken=set(), depth=0)
    assert isinstance(page, OriginalPage) and page.content == f"user: {blob}"
    assert len(page.summary) <= 200 and all(len(k) <= MAX_KEYWORD_LENGTH for k in page.keywords)
    root = provider.piece(provider.root)
    assert root is not None and all(len(k) <= MAX_KEYWORD_LENGTH for k in root.keywords)
    assert isinstance(add_pages(SessionState(), [page]), Transition)


def test_a_megabyte_turn_does_not_push_the_relevant_turn_out(tmp_path: Path) -> None:
    """Issue 13 item 14, P4 + P12: `run --dialogue F --budget 2000` with a 1 MB one-word turn shows
    the relevant turn in full and answers from it; no Summary and no keyword exceeds its bound."""
    relevant = "The invoice number for the Lisbon hotel is INV-4471, paid by card."
    dialogue = write_dialogue(
        tmp_path / "d.jsonl", [relevant, "Noted.", "invoice_" + "ab1" * 333_333, "Noted."]
    )
    code, out, err = cli(
        "run",
        "--runtime",
        "inproc",
        "--dialogue",
        str(dialogue),
        "--intent",
        "what is the invoice number for the Lisbon hotel",
        "--budget",
        "2000",
    )
    assert code == 0, err
    shown = [n for n in parse_document(out).flow for n in (n, *n.children)]  # the dense form (issue 19)
    assert any(n.view is View.DETAIL and (n.content or "").endswith(relevant) for n in shown)
    assert "INV-4471" in err.split("answer:", 1)[1]
    summaries = [n.summary for n in shown if n.summary]  # the latest turns may have given way (issue 19)
    provider = DialogueProvider.from_jsonl(dialogue, token_counter(None))
    summaries += [piece.summary for piece in provider.children(provider.root)]
    assert any(s.startswith("user: invoice_ab1") for s in summaries)  # the megabyte turn's, cut
    assert all(len(s) <= MAX_SUMMARY_CHARS for s in summaries)
    keywords = [k for attr in re.findall(r' keywords="([^"]*)"', out) for k in attr.split(", ")]
    assert all(len(k) <= MAX_KEYWORD_LENGTH for k in keywords)
