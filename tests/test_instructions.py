"""The worker instruction grammar (P5, P9; seed 002 section 7.3): parser, JSON forms, CLI, properties.

Exact assertions: parsed models by equality, faults by line, column, expected and found.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import BusFault, FailCode, SourcePosition
from pagedctx.protocol.worker.instructions import (
    VALID_FORMS,
    Consult,
    Explore,
    Instruction,
    Shelve,
    WorkerOutput,
    format_instruction,
    instructions_from_json,
    parse_instructions,
    parse_worker_output,
)

AN_INSTRUCTION = "an instruction: Consult(...), Explore(...) or Shelve(...)"
PAGE_ID_RULE = "a page id of 4 to 64 lowercase hex digits (e.g. f1a2b3c4)"
HANDLE_RULE = "a PBlock handle: 'pb:' and 4 to 64 lowercase hex digits (e.g. pb:0a1b2c3d)"


def fault_of(text: str) -> BusFault:
    with pytest.raises(BusFault) as caught:
        parse_instructions(text)
    return caught.value


# --------------------------------------------------------------------------------------------------
# Call syntax: valid inputs
# --------------------------------------------------------------------------------------------------


def test_consult_with_quoted_and_bare_ids() -> None:
    """P5: Consult(reason, id) with the id quoted or bare (seed 002 section 7.3)."""
    assert parse_instructions('Consult("need the evidence", "f1a2b3c4")') == [
        Consult(reason="need the evidence", id="f1a2b3c4")
    ]
    assert parse_instructions("Consult('why', f1a2b3c4)") == [Consult(reason="why", id="f1a2b3c4")]


def test_explore_keywords_as_list_or_comma_string() -> None:
    """P5: Explore(reason, handle, keywords); keywords a list or one comma-separated string."""
    expected = [Explore(reason="find it", handle="pb:0a1b2c3d", keywords=("retry", "parser"))]
    assert parse_instructions('Explore("find it", pb:0a1b2c3d, ["retry", "parser"])') == expected
    assert parse_instructions('Explore("find it", "pb:0a1b2c3d", " retry ,, parser, ")') == expected
    assert parse_instructions("Explore('find it', pb:0a1b2c3d, [' retry', 'parser ',])") == expected


def test_several_instructions_and_separators() -> None:
    """P9: instructions are separated by ';', newlines or plain whitespace (or nothing)."""
    text = (
        ' \n Consult("a", abcd);Shelve("b", 0123)\n\nExplore("c", pb:beef, ["k"])'
        '  Shelve("d",ffff)Consult("e",eeee) \n'
    )
    assert parse_instructions(text) == [
        Consult(reason="a", id="abcd"),
        Shelve(reason="b", id="0123"),
        Explore(reason="c", handle="pb:beef", keywords=("k",)),
        Shelve(reason="d", id="ffff"),
        Consult(reason="e", id="eeee"),
    ]


def test_keyword_arguments_and_trailing_commas() -> None:
    """P9: arguments by name in any order after the positional ones; a trailing comma is allowed."""
    assert parse_instructions('Consult(id = abcd, reason = "r",)') == [Consult(reason="r", id="abcd")]
    assert parse_instructions('Explore( "r" , keywords=["k"] , handle=pb:abcd , )') == [
        Explore(reason="r", handle="pb:abcd", keywords=("k",))
    ]
    assert parse_instructions('Shelve\n(\n  "r",\n  id="abcd"\n)') == [Shelve(reason="r", id="abcd")]


def test_string_escapes() -> None:
    """P9: JSON escapes in both quote styles, \\' only in single quotes, surrogate pairs joined."""
    text = r'Consult("q\" b\\ s\/ \b\f\n\r\t \u00e9 \ud83d\ude00 )", abcd)'
    assert parse_instructions(text) == [Consult(reason='q" b\\ s/ \b\f\n\r\t é 😀 )', id="abcd")]
    assert parse_instructions(r"Shelve('it\'s \"x\"', abcd)") == [Shelve(reason='it\'s "x"', id="abcd")]
    assert parse_instructions('Shelve("日本語, (ok)", abcd)') == [Shelve(reason="日本語, (ok)", id="abcd")]


