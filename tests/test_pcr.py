"""The PCR request and the PCES answer formats (SPEC C1-C5; seed 000; docs/pcr.md).

Exact assertions: parsed models by equality, errors by line, expected and full message, rendered
answers by golden text. Properties: format/parse and render/parse round trips, and fuzzing that
the parsers raise nothing but their own errors.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pagedctx.errors import FailCode, ProtocolFault, UsageError
from pagedctx.protocol.code_evidence.pces import (
    MAX_NESTING,
    Content,
    Entry,
    Evidence,
    PcesAnswer,
    PcesFormatError,
    ambiguous_content,
    api_content,
    asm_content,
    call_hop,
    callchain_content,
    definition_content,
    evidence_for,
    exist_content,
    impl_content,
    missing_content,
    shape_problem,
    summary_content,
    unit_id,
)
from pagedctx.protocol.code_evidence.pces_text import parse_pces, render_pces
from pagedctx.protocol.code_evidence.pcr import Need, PcrRequest, format_pcr, parse_pcr
from pagedctx.protocol.code_evidence.refs import (
    REF_FORMS,
    VIEWS,
    CallchainRef,
    FileRef,
    LayoutRef,
    PcrSyntaxError,
    QualifiedRef,
    SymbolRef,
    UnitRef,
    parse_ref,
)

VIEW_FORM = "`view: <exist|definition|api|impl|asm|summary|callchain>`"
ANY_REF = f"one of {REF_FORMS}"


def need_text(ref: str, view: str) -> str:
    return f"<pcr>\n<need>\nref: {ref}\nview: {view}\n</need>\n</pcr>\n"


def pcr_error(text: str) -> PcrSyntaxError:
    with pytest.raises(PcrSyntaxError) as caught:
        parse_pcr(text)
    return caught.value


# --------------------------------------------------------------------------------------------------
# PCR: refs
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("u12", UnitRef(raw="u12", number=12)),
        ("u0", UnitRef(raw="u0", number=0)),
        (
            "pkg/orders.py::OrderService.place",
            QualifiedRef(
                raw="pkg/orders.py::OrderService.place", path="pkg/orders.py", qualname="OrderService.place"
            ),
        ),
        (
            "pkg/orders.py::OrderService.place#2",
            QualifiedRef(
                raw="pkg/orders.py::OrderService.place#2",
                path="pkg/orders.py",
                qualname="OrderService.place",
                occurrence=2,
            ),
        ),
        ("main.go::main", QualifiedRef(raw="main.go::main", path="main.go", qualname="main")),
        (
            "web/a.js::C.#priv#3",
            QualifiedRef(raw="web/a.js::C.#priv#3", path="web/a.js", qualname="C.#priv", occurrence=3),
        ),
        ("pkg/orders.py", FileRef(raw="pkg/orders.py", path="pkg/orders.py")),
        ("./README.md", FileRef(raw="./README.md", path="./README.md")),
        ("main.go", FileRef(raw="main.go", path="main.go")),
        ("boot.S", FileRef(raw="boot.S", path="boot.S")),
        ("link.ld", FileRef(raw="link.ld", path="link.ld")),
        ("Widget.TSX", FileRef(raw="Widget.TSX", path="Widget.TSX")),
        (".stack", LayoutRef(raw=".stack", name=".stack")),
        (".text.startup", LayoutRef(raw=".text.startup", name=".text.startup")),
        (".note.GNU-stack", LayoutRef(raw=".note.GNU-stack", name=".note.GNU-stack")),
        ("handle_request", SymbolRef(raw="handle_request", name="handle_request")),
        ("OrderService.place", SymbolRef(raw="OrderService.place", name="OrderService.place")),
        ("$el", SymbolRef(raw="$el", name="$el")),
        ("名前", SymbolRef(raw="名前", name="名前")),
        ("U12", SymbolRef(raw="U12", name="U12")),
        ("README.md", SymbolRef(raw="README.md", name="README.md")),
    ],
)
def test_every_ref_kind(raw: str, expected: object) -> None:
    """C5 (our request format): each ref kind by its first matching rule; raw kept as written (C2)."""
    assert parse_ref(raw) == expected
    assert parse_ref(f"  {raw}\t") == expected
    assert parse_pcr(need_text(raw, "api")).needs == (Need(ref=expected, view="api"),)


def test_callchain_refs_keep_their_raw_text() -> None:
    """C3 callchain: two ends of any non-callchain kind; the raw text, spaces and all, is kept (C2)."""
    request = parse_pcr(need_text("handle_request  ->\tu7", "callchain"))
    assert request.needs == (
        Need(
            ref=CallchainRef(
                raw="handle_request  ->\tu7",
                start=SymbolRef(raw="handle_request", name="handle_request"),
                end=UnitRef(raw="u7", number=7),
            ),
            view="callchain",
        ),
    )
    assert parse_ref("a.py::f->.text") == CallchainRef(
        raw="a.py::f->.text",
        start=QualifiedRef(raw="a.py::f", path="a.py", qualname="f"),
        end=LayoutRef(raw=".text", name=".text"),
    )


def test_refs_are_checked_against_their_raw_text() -> None:
    """C2: a ref model cannot disagree with the text it echoes; a ref given as text is classified."""
    assert Need(ref="u12", view="api") == Need(ref=UnitRef(raw="u12", number=12), view="api")
    with pytest.raises(ValidationError, match="fields disagree with raw 'u12'"):
        UnitRef(raw="u12", number=13)
    with pytest.raises(ValidationError, match="expected a ref without whitespace"):
        SymbolRef(raw=" a", name=" a")
    with pytest.raises(ValidationError, match="fields disagree"):
        SymbolRef(raw="a.py", name="a.py")  # a file, by its suffix
    with pytest.raises(ValidationError, match="view callchain needs a ref with two ends"):
        Need(ref="a", view="callchain")
    with pytest.raises(ValidationError, match="needs view callchain"):
        Need(ref="a -> b", view="impl")
    with pytest.raises(ValidationError):
        PcrRequest(needs=())


# --------------------------------------------------------------------------------------------------
# PCR: documents
# --------------------------------------------------------------------------------------------------


def test_the_example_request_of_the_docs() -> None:
    """C5: the request format of docs/pcr.md, with every view; comments and blank lines outside needs."""
    text = (
        "# what the agent needs\n"
        "\n"
        "<pcr>\n"
        "  # the public surface first\n"
        "<need>\n"
        "ref: u12\n"
        "view: api\n"
        "</need>\n"
        "\n"
        "  <need>  \n"
        "  view:   impl  \n"
        "  ref:  pkg/orders.py::OrderService.place\r\n"
        "</need>\n"
        "<need>\n"
        "ref: handle_request -> write_log\n"
        "view: callchain\n"
        "</need>\n"
        "</pcr>\n"
        "# done\n"
    )
    assert parse_pcr(text) == PcrRequest(
        needs=(
            Need(ref="u12", view="api"),
            Need(ref="pkg/orders.py::OrderService.place", view="impl"),
            Need(ref="handle_request -> write_log", view="callchain"),
        )
    )
    assert parse_pcr("\ufeff" + need_text("u1", "exist")) == PcrRequest(needs=(Need(ref="u1", view="exist"),))


@pytest.mark.parametrize("view", VIEWS)
def test_every_view(view: str) -> None:
    """C3: the seven views, each by its exact lowercase name."""
    ref = "a -> b" if view == "callchain" else "a"
    assert parse_pcr(need_text(ref, view)).needs[0].view == view


def test_format_is_canonical() -> None:
    """C5: format_pcr writes one canonical text (ref before view, no comments, final newline)."""
    request = parse_pcr("<pcr>\n<need>\nview: asm\n ref:   boot.S \n</need>\n</pcr>")
    assert format_pcr(request) == "<pcr>\n<need>\nref: boot.S\nview: asm\n</need>\n</pcr>\n"


@pytest.mark.parametrize(
    ("text", "line", "expected", "found"),
    [
        ("", 1, "`<pcr>`", "end of input"),
        ("# only a comment\n\n", 3, "`<pcr>`", "end of input"),
        ("hello\n<pcr>", 1, "`<pcr>`", "'hello'"),
        ("<PCR>", 1, "`<pcr>`", "'<PCR>'"),
        ("<pcr>\n</pcr>\n", 2, "`<need>` (a request holds at least one need)", "'</pcr>'"),
        ("<pcr>\n\n", 3, "`<need>` or `</pcr>`", "end of input"),
        ("<pcr>\nref: u1\n", 2, "`<need>` or `</pcr>`", "'ref: u1'"),
        ("<pcr>\n<need>\n", 3, "`ref: <ref>` or " + VIEW_FORM, "end of input"),
        ("<pcr>\n<need>\nref: u12\nveiw: api\n</need>\n</pcr>\n", 4, VIEW_FORM, "'veiw: api'"),
        ("<pcr>\n<need>\nref: u12\nview: API\n</need>\n</pcr>\n", 4, VIEW_FORM, "'view: API'"),
        ("<pcr>\n<need>\nref: u12\nview:\n</need>\n</pcr>\n", 4, VIEW_FORM, "'view:'"),
        ("<pcr>\n<need>\nview: api\n</need>\n</pcr>\n", 4, "`ref: <ref>`", "'</need>'"),
        ("<pcr>\n<need>\nref: u1\n\nview: api\n</need>\n</pcr>\n", 4, VIEW_FORM, "a blank line"),
        ("<pcr>\n<need>\nref: u1\n# c\nview: api\n</need>\n</pcr>\n", 4, VIEW_FORM, "'# c'"),
        ("<pcr>\n<need>\nref: u1\nref: u2\n", 4, VIEW_FORM, "'ref: u2'"),
        ("<pcr>\n<need>\nref: u1\nview: api\nview: impl\n", 5, "`</need>`", "'view: impl'"),
        ("<pcr>\n<need>\nref: u1\nview: api\n", 5, "`</need>`", "end of input"),
        ("<pcr>\n<need>\nref: u1\nview: api\n</need>", 5, "`<need>` or `</pcr>`", "end of input"),
        ("<pcr>\n<need>\n<need>\n", 3, "`ref: <ref>` or " + VIEW_FORM, "'<need>'"),
        (
            need_text("u1", "api") + "\nextra\n",
            8,
            "end of input (only blank lines and # comments after `</pcr>`)",
            "'extra'",
        ),
        ("<pcr>\n<need>\nref:\nview: api\n", 3, f"`ref: <ref>` where <ref> is {ANY_REF}", "'ref:'"),
        (
            "<pcr>\n<need>\nref: 12 x\n",
            3,
            "`ref: <ref>` where <ref> is a ref without whitespace or control "
            "characters (spaces only around '->')",
            "'ref: 12 x'",
        ),
        ("<pcr>\n<need>\nref: <x>\n", 3, f"`ref: <ref>` where <ref> is {ANY_REF}", "'ref: <x>'"),
        (
            "<pcr>\n<need>\nref: u012\n",
            3,
            "`ref: <ref>` where <ref> is a unit id u<N> without leading zeros (e.g. u12)",
            "'ref: u012'",
        ),
        (
            "<pcr>\n<need>\nref: u1234567890123456789\n",
            3,
            "`ref: <ref>` where <ref> is a unit id u<N> of at most 18 digits (e.g. u12)",
            "'ref: u1234567890123456789'",
        ),
        (
            "<pcr>\n<need>\nref: ::f\n",
            3,
            "`ref: <ref>` where <ref> is a path before '::' (<path>::<Name>)",
            "'ref: ::f'",
        ),
        (
            "<pcr>\n<need>\nref: a.py::\n",
            3,
            "`ref: <ref>` where <ref> is a name after '::' (<path>::<Name>)",
            "'ref: a.py::'",
        ),
        (
            "<pcr>\n<need>\nref: a.py::#2\n",
            3,
            "`ref: <ref>` where <ref> is a name after '::' (<path>::<Name>)",
            "'ref: a.py::#2'",
        ),
        *[
            (
                "<pcr>\n<need>\nref: a.py::f" + suffix + "\n",
                3,
                "`ref: <ref>` where <ref> is an occurrence #N "
                "with N >= 2 after the name (the first definition has no suffix)",
                repr("ref: a.py::f" + suffix),
            )
            for suffix in ("#", "#1", "#0", "#02")
        ],
        (
            "<pcr>\n<need>\nref: .\n",
            3,
            "`ref: <ref>` where <ref> is a layout name after '.' (e.g. .stack)",
            "'ref: .'",
        ),
        (
            "<pcr>\n<need>\nref: a -> b -> c\n",
            3,
            "`ref: <ref>` where <ref> is a callchain with exactly two ends: <ref> -> <ref>",
            "'ref: a -> b -> c'",
        ),
        (
            "<pcr>\n<need>\nref: -> b\n",
            3,
            f"`ref: <ref>` where <ref> is a callchain <ref> -> <ref> whose start is {ANY_REF}",
            "'ref: -> b'",
        ),
        (
            "<pcr>\n<need>\nref: a -> u01\n",
            3,
            "`ref: <ref>` where <ref> is a callchain <ref> -> <ref> whose "
            "end is a unit id u<N> without leading zeros (e.g. u12)",
            "'ref: a -> u01'",
        ),
        (
            "<pcr>\n<need>\nref: a -> b\nview: api\n</need>\n",
            4,
            "`view: callchain` (the ref on line 3 names two ends)",
            "'view: api'",
        ),
        (
            "<pcr>\n<need>\nview: callchain\nref: handle_request\n</need>\n",
            4,
            "`ref: <ref> -> <ref>` (view callchain on line 3 needs two ends)",
            "'ref: handle_request'",
        ),
    ],
)
def test_every_error_names_line_expected_and_found(text: str, line: int, expected: str, found: str) -> None:
    """C5: a malformed request gets a clear error: the line, what was expected, what was found."""
    error = pcr_error(text)
    assert (error.line, error.expected, error.found) == (line, expected, found)
    assert error.message == f"line {line}: expected {expected}, found {found}"
    assert str(error) == error.message


def test_the_error_message_of_the_brief() -> None:
    """C5: the exact message for a misspelled view line."""
    error = pcr_error("<pcr>\n<need>\nref: u12\nveiw: api\n</need>\n</pcr>\n")
    assert str(error) == (
        "line 4: expected `view: <exist|definition|api|impl|asm|summary|callchain>`, found 'veiw: api'"
    )


def test_long_lines_are_quoted_short() -> None:
    """C5: the found part quotes at most 40 characters."""
    error = pcr_error("<pcr>\n" + "x" * 200 + "\n")
    assert error.found == "'" + "x" * 35 + "'..."
    assert len(error.found) == 40


def test_parse_ref_errors_are_at_line_one() -> None:
    """C5: a lone ref is a one-line text."""
    with pytest.raises(PcrSyntaxError) as caught:
        parse_ref("a b")
    assert caught.value.line == 1
    assert caught.value.found == "'a b'"


def test_pcr_syntax_error_is_a_usage_error_that_pickles() -> None:
    """C5: PcrSyntaxError is a UsageError (exit 2 in the CLI) and crosses process boundaries."""
    error = pcr_error("<pcr>\nx\n")
    assert isinstance(error, UsageError)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is PcrSyntaxError
    assert (copy.message, copy.line, copy.expected, copy.found) == (
        error.message,
        error.line,
        error.expected,
        error.found,
    )
    assert copy.to_dict() == {
        "kind": "pcr_syntax_error",
        "type": "PcrSyntaxError",
        "message": "line 2: expected `<need>` or `</pcr>`, found 'x'",
        "line": 2,
        "expected": "`<need>` or `</pcr>`",
        "found": "'x'",
    }


# --------------------------------------------------------------------------------------------------
# PCR: properties
# --------------------------------------------------------------------------------------------------

_SEGMENT = st.from_regex(r"[A-Za-z0-9_.\-]{1,8}", fullmatch=True) | st.text(
    st.characters(
        exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"), exclude_characters="/"
    ),
    min_size=1,
    max_size=6,
)
_IDENT = st.from_regex(r"[A-Za-z_$][A-Za-z0-9_$]{0,6}", fullmatch=True)
_DOTTED = st.lists(_IDENT, min_size=1, max_size=3).map(".".join)
_SUFFIX = st.sampled_from([".py", ".go", ".ts", ".tsx", ".c", ".h", ".S", ".s", ".asm", ".ld", ".rs"])
_REF_TEXTS = {
    "unit": st.integers(0, 10**18 - 1).map(lambda n: f"u{n}"),
    "qualified": st.tuples(
        st.lists(_SEGMENT, min_size=1, max_size=3).map("/".join),
        _DOTTED,
        st.sampled_from(["", "#2", "#17"]),
    ).map(lambda t: f"{t[0]}::{t[1]}{t[2]}"),
    "file": st.one_of(
        st.lists(_SEGMENT, min_size=2, max_size=4).map("/".join),
        st.tuples(_IDENT, _SUFFIX).map("".join),
    ),
    "layout": _SEGMENT.map(lambda s: "." + s),
    "symbol": _DOTTED,
}


def _of_kind(kind: str) -> st.SearchStrategy[str]:
    def fits(raw: str) -> bool:
        try:
            return parse_ref(raw).kind == kind
        except PcrSyntaxError:
            return False

    return _REF_TEXTS[kind].filter(fits)


_END_TEXT = st.one_of(*(_of_kind(kind) for kind in _REF_TEXTS))
_ARROW = st.sampled_from(["->", " -> ", "  ->\t", "-> "])
_NEED = st.one_of(
    st.tuples(_END_TEXT, st.sampled_from([view for view in VIEWS if view != "callchain"])).map(
        lambda t: Need(ref=t[0], view=t[1])
    ),
    st.tuples(_END_TEXT, _ARROW, _END_TEXT).map(lambda t: Need(ref="".join(t), view="callchain")),
)


@settings(max_examples=300)
@given(st.lists(_NEED, min_size=1, max_size=6))
def test_format_parse_round_trip(needs: list[Need]) -> None:
    """C5: parse_pcr(format_pcr(request)) == request, for requests of every ref kind and view."""
    request = PcrRequest(needs=tuple(needs))
    assert parse_pcr(format_pcr(request)) == request


@pytest.mark.parametrize("kind", sorted(_REF_TEXTS))
@settings(max_examples=50)
@given(data=st.data())
def test_every_kind_strategy_yields_its_kind(kind: str, data: st.DataObject) -> None:
    """C5: the generators above cover every ref kind (so the round trip does)."""
    assert parse_ref(data.draw(_of_kind(kind))).kind == kind


_PCR_LINES = st.one_of(
    st.sampled_from(
        [
            "<pcr>",
            "</pcr>",
            "<need>",
            "</need>",
            "ref: u12",
            "ref: a -> b",
            "ref: a.py::f#2",
            "ref:",
            "view: api",
            "view: callchain",
            "view:",
            "",
            "  ",
            "# note",
            "\r",
        ]
    ),
    st.text(max_size=20),
    st.builds(lambda s: "ref: " + s, st.text(max_size=12)),
)


@pytest.mark.slow
@settings(max_examples=2000)
@given(st.one_of(st.text(), st.lists(_PCR_LINES, max_size=14).map("\n".join)))
def test_fuzz_parse_pcr_raises_only_pcr_syntax_errors(text: str) -> None:
    """C5: on any text, parse_pcr returns a request or raises PcrSyntaxError (never anything else)."""
    try:
        request = parse_pcr(text)
    except PcrSyntaxError as error:
        assert 1 <= error.line <= text.count("\n") + 1
        assert error.message.startswith(f"line {error.line}: expected ")
    else:
        assert parse_pcr(format_pcr(request)) == request


# --------------------------------------------------------------------------------------------------
# PCES: golden renderings
# --------------------------------------------------------------------------------------------------


def one(ref: str, view: str, source: str, content: Content) -> str:
    """The rendering of a one-evidence answer, checked to parse back to the same answer."""
    answer = PcesAnswer(evidence=(Evidence(ref=ref, view=view, source=source, content=content),))
    text = render_pces(answer)
    assert parse_pces(text) == answer
    return text


def wrap(ref: str, view: str, source: str, *content: str) -> str:
    lines = ["<pcir>", "<evidence>", f"ref: {ref}", f"view: {view}", f"source: {source}", "content:"]
    return "\n".join([*lines, *content, "</content>", "</evidence>", "</pcir>"]) + "\n"


def test_seed_minimal_example_byte_for_byte() -> None:
    """C1, C2: the minimal example of seed 000 section 7, exactly."""
    answer = PcesAnswer(
        evidence=(
            Evidence(
                ref="u12",
                view="api",
                source="u12",
                content=api_content(["fn get_analyzer(lang: str) -> Analyzer"]),
            ),
            Evidence(
                ref=".stack",
                view="summary",
                source="layout",
                content=summary_content({"top": "__stack_top", "size": "0x8000"}),
            ),
        )
    )
    seed = (
        "<pcir>\n<evidence>\nref: u12\nview: api\nsource: u12\ncontent:\n  signatures:\n"
        "    - fn get_analyzer(lang: str) -> Analyzer\n</content>\n</evidence>\n<evidence>\nref: .stack\n"
        "view: summary\nsource: layout\ncontent:\n  top: __stack_top\n  size: 0x8000\n</content>\n"
        "</evidence>\n</pcir>\n"
    )
    assert render_pces(answer) == seed
    assert parse_pces(seed) == answer
    assert parse_pces(seed.removesuffix("\n")) == answer


def test_exist_shapes() -> None:
    """C3 exist: status yes with its location, or status no."""
    assert one("OrderService", "exist", "u12", exist_content("yes", "pkg/orders.py:14-52")) == wrap(
        "OrderService", "exist", "u12", "  status: yes", "  location: pkg/orders.py:14-52"
    )
    assert one("nothing", "exist", "unknown", exist_content("no")) == wrap(
        "nothing", "exist", "unknown", "  status: no"
    )
    with pytest.raises(ValueError, match="a location with status yes"):
        exist_content("yes")
    with pytest.raises(ValueError, match="none with status no"):
        exist_content("no", "a.py:1")


def test_definition_shape_with_code_block() -> None:
    """C3 definition: kind, unit, and the full definition as a literal block."""
    code = "def place(self, order: Order) -> Receipt:\n    '''Place it.'''\n\n    return self._book(order)\n"
    assert one(
        "pkg/orders.py::OrderService.place", "definition", "u12", definition_content("func", 12, code)
    ) == wrap(
        "pkg/orders.py::OrderService.place",
        "definition",
        "u12",
        "  kind: func",
        "  unit: u12",
        "  definition: |",
        "    def place(self, order: Order) -> Receipt:",
        "        '''Place it.'''",
        "",
        "        return self._book(order)",
    )


def test_api_shape() -> None:
    """C3 api: the signatures, in source order, as a list; an empty list is []."""
    assert one(
        "u3", "api", "u3", api_content(["func New() *T", "func (t *T) Run(ctx context.Context) error"])
    ) == wrap(
        "u3",
        "api",
        "u3",
        "  signatures:",
        "    - func New() *T",
        "    - func (t *T) Run(ctx context.Context) error",
    )
    assert one("u3", "api", "u3", api_content([])) == wrap("u3", "api", "u3", "  signatures: []")


def test_impl_shapes() -> None:
    """C3 impl: the implementation as one block or as a list of parts (multi-line items are blocks)."""
    assert one("f", "impl", "u4", impl_content("if x:\n    y()")) == wrap(
        "f", "impl", "u4", "  implementation: |-", "    if x:", "        y()"
    )
    assert one("f", "impl", "u4", impl_content(["call g()", "for i in r:\n  h(i)\n"])) == wrap(
        "f",
        "impl",
        "u4",
        "  implementation:",
        "    - call g()",
        "    - |",
        "      for i in r:",
        "        h(i)",
    )


def test_asm_shape() -> None:
    """C3 asm: labels and flow, two lists."""
    content = asm_content(["0x0800 _start", "0x0810 loop"], ["_start: ldr sp, =_estack", "loop: b loop"])
    assert one("boot.S", "asm", "u9", content) == wrap(
        "boot.S",
        "asm",
        "u9",
        "  labels:",
        "    - 0x0800 _start",
        "    - 0x0810 loop",
        "  flow:",
        "    - _start: ldr sp, =_estack",
        "    - loop: b loop",
    )


def test_summary_shape_with_nesting() -> None:
    """C3 summary: key: value pairs only; a value may be a nested mapping; an empty one is {}."""
    content = summary_content(
        {"memory": {"FLASH": "0x08000000, 512K", "RAM": "0x20000000, 128K"}, "note": "", "x": {}}
    )
    assert one(".text", "summary", "layout", content) == wrap(
        ".text",
        "summary",
        "layout",
        "  memory:",
        "    FLASH: 0x08000000, 512K",
        "    RAM: 0x20000000, 128K",
        "  note: |-",
        "  x: {}",
    )


def test_callchain_shape() -> None:
    """C3 callchain: the path of u<ID>#symbol hops, each after the first with its call site."""
    path = [
        call_hop(3, "handle_request"),
        call_hop(8, "Logger.write", "app/server.py:41"),
        call_hop(9, "write_log", "app/log.py:12"),
    ]
    assert one("handle_request -> write_log", "callchain", "u3", callchain_content(path)) == wrap(
        "handle_request -> write_log",
        "callchain",
        "u3",
        "  path:",
        "    - u3#handle_request",
        "    - u8#Logger.write @ app/server.py:41",
        "    - u9#write_log @ app/log.py:12",
    )
    with pytest.raises(ValueError, match="a symbol without whitespace"):
        call_hop(1, "a b")


