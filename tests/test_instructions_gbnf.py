"""The worker's output grammar in GBNF (P5, P9, M2; issue 32): valid llama.cpp GBNF, sound (every
string it accepts parses, and the envelope validates) and complete enough (typical output matches).

`gbnf_support` reads GBNF as llama.cpp's parser does, decides membership and samples strings.
"""

from __future__ import annotations

import json
import random

import pytest
from gbnf_support import GbnfError, Grammar, read_gbnf
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedctx.host.modules import load_module
from pagedctx.protocol.worker.gbnf import (
    MAX_ACTIONS,
    TEXT_CHARS,
    gbnf_class,
    gbnf_literal,
    gbnf_repeat,
    instructions_gbnf,
    worker_envelope_gbnf,
)
from pagedctx.protocol.worker.instructions import (
    Consult,
    Explore,
    Shelve,
    format_instruction,
    parse_instructions,
    parse_worker_output,
)

CALLS = read_gbnf(instructions_gbnf())
ENVELOPE = read_gbnf(worker_envelope_gbnf())
WORKER = load_module("worker")
META = {"confidence": 0.8, "risk": "low", "explain": "needs the retry code"}


def test_the_grammars_are_gbnf_llama_cpp_reads() -> None:
    """Issue 32: the text parses as llama.cpp's parser does (no unknown escape, every rule defined,
    names of letters, digits and '-'), in the oldest GBNF: no {m,n}, no '.'."""
    for text in (instructions_gbnf(), worker_envelope_gbnf()):
        assert read_gbnf(text).rules["root"]
        assert "{" not in text.replace('"{"', "").replace('"}"', "")
        assert all(line.split(" ::= ")[0].replace("-", "").isalnum() for line in text.splitlines())


def test_the_reader_refuses_what_took_the_server_down() -> None:
    """Issue 32: the `\\s` a regex pattern left in a grammar is an unknown escape to llama.cpp."""
    with pytest.raises(GbnfError, match="unknown escape"):
        read_gbnf("root ::= [^,\\s]+\n")
    with pytest.raises(GbnfError, match="Undefined rule"):
        read_gbnf("root ::= missing\n")
    with pytest.raises(GbnfError, match="expecting ::="):
        read_gbnf('root ::= "a"\nrule_x ::= "a"\n')  # no '_' in a rule name


def test_builders_escape_and_repeat() -> None:
    """Issue 32: literals and classes escape what GBNF would misread; bounded repetition is spelled out."""
    assert gbnf_literal('a"b\\c\n') == '"a\\"b\\\\c\\x0A"'
    assert gbnf_class([(0x22, 0x22), (0x61, 0x63), (0x3000, 0x3000)], negate=True) == "[^\\x22a-c\\u3000]"
    assert gbnf_repeat("x", 2, 4) == "x x (x (x)?)?"
    assert gbnf_repeat("x", 0, None) == "x*"
    grammar = read_gbnf(f"root ::= {gbnf_repeat('[a]', 2, 4)}\n")
    assert [grammar.matches("a" * n) for n in range(6)] == [False, False, True, True, True, False]


def _sampled(grammar: Grammar, seed: int, more: float) -> str:
    text = grammar.sample(random.Random(seed), more)
    assert grammar.matches(text), text
    return text


@settings(max_examples=40)
@given(st.integers(0, 2**32), st.floats(0.05, 0.95))
def test_every_call_the_grammar_accepts_parses(seed: int, more: float) -> None:
    """P9, issue 32: the grammar is a subset of the parser's language (no Bus Fault from any string
    it accepts: sampled ones of every length, up to `MAX_ACTIONS` instructions)."""
    text = _sampled(CALLS, seed, more)
    assert 1 <= len(parse_instructions(text)) <= MAX_ACTIONS


@settings(max_examples=60)
@given(st.integers(0, 2**32), st.floats(0.05, 0.95))
def test_every_envelope_the_grammar_accepts_parses_and_validates(seed: int, more: float) -> None:
    """P9/M2, issue 32: a sampled envelope parses, and the worker module's full schema and the
    v2.2 envelope rules hold, but for keywords repeated in one Explore (no grammar can forbid it)."""
    text = _sampled(ENVELOPE, seed, more)
    output = parse_worker_output(text)
    assert output.actions or output.answer
    violations = WORKER.validate(json.loads(text))
    assert {v.rule for v in violations} <= {"schema.data.uniqueItems"}, violations