def test_reason_is_kept_verbatim_and_keywords_are_stripped() -> None:
    """P5: the reason is stored as written; keywords are stored stripped."""
    parsed = parse_instructions('Explore("  why  ", pb:abcd, ["  a b  "])')
    assert parsed == [Explore(reason="  why  ", handle="pb:abcd", keywords=("a b",))]


# --------------------------------------------------------------------------------------------------
# Call syntax: Bus Faults
# --------------------------------------------------------------------------------------------------

FAULTS = [
    ("", 1, 1, AN_INSTRUCTION, "end of input"),
    ("  \n\t ", 2, 3, AN_INSTRUCTION, "end of input"),
    ("```\nConsult('a', abcd)\n```", 1, 1, AN_INSTRUCTION, "'```'"),
    ('consult("a", abcd)', 1, 1, "one of Consult, Explore, Shelve (case-sensitive)", "'consult'"),
    ('Consult "a", abcd)', 1, 9, "'(' after Consult", "'\"a\", abcd)'"),
    ("Consult()", 1, 9, "a quoted string (the reason)", "')'"),
    ("Consult(reason, id)", 1, 9, "a quoted string (the reason)", "'reason, id)'"),
    ('Consult("a" abcd)', 1, 13, "',' or ')'", "'abcd)'"),
    ('Consult("a")', 1, 12, "argument 'id' of Consult(reason, id)", "')'"),
    ('Consult("a",)', 1, 13, "argument 'id' of Consult(reason, id)", "')'"),
    ('Consult("a", abcd, "x")', 1, 20, "')': Consult takes 2 arguments (reason, id)", "'\"x\")'"),
    (
        'Consult(id=abcd, "a")',
        1,
        18,
        "name=value: no positional argument after a keyword argument in Consult(...)",
        "'\"a\")'",
    ),
    ('Consult("a", reason="b")', 1, 14, "each parameter once (reason is already given)", "'reason'"),
    ('Consult("a", page=abcd)', 1, 14, "a parameter of Consult: reason, id", "'page'"),
    ('Consult("a", abcd);', 1, 20, f"{AN_INSTRUCTION} after ';'", "end of input"),
    (
        'Consult("a", abcd) ;; Shelve("b", abcd)',
        1,
        21,
        f"{AN_INSTRUCTION} after ';'",
        "'; Shelve(\"b\", abcd)'",
    ),
    ('Consult("a", abcd))', 1, 19, "';', another instruction or end of input", "')'"),
    ('Consult("a", abcd) then', 1, 20, "one of Consult, Explore, Shelve (case-sensitive)", "'then'"),
    ('Consult("a, abcd)', 1, 18, 'a closing " for the string opened at line 1, column 9', "end of input"),
    ('Consult("a\nb", abcd)', 1, 11, "an escape such as \\n instead of a raw control character", "'\\n'"),
    ('Consult("a\\q", abcd)', 1, 11, 'an escape: one of \\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX', "'\\\\q'"),
    (
        'Consult("a\\\'", abcd)',
        1,
        11,
        'an escape: one of \\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX',
        '"\\\\\'"',
    ),
    ('Consult("\\ud800", abcd)', 1, 10, "a \\uXXXX escape that is not a lone surrogate", "'\\\\ud800'"),
    (
        'Consult("\\ud800\\u0041", abcd)',
        1,
        10,
        "a \\uXXXX escape that is not a lone surrogate",
        "'\\\\ud800'",
    ),
    ('Consult("\\udc00x", abcd)', 1, 10, "a \\uXXXX escape that is not a lone surrogate", "'\\\\udc00'"),
    ('Consult("\\u12g4", abcd)', 1, 10, "four hex digits after \\u", "'\\\\u12g4'"),
    ('Consult(" \\n ", abcd)', 1, 9, "a non-empty reason", "' \\n '"),
    ('Consult("a", ABCD)', 1, 14, PAGE_ID_RULE, "'ABCD'"),
    ('Consult("a", "abc")', 1, 14, PAGE_ID_RULE, "'abc'"),
    ('Consult("a", pb:abcd)', 1, 14, PAGE_ID_RULE, "'pb:abcd'"),
    ('Consult("a", \n  ["abcd"])', 2, 3, "a page id, quoted or bare (e.g. f1a2b3c4)", "'[\"abcd\"])'"),
    ('Consult(["a"], abcd)', 1, 9, "a quoted string (the reason)", "'[\"a\"], abcd)'"),
    ('Explore("a", f1a2b3c4, ["x"])', 1, 14, HANDLE_RULE, "'f1a2b3c4'"),
    ('Explore("a", pb:abcd, [])', 1, 23, "1 to 32 keywords", "0 keywords"),
    ('Explore("a", pb:abcd, " , ")', 1, 23, "1 to 32 keywords", "0 keywords"),
    ('Explore("a", pb:abcd, ["x", " "])', 1, 29, "a non-empty keyword", "' '"),
    (
        'Explore("a", pb:abcd, ["x,y"])',
        1,
        24,
        "a keyword without commas (one keyword per list item)",
        "'x,y'",
    ),
    ('Explore("a", pb:abcd, [x])', 1, 24, "a quoted keyword or ']'", "'x])'"),
    ('Explore("a", pb:abcd, ["x" "y"])', 1, 28, "',' or ']'", "'\"y\"])'"),
    (
        'Explore("a", pb:abcd, kw)',
        1,
        23,
        'a list of quoted keywords (e.g. ["parser", "retry"]) or one quoted string',
        "'kw)'",
    ),
    ('Consult("a", abcd)\nShelve("b", abcd!)', 2, 17, "',' or ')'", "'!)'"),
]