def test_error_shapes() -> None:
    """C4: the frozen shapes: status missing [+ reason], status ambiguous [+ candidates]; any view."""
    assert one("nope", "definition", "unknown", missing_content("no unit defines 'nope'")) == wrap(
        "nope", "definition", "unknown", "  status: missing", "  reason: no unit defines 'nope'"
    )
    assert one("a -> b", "callchain", "unknown", missing_content()) == wrap(
        "a -> b", "callchain", "unknown", "  status: missing"
    )
    candidates = ["u4 pkg/a.py::run @ pkg/a.py:10", "u9 pkg/b.py::run @ pkg/b.py:3"]
    assert one("run", "impl", "unknown", ambiguous_content(candidates)) == wrap(
        "run", "impl", "unknown", "  status: ambiguous", "  candidates:", *(f"    - {c}" for c in candidates)
    )
    assert one("run", "exist", "unknown", ambiguous_content()) == wrap(
        "run", "exist", "unknown", "  status: ambiguous"
    )


def test_block_encoding_edge_cases() -> None:
    """C3 (complete code): the exact block encoding: chomping, empty lines, leading spaces, tabs."""
    cases = {
        "": ["  implementation: |-"],
        "\n": ["  implementation: |+", ""],
        "\n\n": ["  implementation: |+", "", ""],
        "a": ["  implementation: a"],
        "a\n": ["  implementation: |", "    a"],
        "a\n\n": ["  implementation: |+", "    a", ""],
        "  a": ["  implementation: |-", "      a"],
        "a ": ["  implementation: |-", "    a "],
        "\ta": ["  implementation: |-", "    \ta"],
        "|": ["  implementation: |-", "    |"],
        "|x": ["  implementation: |-", "    |x"],
        "[]": ["  implementation: |-", "    []"],
        "{}": ["  implementation: |-", "    {}"],
        "a\r": ["  implementation: |-", "    a\r"],
        "</content>\n</evidence>": ["  implementation: |-", "    </content>", "    </evidence>"],
        "- x\nref: y": ["  implementation: |-", "    - x", "    ref: y"],
        "x: [] {}": ["  implementation: x: [] {}"],
        "漢字 🙂": ["  implementation: 漢字 🙂"],
    }
    for text, lines in cases.items():
        assert one("f", "impl", "u1", impl_content(text)) == wrap("f", "impl", "u1", *lines), repr(text)