# Typical output: what a model writes, what format_instruction writes, the docs' examples.
reasons = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=TEXT_CHARS).filter(
    lambda r: not r[0].isspace()
)
ids = st.text("0123456789abcdef", min_size=4, max_size=64)
keywords = st.lists(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_. /-]{0,30}[A-Za-z0-9_]|[A-Za-z]", fullmatch=True),
    min_size=1,
    max_size=32,
)
instructions = st.one_of(
    st.builds(Consult, reason=reasons, id=ids),
    st.builds(Shelve, reason=reasons, id=ids),
    st.builds(Explore, reason=reasons, handle=ids.map(lambda i: f"pb:{i}"), keywords=keywords),
)


@settings(max_examples=60)
@given(st.lists(instructions, min_size=1, max_size=MAX_ACTIONS), st.sampled_from(["; ", ";", "\n", ";\n"]))
def test_typical_calls_match_the_grammar(program: list[Consult | Explore | Shelve], sep: str) -> None:
    """Issue 32: format_instruction's output, joined as a model joins instructions, is in the grammar."""
    text = sep.join(format_instruction(i) for i in program)
    assert CALLS.matches(text), text
    assert parse_instructions(text) == program


@pytest.mark.parametrize(
    "text",
    [
        'Consult("The summary does not show which retry policy applies", f1a2b3c4)',
        'Explore("Need the timeout handling", pb:0a1b2c3d, ["timeout", "retry"]); '
        'Shelve("Parser detail", "b2c3d4e5")',
        'Consult(reason="Unpack the module summary", id=c3d4e5f6)',
        'Explore("Find the cache key", handle="pb:0a1b2c3d", keywords=["cache key", "hash"])',
        'Consult("why",abcd)\nShelve("done", abcd)',
    ],
)
def test_the_docs_forms_match_the_grammar(text: str) -> None:
    """P5, issue 32: docs/instructions.md's examples (in the grammar's subset) match and parse."""
    assert CALLS.matches(text) and parse_instructions(text)


@pytest.mark.parametrize(
    "text",
    [
        'Consult("", f1a2b3c4)',  # an empty reason
        'Consult(" why", f1a2b3c4)',  # blank at the start: the grammar keeps reasons non-blank
        'Consult("why", F1A2)',  # ids are lowercase hex
        'Consult("why", f1a)',  # at least 4 digits
        'Consult("why", f1a2);',  # a trailing ';'
        'Explore("why", pb:0a1b, [])',  # at least one keyword
        'Explore("why", pb:0a1b, ["a,b"])',  # no comma in a keyword
        'Consult(id=f1a2, "why")',  # no positional argument after a keyword argument
        'Consult("why\\ud800", f1a2)',  # a lone surrogate
    ],
)
def test_the_grammar_refuses_what_the_parser_refuses(text: str) -> None:
    """P9, issue 32: Bus Faults (and blank-led reasons) are outside the grammar."""
    assert not CALLS.matches(text)


@settings(max_examples=60)
@given(
    st.lists(instructions, max_size=MAX_ACTIONS),
    reasons.filter(lambda r: r.strip()),
    st.booleans(),
    st.booleans(),
)
def test_typical_envelopes_match_the_grammar(
    actions: list[Consult | Explore | Shelve], answer: str, answered: bool, compact: bool
) -> None:
    """Issue 32: json.dumps of an envelope a worker writes (acting, answering, or both) is in the grammar."""
    if not actions and not answered:
        answered = True
    data = {
        "actions": [a.model_dump(mode="json") for a in actions],
        "answer": answer if answered else None,
        "rationale": "page f1a2 holds the port",
    }
    separators = (",", ":") if compact else (", ", ": ")
    for ascii_only in (True, False):
        text = json.dumps(
            {"ok": True, "meta": META, "data": data}, separators=separators, ensure_ascii=ascii_only
        )
        assert ENVELOPE.matches(text), text
        assert parse_worker_output(text).actions == tuple(actions)


def test_an_envelope_without_action_or_answer_is_outside_the_grammar() -> None:
    """M2 (the worker schema's anyOf): a step acts or answers; a decline is not in the grammar."""
    empty = {"ok": True, "meta": META, "data": {"actions": [], "answer": None, "rationale": "r"}}
    declined = {"ok": False, "meta": META, "error": {"code": "NEEDS_CLARIFICATION", "message": "?"}}
    assert not ENVELOPE.matches(json.dumps(empty)) and not ENVELOPE.matches(json.dumps(declined))


def test_the_grammar_keeps_the_worker_schema_limits() -> None:
    """The grammar's action count is the worker module's `maxItems` (configs/modules/worker)."""
    assert WORKER.schema["data"]["properties"]["actions"]["maxItems"] == MAX_ACTIONS