@pytest.mark.parametrize(("text", "line", "column", "expected", "found"), FAULTS)
def test_bus_faults(text: str, line: int, column: int, expected: str, found: str) -> None:
    """P9: a malformed instruction is a Bus Fault at the right place, saying what was expected."""
    fault = fault_of(text)
    assert fault.position is not None
    assert (fault.position.line, fault.position.column) == (line, column)
    assert (fault.expected, fault.found) == (expected, found)
    assert fault.code is FailCode.SCHEMA_VIOLATION


def test_bus_fault_message_is_written_for_the_model() -> None:
    """P9: the message names the place, what was expected and found, and the valid forms."""
    fault = fault_of('Consult("why", f1a2b3c4) Shelf("x", abcd)')
    assert fault.message == (
        "Bus fault at line 1, column 26: expected one of Consult, Explore, Shelve (case-sensitive), "
        "found 'Shelf'. Valid forms: "
        "Consult(reason, id) | Explore(reason, handle, keywords) | Shelve(reason, id)"
    )
    assert fault.to_dict() == {
        "kind": "bus_fault",
        "type": "BusFault",
        "message": fault.message,
        "code": "SCHEMA_VIOLATION",
        "position": {"offset": 25, "line": 1, "column": 26},
        "expected": "one of Consult, Explore, Shelve (case-sensitive)",
        "found": "'Shelf'",
    }
    assert VALID_FORMS in fault.message


def test_length_limits() -> None:
    """P5: reason at most 2000 characters; at most 32 keywords of at most 100 characters each."""
    assert parse_instructions(f'Consult("{"r" * 2000}", abcd)') == [Consult(reason="r" * 2000, id="abcd")]
    fault = fault_of(f'Consult("{"r" * 2001}", abcd)')
    assert (fault.expected, fault.found) == ("a reason of at most 2000 characters", "2001 characters")
    fault = fault_of(f'Explore("r", pb:abcd, ["{"k" * 101}"])')
    assert (fault.expected, fault.found) == ("a keyword of at most 100 characters", "101 characters")
    keywords = ", ".join(f'"k{n}"' for n in range(33))
    fault = fault_of(f'Explore("r", pb:abcd, [{keywords}])')
    assert (fault.expected, fault.found, fault.position) == (
        "1 to 32 keywords",
        "33 keywords",
        fault.position,
    )
    assert fault.position is not None and fault.position.column == 23


def test_found_is_a_short_quote() -> None:
    """P9: `found` quotes at most 40 characters of the bad input."""
    fault = fault_of("Consult(" + "x" * 500)
    assert fault.found == "'" + "x" * 35 + "'..."
    assert len(fault.found) == 40
    assert len(fault_of("Consult(" + "\x00" * 100).found) <= 40


def test_raw_lone_surrogate_in_reason_is_a_fault() -> None:
    """P9: text that is not valid Unicode (a lone surrogate) cannot be a reason."""
    fault = fault_of('Consult("a\ud800", abcd)')
    assert (fault.expected, fault.found) == ("valid Unicode text (no lone surrogates)", "'a\\ud800'")