def test_rendering_is_deterministic() -> None:
    """C1: equal answers render to identical bytes, however they were built."""
    by_helper = Evidence(ref="u1", view="asm", source="u1", content=asm_content(["a"], ["b"]))
    by_hand = Evidence(
        ref=UnitRef(raw="u1", number=1),
        view="asm",
        source="u1",
        content=Content(entries=(Entry(key="labels", value=("a",)), Entry(key="flow", value=["b"]))),
    )
    assert by_helper == by_hand
    assert render_pces(PcesAnswer(evidence=(by_helper,))) == render_pces(PcesAnswer(evidence=(by_hand,)))


def test_evidence_for_copies_ref_and_view() -> None:
    """C2: the evidence echoes its need's ref and view."""
    need = parse_pcr(need_text("a ->  b", "callchain")).needs[0]
    evidence = evidence_for(need, unit_id(3), callchain_content([call_hop(3, "a"), call_hop(4, "b")]))
    assert (evidence.ref, evidence.view, evidence.source) == (need.ref, "callchain", "u3")
    assert "ref: a ->  b\n" in render_pces(PcesAnswer(evidence=(evidence,)))


# --------------------------------------------------------------------------------------------------
# PCES: validation and parse errors
# --------------------------------------------------------------------------------------------------


def test_shapes_are_enforced_per_view() -> None:
    """C3, C4: content must have its view's shape or an error shape."""
    assert shape_problem("api", api_content(["f()"])) is None
    assert shape_problem("api", missing_content()) is None
    assert shape_problem("api", impl_content("x")) == (
        "api content: `signatures:` a list; or `status: missing` [and `reason: <text>`], or "
        "`status: ambiguous` [and `candidates:` a list]"
    )
    assert (
        shape_problem("definition", Content.of({"kind": "func", "unit": "12", "definition": "x"})) is not None
    )
    assert (
        shape_problem("definition", Content.of({"kind": "method", "unit": "u1", "definition": "x"}))
        is not None
    )
    assert shape_problem("exist", Content.of({"status": "yes"})) is not None
    assert shape_problem("summary", Content.of({"a": ["x"]})) is not None
    assert shape_problem("summary", Content()) is not None
    assert shape_problem("callchain", callchain_content([])) is not None
    assert shape_problem("callchain", callchain_content(["handle_request"])) is not None
    assert shape_problem("impl", Content.of({"implementation": {"a": "b"}})) is not None
    with pytest.raises(ValidationError, match="expected api content"):
        Evidence(ref="u1", view="api", source="u1", content=impl_content("x"))
    with pytest.raises(ValidationError, match="expected a source u<ID>, layout or unknown"):
        Evidence(ref="u1", view="api", source="u01", content=api_content([]))
    with pytest.raises(ValidationError, match="needs view callchain"):
        Evidence(ref="a -> b", view="api", source="u1", content=api_content([]))
    with pytest.raises(ValidationError):
        PcesAnswer(evidence=())