def test_huge_inputs_parse_without_crashing() -> None:
    """P9: megabytes of input (long strings, deep brackets, many instructions) are handled linearly."""
    many = 'Consult("a", abcd);\n' * 50_000 + 'Shelve("b", abcd)'
    assert len(parse_instructions(many)) == 50_001
    fault = fault_of('Consult("' + "x" * 2_000_000 + '", abcd)')
    assert fault.found == "2000000 characters"
    assert fault_of("Consult(" + "(" * 1_000_000).expected == "a quoted string (the reason)"
    assert fault_of(" " * 2_000_000).position == SourcePosition(2_000_000, 1, 2_000_001)
    assert fault_of('Explore("a", pb:abcd, ' + "[" * 1_000_000).expected == "a quoted keyword or ']'"


# --------------------------------------------------------------------------------------------------
# Models and format_instruction
# --------------------------------------------------------------------------------------------------


def test_models_validate_the_same_rules() -> None:
    """P5: the models enforce the field rules themselves; frozen, no extra fields."""
    explore = Explore.model_validate({"reason": "r", "handle": "pb:abcd", "keywords": "a, b ,"})
    assert explore == Explore(reason="r", handle="pb:abcd", keywords=("a", "b"))
    for bad in (
        {"reason": " ", "id": "abcd"},
        {"reason": "r", "id": "ABCD"},
        {"reason": "r", "id": "abcd", "extra": 1},
    ):
        with pytest.raises(ValidationError):
            Consult.model_validate(bad)
    for keywords in ((), ("a,b",), (" ",), ("k",) * 33, "", 5):
        with pytest.raises(ValidationError):
            Explore.model_validate({"reason": "r", "handle": "pb:abcd", "keywords": keywords})
    consult = Consult(reason="r", id="abcd")
    with pytest.raises(ValidationError):
        consult.reason = "other"  # type: ignore[misc]


def test_instruction_is_a_tagged_union_on_action() -> None:
    """STYLE: protocol objects are tagged unions; they round-trip through JSON and pickle."""
    adapter: TypeAdapter[Consult | Explore | Shelve] = TypeAdapter(Instruction)
    items: list[Consult | Explore | Shelve] = [
        Consult(reason="r", id="abcd"),
        Explore(reason="r", handle="pb:abcd", keywords=("k",)),
        Shelve(reason="r", id="abcd"),
    ]
    for item in items:
        assert adapter.validate_json(adapter.dump_json(item)) == item
        assert pickle.loads(pickle.dumps(item)) == item
    assert Consult(reason="r", id="abcd").model_dump(mode="json") == {
        "action": "Consult",
        "reason": "r",
        "id": "abcd",
    }
    with pytest.raises(ValidationError):
        adapter.validate_python({"action": "Unpack", "reason": "r", "id": "abcd"})


def test_format_instruction_is_canonical() -> None:
    """P9: canonical call syntax with JSON-escaped strings."""
    assert format_instruction(Consult(reason='say "hi"\n', id="f1a2b3c4")) == (
        'Consult("say \\"hi\\"\\n", "f1a2b3c4")'
    )
    assert format_instruction(Explore(reason="why", handle="pb:0a1b2c3d", keywords=("k1", "k2"))) == (
        'Explore("why", "pb:0a1b2c3d", ["k1", "k2"])'
    )
    assert format_instruction(Shelve(reason="é", id="abcd")) == 'Shelve("é", "abcd")'


# --------------------------------------------------------------------------------------------------
# JSON forms
# --------------------------------------------------------------------------------------------------


def test_instructions_from_json_objects_and_strings() -> None:
    """P9: the envelope form: objects by action, or call-syntax strings of one instruction each."""
    value = [
        {"action": "Consult", "reason": "r", "id": "abcd"},
        {"action": "Explore", "reason": "r", "handle": "pb:abcd", "keywords": [" a ", "b"]},
        {"action": "Explore", "reason": "r", "handle": "pb:abcd", "keywords": "a, b"},
        'Shelve("r", abcd)',
    ]
    assert instructions_from_json(value) == [
        Consult(reason="r", id="abcd"),
        Explore(reason="r", handle="pb:abcd", keywords=("a", "b")),
        Explore(reason="r", handle="pb:abcd", keywords=("a", "b")),
        Shelve(reason="r", id="abcd"),
    ]
    assert instructions_from_json([]) == []


JSON_FAULTS = [
    ({"a": 1}, "$", "a list of instructions", "an object"),
    (("Shelve('r', abcd)",), "$", "a list of instructions", "tuple"),
    ([1], "$[0]", "an instruction object or a call-syntax string", "a number"),
    ([{"reason": "r"}], "$[0].action", "one of 'Consult', 'Explore', 'Shelve'", "no such key"),
    ([{"action": "Unpack"}], "$[0].action", "one of 'Consult', 'Explore', 'Shelve'", "the string 'Unpack'"),
    (
        [{"action": "Consult", "reason": "r", "id": "abcd", "x": 1}],
        "$[0]",
        "only the keys action, reason, id",
        "the key 'x'",
    ),
    ([{"action": "Consult", "id": "abcd"}], "$[0]", "the key 'reason'", "no such key"),
    ([{"action": "Consult", "reason": None, "id": "abcd"}], "$[0].reason", "a string", "null"),
    ([{"action": "Shelve", "reason": "", "id": "abcd"}], "$[0].reason", "a non-empty reason", "''"),
    ([{"action": "Shelve", "reason": "r", "id": "xyz1"}], "$[0].id", PAGE_ID_RULE, "'xyz1'"),
    (
        [{"action": "Explore", "reason": "r", "handle": "abcd", "keywords": ["k"]}],
        "$[0].handle",
        HANDLE_RULE,
        "'abcd'",
    ),
    (
        [{"action": "Explore", "reason": "r", "handle": "pb:abcd"}],
        "$[0]",
        "the key 'keywords'",
        "no such key",
    ),
    (
        [{"action": "Explore", "reason": "r", "handle": "pb:abcd", "keywords": 3}],
        "$[0].keywords",
        "a list of strings or a comma-separated string",
        "a number",
    ),
    (
        [{"action": "Explore", "reason": "r", "handle": "pb:abcd", "keywords": ["k", True]}],
        "$[0].keywords[1]",
        "a string",
        "a boolean",
    ),
    (
        [{"action": "Explore", "reason": "r", "handle": "pb:abcd", "keywords": ["k", "a,b"]}],
        "$[0].keywords[1]",
        "a keyword without commas (one keyword per list item)",
        "'a,b'",
    ),
    (
        [{"action": "Explore", "reason": "r", "handle": "pb:abcd", "keywords": ","}],
        "$[0].keywords",
        "1 to 32 keywords",
        "0 keywords",
    ),
    (['Shelve("r", abcd) Shelve("r", abcd)'], "$[0]", "exactly one instruction per string", "2 instructions"),
    (['Shelve("r" abcd)'], "$[0] (line 1, column 12)", "',' or ')'", "'abcd)'"),
]


@pytest.mark.parametrize(("value", "path", "expected", "found"), JSON_FAULTS)
def test_instructions_from_json_faults(value: object, path: str, expected: str, found: str) -> None:
    """P9: a JSON violation is a Bus Fault naming the JSON path."""
    with pytest.raises(BusFault) as caught:
        instructions_from_json(value)
    fault = caught.value
    assert (fault.position, fault.expected, fault.found) == (None, f"{path}: {expected}", f"{path}: {found}")
    assert (
        fault.message
        == f"Bus fault at {path}: expected {expected}, found {found}. Valid forms: {VALID_FORMS}"
    )


def test_instructions_from_json_where_prefixes_the_path() -> None:
    """P9: `where` is the path of the list, e.g. $.data.actions."""
    with pytest.raises(BusFault) as caught:
        instructions_from_json([{"action": "Consult", "reason": "r", "id": "a"}] * 3, where="$.data.actions")
    assert caught.value.expected == f"$.data.actions[0].id: {PAGE_ID_RULE}"


# --------------------------------------------------------------------------------------------------
# parse_worker_output
# --------------------------------------------------------------------------------------------------


def test_worker_output_in_call_syntax() -> None:
    """P9: plain call syntax is the worker's whole answer."""
    assert parse_worker_output('Consult("r", abcd)\n') == WorkerOutput(
        actions=(Consult(reason="r", id="abcd"),), answer=None, source="call"
    )