def test_content_keys_are_unique_checked_and_shallow() -> None:
    """C3: content is structured text: unique keys of a fixed alphabet, bounded nesting."""
    with pytest.raises(ValidationError, match="'a' is repeated"):
        Content(entries=(Entry(key="a", value="1"), Entry(key="a", value="2")))
    for bad in ("", "a b", "a:b", "-a", "</content>"):
        with pytest.raises(ValidationError, match="expected a key"):
            Entry(key=bad, value="x")
    deep: Content = Content.of({"leaf": "x"})
    for _ in range(MAX_NESTING - 1):
        deep = Content.of({"k": deep})
    with pytest.raises(ValidationError, match=f"mappings at most {MAX_NESTING} deep"):
        Content.of({"k": deep})


GOOD = wrap("u1", "api", "u1", "  signatures:", "    - f()")


@pytest.mark.parametrize(
    ("text", "line", "expected", "found"),
    [
        ("", 1, "`<pcir>`", "end of input"),
        ("<pcir>", 1, "`<evidence>`", "end of input"),
        ("<pcir>\n", 2, "`<evidence>`", "end of input"),
        ("<pcir>\n</pcir>\n", 2, "`<evidence>`", "'</pcir>'"),
        (
            GOOD.replace("ref: u1", "ref: a b"),
            3,
            "`ref: <ref>` where <ref> is a ref without whitespace or "
            "control characters (spaces only around '->')",
            "'ref: a b'",
        ),
        (
            GOOD.replace("view: api", "view: API"),
            4,
            "`view: <exist|definition|api|impl|asm|summary|callchain>`",
            "'view: API'",
        ),
        (
            GOOD.replace("view: api", "view: callchain"),
            4,
            "a view that agrees with the ref (view callchain needs a ref with two ends, <ref> -> <ref>)",
            "'view: callchain'",
        ),
        (GOOD.replace("source: u1", "source: u01"), 5, "`source: <u<ID>|layout|unknown>`", "'source: u01'"),
        (GOOD.replace("source: u1\n", ""), 5, "`source: <u<ID>|layout|unknown>`", "'content:'"),
        (
            GOOD.replace("  signatures:", "   signatures:"),
            7,
            "an entry `<key>: <value>` indented by 2 spaces",
            "'   signatures:'",
        ),
        (
            GOOD.replace("  signatures:\n    - f()", "  signatures:"),
            8,
            "items `- ...` or entries indented by 4 spaces (empty: `[]`, `{}`)",
            "'</content>'",
        ),
        (GOOD.replace("    - f()", "    -f()"), 8, "a space and a value after ':' or '-'", "'    -f()'"),
        (GOOD.replace("    - f()", "    - f() "), 8, "'    - |-' (the canonical form)", "'    - f() '"),
        (
            GOOD.replace("  signatures:\n    - f()", "  signatures: x"),
            6,
            "api content: `signatures:` a list; or `status: "
            "missing` [and `reason: <text>`], or `status: ambiguous` [and `candidates:` a list]",
            "content with keys signatures",
        ),
        (
            GOOD.replace("    - f()", "    - f()\n  signatures: []"),
            9,
            "each key once in a mapping ('signatures' is repeated)",
            "'  signatures: []'",
        ),
        (
            GOOD.replace("</content>\n", ""),
            9,
            "an entry `<key>: <value>` indented by 2 spaces, or `</content>`",
            "'</evidence>'",
        ),
        (GOOD.replace("</pcir>", "</pcir>\n"), 12, "end of input after `</pcir>`", "''"),
        (GOOD.replace("</pcir>", "junk"), 11, "`<evidence>` or `</pcir>`", "'junk'"),
        (GOOD.replace("\n</pcir>", ""), 11, "`<evidence>` or `</pcir>`", "end of input"),
        (
            wrap("f", "impl", "u1", "  implementation: |-", "    a", ""),
            7,
            "'  implementation: |' (the canonical form)",
            "'  implementation: |-'",
        ),
        (
            wrap("f", "impl", "u1", "  implementation: |", "    a", ""),
            7,
            "'  implementation: |+' (the canonical form)",
            "'  implementation: |'",
        ),
    ],
)
def test_parse_pces_errors(text: str, line: int, expected: str, found: str) -> None:
    """C1: parse_pces accepts exactly what render_pces writes; errors name line, expected and found."""
    with pytest.raises(PcesFormatError) as caught:
        parse_pces(text)
    error = caught.value
    assert (error.line, error.expected, error.found) == (line, expected, found)
    assert error.message == f"line {line}: expected {expected}, found {found}"