def test_worker_output_in_an_envelope() -> None:
    """P9: a v2.2 envelope carries actions (objects or strings) and an optional answer."""
    envelope = {
        "ok": True,
        "meta": {"confidence": 0.9, "risk": "low", "explain": "x"},
        "data": {
            "actions": [{"action": "Consult", "reason": "r", "id": "abcd"}, "Shelve('s', beef)"],
            "answer": "done",
            "rationale": "because",
        },
    }
    assert parse_worker_output("\n  " + json.dumps(envelope)) == WorkerOutput(
        actions=(Consult(reason="r", id="abcd"), Shelve(reason="s", id="beef")),
        answer="done",
        source="envelope",
    )
    empty = parse_worker_output('{"ok": true, "data": {"actions": [], "answer": null}}')
    assert empty == WorkerOutput(actions=(), answer=None, source="envelope")


def test_failed_envelope_carries_no_actions() -> None:
    """P9: ok=false is a failed module answer, not a Bus Fault; it carries its error object."""
    text = '{"ok": false, "error": {"code": "PINS_INSUFFICIENT", "message": "no pins"}}'
    assert parse_worker_output(text) == WorkerOutput(
        actions=(),
        answer=None,
        source="envelope",
        failed=True,
        error={"code": "PINS_INSUFFICIENT", "message": "no pins"},
    )
    assert parse_worker_output('{"ok": false}').error is None


ENVELOPE_FAULTS = [
    ('{"data": {}}', "$.ok", "true or false", "no such key"),
    ('{"ok": 1}', "$.ok", "true or false", "a number"),
    ('{"ok": false, "error": "x"}', "$.error", "an error object", "the string 'x'"),
    ('{"ok": true}', "$.data", "an object", "no such key"),
    ('{"ok": true, "data": []}', "$.data", "an object", "a list"),
    ('{"ok": true, "data": {}}', "$.data", "the key 'actions' (a list, may be empty)", "no such key"),
    (
        '{"ok": true, "data": {"actions": "Shelve(\\"r\\", abcd)"}}',
        "$.data.actions",
        "a list of instructions",
        "the string 'Shelve(\"r\", abcd)'",
    ),
    ('{"ok": true, "data": {"actions": [], "answer": 1}}', "$.data.answer", "a string or null", "a number"),
    ('{"ok": true, "data": {"actions": [], "answer": NaN}}', "$", "a JSON envelope", "'NaN is not JSON'"),
    (
        '{"ok": true, "data": {"actions": [], "x": 1e999}}',
        "$",
        "a JSON envelope",
        "'the number 1e999 is out of range'",
    ),
]


@pytest.mark.parametrize(("text", "path", "expected", "found"), ENVELOPE_FAULTS)
def test_envelope_faults(text: str, path: str, expected: str, found: str) -> None:
    """P9: an envelope without usable ok/data/actions/answer is a Bus Fault naming the path."""
    with pytest.raises(BusFault) as caught:
        parse_worker_output(text)
    fault = caught.value
    assert (fault.position, fault.expected, fault.found) == (None, f"{path}: {expected}", f"{path}: {found}")


def test_envelope_json_syntax_error_has_a_position() -> None:
    """P9: broken JSON is a Bus Fault at the line and column of the JSON error."""
    with pytest.raises(BusFault) as caught:
        parse_worker_output('{"ok": true,\n "data": {"actions": [}\n}')
    fault = caught.value
    assert fault.position == SourcePosition(35, 2, 23)
    assert (fault.expected, fault.found) == ("valid JSON (Expecting value)", "'}'")


def test_envelope_deep_nesting_is_a_bus_fault() -> None:
    """P9: deeply nested JSON does not escape as RecursionError."""
    with pytest.raises(BusFault) as caught:
        parse_worker_output('{"ok": ' + "[" * 200_000 + "]" * 200_000 + "}")
    assert caught.value.expected.startswith("$: ")


# --------------------------------------------------------------------------------------------------
# CLI: pagedctx instructions parse
# --------------------------------------------------------------------------------------------------


def test_cli_parse_stdin_exit_0() -> None:
    """P9: `pagedctx instructions parse` prints the instructions as JSON and exits 0."""
    result = CliRunner().invoke(app, ["instructions", "parse"], input='Explore("r", pb:abcd, "a,b")\n')
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "ok": True,
        "source": "call",
        "instructions": [{"action": "Explore", "reason": "r", "handle": "pb:abcd", "keywords": ["a", "b"]}],
        "answer": None,
        "failed": False,
        "error": None,
    }


def test_cli_parse_envelope_file_exit_0(tmp_path: Path) -> None:
    """P9: a file holding an envelope; the answer is printed too."""
    path = tmp_path / "out.json"
    path.write_text('{"ok": true, "data": {"actions": ["Consult(\'é\', abcd)"], "answer": "ok"}}', "utf-8")
    result = CliRunner().invoke(app, ["instructions", "parse", str(path)])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {
        "ok": True,
        "source": "envelope",
        "instructions": [{"action": "Consult", "reason": "é", "id": "abcd"}],
        "answer": "ok",
        "failed": False,
        "error": None,
    }


def test_cli_parse_bus_fault_exit_3() -> None:
    """P9: a Bus Fault prints {"ok": false, "fault": ...} and exits 3."""
    result = CliRunner().invoke(app, ["instructions", "parse", "-"], input='Consult("r")')
    assert result.exit_code == 3
    expected = "argument 'id' of Consult(reason, id)"
    assert json.loads(result.stdout) == {
        "ok": False,
        "fault": {
            "kind": "bus_fault",
            "type": "BusFault",
            "message": (
                f"Bus fault at line 1, column 12: expected {expected}, found ')'. Valid forms: {VALID_FORMS}"
            ),
            "code": "SCHEMA_VIOLATION",
            "position": {"offset": 11, "line": 1, "column": 12},
            "expected": expected,
            "found": "')'",
        },
    }