def test_pces_format_error_is_a_protocol_fault_that_pickles() -> None:
    """C1: a broken answer is a protocol fault (SCHEMA_VIOLATION) and pickles."""
    with pytest.raises(PcesFormatError) as caught:
        parse_pces("x")
    error = caught.value
    assert isinstance(error, ProtocolFault)
    assert error.code is FailCode.SCHEMA_VIOLATION
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.message, copy.line, copy.expected, copy.found, copy.code) == (
        PcesFormatError,
        "line 1: expected `<pcir>`, found 'x'",
        1,
        "`<pcir>`",
        "'x'",
        FailCode.SCHEMA_VIOLATION,
    )
    assert copy.to_dict()["line"] == 1


# --------------------------------------------------------------------------------------------------
# PCES: properties
# --------------------------------------------------------------------------------------------------

_ADVERSARIAL = st.sampled_from(
    [
        "</content>",
        "</evidence>",
        "</pcir>",
        "<evidence>",
        "content:",
        "ref: x",
        "view: api",
        "source: u1",
        "- x",
        "  - y",
        "key: value",
        "  key: value",
        "|",
        "|-",
        "|+",
        "[]",
        "{}",
        "",
        " ",
        "    ",
        "\t",
        "\tx",
        "  leading",
        "trailing  ",
        "a\rb",
        "\r",
        "\x0b\x0c\x1c\x85\u2028\u2029",
        "ünïcödé 漢字 🙂",
        "\ufeff",
    ]
)
_CODE = st.one_of(
    st.text(),
    st.tuples(
        st.lists(st.one_of(_ADVERSARIAL, st.text(max_size=8)), max_size=8).map("\n".join),
        st.sampled_from(["", "\n", "\n\n", "\n\n\n"]),
    ).map("".join),
)
_KEY = st.from_regex(r"[\w.$][\w.$/@+\-]{0,8}", fullmatch=True)
_SUMMARY = st.recursive(
    _CODE,
    lambda inner: st.dictionaries(_KEY, inner, min_size=0, max_size=3).map(Content.of),
    max_leaves=8,
)
_HOP_TEXT = st.builds(
    call_hop,
    st.integers(0, 10**6),
    st.from_regex(r"[^\s]{1,10}", fullmatch=True),
    st.none() | st.from_regex(r"[^\s][^\n]{0,12}", fullmatch=True),
)
_CONTENT_BY_VIEW = {
    "exist": st.one_of(st.builds(exist_content, st.just("yes"), _CODE), st.just(exist_content("no"))),
    "definition": st.builds(
        definition_content,
        st.sampled_from(["func", "class", "var", "label", "type"]),
        st.integers(0, 10**9),
        _CODE,
    ),
    "api": st.builds(api_content, st.lists(_CODE, max_size=4)),
    "impl": st.builds(impl_content, st.one_of(_CODE, st.lists(_CODE, max_size=4))),
    "asm": st.builds(asm_content, st.lists(_CODE, max_size=3), st.lists(_CODE, max_size=3)),
    "summary": st.dictionaries(_KEY, _SUMMARY, min_size=1, max_size=4).map(Content.of),
    "callchain": st.builds(callchain_content, st.lists(_HOP_TEXT, min_size=1, max_size=4)),
}
_ERROR_CONTENT = st.one_of(
    st.builds(missing_content, st.none() | _CODE),
    st.builds(ambiguous_content, st.none() | st.lists(_CODE, max_size=3)),
)


@st.composite
def _evidence(draw: st.DrawFn) -> Evidence:
    view = draw(st.sampled_from(VIEWS))
    ref = draw(_of_kind(draw(st.sampled_from(sorted(_REF_TEXTS)))))
    if view == "callchain":
        ref = f"{ref} -> {draw(_END_TEXT)}"
    content = draw(st.one_of(_CONTENT_BY_VIEW[view], _ERROR_CONTENT))
    source = draw(st.sampled_from(["layout", "unknown"]) | st.integers(0, 10**6).map(unit_id))
    return Evidence(ref=ref, view=view, source=source, content=content)


@pytest.mark.slow
@settings(max_examples=500)
@given(st.lists(_evidence(), min_size=1, max_size=4))
def test_render_parse_round_trip(evidence: list[Evidence]) -> None:
    """C1, C3: render -> parse gives back the same answer for any code text, however adversarial."""
    answer = PcesAnswer(evidence=tuple(evidence))
    text = render_pces(answer)
    assert parse_pces(text) == answer
    assert render_pces(parse_pces(text)) == text
    assert text.count("\n<evidence>\n") == len(evidence)  # no code line can open or close structure


@pytest.mark.slow
@settings(max_examples=2000)
@given(
    st.one_of(
        st.text(),
        st.lists(
            st.one_of(_ADVERSARIAL, st.sampled_from(["<pcir>", "  implementation: |", "    - |-"])),
            max_size=20,
        ).map("\n".join),
    )
)
def test_fuzz_parse_pces_raises_only_format_errors(text: str) -> None:
    """C1: on any text, parse_pces returns an answer or raises PcesFormatError (never anything else)."""
    try:
        answer = parse_pces(text)
    except PcesFormatError as error:
        assert 1 <= error.line <= text.count("\n") + 1
    else:
        assert render_pces(answer).removesuffix("\n") == text.removesuffix("\n")