def test_cli_parse_missing_file_exit_2(tmp_path: Path) -> None:
    """P9: a missing file is a usage error on stderr naming the path, exit 2."""
    missing = tmp_path / "nope.txt"
    result = CliRunner().invoke(app, ["instructions", "parse", str(missing)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"pagedctx instructions parse: no such file: {missing}\n"


def test_cli_parse_directory_exit_2(tmp_path: Path) -> None:
    """P9: a directory instead of a file is a usage error on stderr, exit 2."""
    result = CliRunner().invoke(app, ["instructions", "parse", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr == f"pagedctx instructions parse: {tmp_path} is a directory, not a file\n"


def test_cli_parse_undecodable_input_exit_2() -> None:
    """P9: input that is not UTF-8 prints a JSON error object and exits 2."""
    result = CliRunner().invoke(app, ["instructions", "parse"], input=b'Consult("\xff", abcd)')
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "ok": False,
        "error": {
            "kind": "usage_error",
            "type": "UsageError",
            "message": "stdin is not valid UTF-8: byte 0xff at offset 9; save the worker output as UTF-8",
        },
    }


# --------------------------------------------------------------------------------------------------
# docs/instructions.md
# --------------------------------------------------------------------------------------------------

DOC = Path(__file__).parent.parent / "docs" / "instructions.md"


def _blocks(text: str, language: str) -> list[str]:
    return [part.split("\n```", 1)[0] for part in text.split(f"```{language}\n")[1:]]


def test_documented_examples_are_true() -> None:
    """P9: the valid examples in docs/instructions.md parse; the documented faults are exact."""
    doc = DOC.read_text("utf-8")
    valid = doc.split("### Valid examples", 1)[1].split("## JSON forms", 1)[0]
    examples = _blocks(valid, "text")
    assert [len(parse_instructions(example)) for example in examples] == [1, 2, 2, 1]
    envelope, *faults = _blocks(doc, "json")
    assert len(parse_worker_output(envelope).actions) == 4
    inputs = [
        'Consult("a", abcd)\nShelve("need detail" f1a2b3c4)',
        'consult("why", f1a2b3c4)',
        'Explore("why", pb:0a1b2c3d, [])',
        '{"ok": true, "data": {"actions": [{"action": "Shelve", "reason": "done", "id": "abc"}]}}',
    ]
    for text, documented in zip(inputs, faults, strict=True):
        with pytest.raises(BusFault) as caught:
            parse_worker_output(text)
        assert json.loads(documented) == {"ok": False, "fault": caught.value.to_dict()}


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------

TRICKY = st.sampled_from(
    ['"', "'", "\\", "\n", "\r", "\t", ")", "(", ",", ";", "[", "]", "\x00", "\u2028", "😀"]
)
REASONS = st.text(st.one_of(st.characters(codec="utf-8"), TRICKY), min_size=1, max_size=80).filter(
    lambda s: bool(s.strip())
)
HEX_IDS = st.text("0123456789abcdef", min_size=4, max_size=64)
KEYWORDS = (
    st.text(
        st.one_of(st.characters(codec="utf-8", exclude_characters=","), TRICKY.filter(lambda c: c != ",")),
        max_size=30,
    )
    .map(str.strip)
    .filter(bool)
)
INSTRUCTIONS = st.one_of(
    st.builds(Consult, reason=REASONS, id=HEX_IDS),
    st.builds(Shelve, reason=REASONS, id=HEX_IDS),
    st.builds(
        Explore,
        reason=REASONS,
        handle=HEX_IDS.map(lambda h: "pb:" + h),
        keywords=st.lists(KEYWORDS, min_size=1, max_size=32).map(tuple),
    ),
)


@given(INSTRUCTIONS)
def test_format_then_parse_round_trips(instruction: Consult | Explore | Shelve) -> None:
    """P9: parse_instructions(format_instruction(i)) == [i] for every valid instruction."""
    assert parse_instructions(format_instruction(instruction)) == [instruction]


@given(st.lists(INSTRUCTIONS, min_size=1, max_size=5), st.sampled_from([";", "\n", " ", "", " ;\n"]))
def test_programs_round_trip(instructions: list[Consult | Explore | Shelve], sep: str) -> None:
    """P9: several formatted instructions joined by any separator parse back in order."""
    assert parse_instructions(sep.join(map(format_instruction, instructions))) == instructions


FRAGMENTS = st.sampled_from(
    [
        "Consult", "Explore", "Shelve", "consult", "(", ")", "(", '"', "'", ",", ";", "[", "]", "\n", " ",
        "=", "reason", "id", "handle", "keywords", "f1a2b3c4", "pb:0a1b2c3d", "abc", "pb:", "\\", "\\u",
        "\\ud83d", "\\ude00", "d800", "\\n", "\\'", '"why"', "'why'", '["k"]', "k1, k2", "\x00", "é", "{",
    ]
)  # fmt: skip
FUZZ_TEXTS = st.one_of(st.text(), st.lists(FRAGMENTS, max_size=40).map("".join))


@pytest.mark.slow
@settings(max_examples=3000)
@given(FUZZ_TEXTS)
def test_fuzz_parse_instructions_only_bus_faults(text: str) -> None:
    """P9: any text parses to instructions or raises BusFault, never anything else."""
    try:
        result = parse_instructions(text)
    except BusFault as fault:
        assert fault.position is not None
        assert 0 <= fault.position.offset <= len(text)
        assert len(fault.found) <= 40
    else:
        assert result
        assert all(isinstance(item, Consult | Explore | Shelve) for item in result)


JSON_KEYS = st.sampled_from(
    ["action", "reason", "id", "handle", "keywords", "ok", "data", "actions", "answer", "error", "meta"]
)
JSON_STRINGS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        ["Consult", "Explore", "Shelve", "abcd", "pb:abcd", "a, b", 'Shelve("r", abcd)', "Consult(", ""]
    ),
)
JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        JSON_STRINGS,
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.one_of(JSON_KEYS, st.text(max_size=5)), children, max_size=6),
    ),
    max_leaves=20,
)
ENVELOPES = st.builds(
    lambda ok, data, extra: {"ok": ok, "data": data, **extra},
    st.one_of(st.just(True), JSON_VALUES),
    st.one_of(
        st.dictionaries(JSON_KEYS, JSON_VALUES, max_size=4), st.fixed_dictionaries({"actions": JSON_VALUES})
    ),
    st.dictionaries(JSON_KEYS, JSON_VALUES, max_size=2),
)


@pytest.mark.slow
@settings(max_examples=3000)
@given(st.one_of(JSON_VALUES, ENVELOPES))
def test_fuzz_parse_worker_output_only_bus_faults(value: object) -> None:
    """P9: any JSON value as worker output parses or raises BusFault, never anything else."""
    try:
        output = parse_worker_output(json.dumps(value))
    except BusFault as fault:
        assert fault.to_dict()["type"] == "BusFault"
    else:
        assert isinstance(output, WorkerOutput)