# --------------------------------------------------------------------------------------------------
# docs/pcr.md stays true
# --------------------------------------------------------------------------------------------------

DOC = Path(__file__).parent.parent / "docs" / "pcr.md"


def _text_blocks(markdown: str) -> list[str]:
    return [block.split("\n", 1)[1].rsplit("```", 1)[0] for block in markdown.split("```text")[1:]]


def test_the_docs_full_example_parses_and_matches() -> None:
    """C1, C2, C5: the full example of docs/pcr.md: the answer renders canonically, one evidence per need
    in order with the need's ref and view."""
    section = DOC.read_text(encoding="utf-8").split("## A full example", 1)[1]
    request_text, answer_text = _text_blocks(section)[:2]
    request = parse_pcr(request_text)
    answer = parse_pces(answer_text)
    assert render_pces(answer) == answer_text
    assert [(e.ref, e.view) for e in answer.evidence] == [(n.ref, n.view) for n in request.needs]


def test_the_docs_error_messages_are_real() -> None:
    """C5: every error message docs/pcr.md shows is what parse_pcr says for some input."""
    inputs = [
        "<pcr>\n<need>\nref: u12\nveiw: api\n</need>\n</pcr>\n",
        "<pcr>\n</pcr>\n",
        "<pcr>\n<need>\nref: u012\n",
        "<pcr>\n<need>\nref: a.py::f#1\n",
        "<pcr>\n<need>\nref: a -> b\nview: api\n</need>\n",
        "<pcr>\n<need>\nview: callchain\nref: handle_request\n</need>\n",
        "<pcr>\n<need>\nref: u1\nview: api\n",
    ]
    errors = _text_blocks(DOC.read_text(encoding="utf-8").split("### Errors", 1)[1])[0].splitlines()
    assert errors == [pcr_error(text).message for text in inputs]


@pytest.mark.parametrize("view", ["exist", "definition", "api", "impl", "asm", "summary", "callchain"])
def test_same_as_back_reference_is_valid_for_every_view(view: str) -> None:
    """C5: a block whose content an earlier block gave refers back with `same_as: evidence N`."""
    from pagedctx.protocol.code_evidence.pces import same_as_content, shape_problem

    assert shape_problem(view, same_as_content(3)) is None
    if view != "summary":  # a summary is any key: value pairs, so these are summaries
        assert shape_problem(view, Content.of({"same_as": "evidence 0"})) is not None
        assert shape_problem(view, Content.of({"same_as": "evidence 2", "extra": "x"})) is not None
    with pytest.raises(ValueError, match="start at 1"):
        same_as_content(0)
