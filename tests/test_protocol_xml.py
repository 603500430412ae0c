"""The <PagedContext> XML (P6, P7): schema, rendering, parsing, and content that stays data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from pages_factory import build, consolidated, ok, original, pid
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import ContextFormatError
from pagedctx.pages import Origin, PageType, View, consult, fold_to_background
from pagedctx.protocol.paged_context.context import (
    SYSTEM_INSTRUCTIONS,
    ContextNode,
    PagedContextDocument,
    RegistryEntry,
    TraceStep,
)
from pagedctx.protocol.paged_context.parse import parse_document, validate_text
from pagedctx.protocol.paged_context.render import render_document, render_state
from pagedctx.protocol.paged_context.xml_text import decode, encode, needs_escape

NOW = datetime(2026, 2, 14, 11, 0, 0)
HOSTILE = [
    "</Node>",
    "]]>",
    '<Consult("x", f1a2b3c4)>',
    "\x00\x01\x1f",
    "\ud800",
    "\ufffe",
    "&amp;",
    "\\x01",
    "\r\n",
]


def test_seed_boilerplate_with_real_values_validates(data_dir: Path) -> None:
    """P6: seed 002 section 9.3, placeholders replaced by real values, matches the schema."""
    validate_text((data_dir / "seed_002_boilerplate.xml").read_bytes())


def test_seed_boilerplate_with_placeholders_is_refused(data_dir: Path) -> None:
    with pytest.raises(ContextFormatError) as info:
        validate_text((data_dir / "seed_002_boilerplate_raw.xml").read_bytes())
    assert info.value.line == 3
    assert "YYYY-MM-DDTHH:mm:ss" in info.value.message


def test_seed_boilerplate_round_trips(data_dir: Path) -> None:
    doc = parse_document((data_dir / "seed_002_boilerplate.xml").read_text(encoding="utf-8"))
    assert [n.id for n in doc.flow] == ["f1a2b3c4", "d4e5f6a1", "b2c3d4e5", "c3d4e5f6", "e5f6a7b8"]
    assert doc.flow[0].keywords == ("CS", "Addressing")
    assert [c.id for c in doc.flow[4].children] == ["a7b8c9d0", "f9e8d7c6"]
    assert doc.trace == (
        TraceStep(action="Consult", target="PageID", reason="寻找高层逻辑背后的原始证据支撑。"),
    )
    text = render_document(doc)
    assert render_document(parse_document(text)) == text


def test_render_state_matches_golden(data_dir: Path) -> None:
    """P6/P7: exact output for a known state: timeline order, views, nesting, background."""
    state = build(
        consolidated(10, [11, 3]),
        consolidated(11, [1, 2], depth=2),
        original(1, depth=3),
        original(2, depth=3),
        original(3, depth=2, minutes=1),
        original(4, minutes=0),
        original(5),
    )
    for target in (10, 10, 3):
        state = ok(consult(state, pid(target)))
    state = ok(fold_to_background(state, pid(5)))
    text = render_state(
        state,
        current_time=NOW,
        query="Where is the addressing bug?",
        trace=[
            TraceStep(action="Consult", target=pid(10), reason="need the container's children", status="ok")
        ],
        registry=[RegistryEntry(id="SESSION", value="s-1")],
        system_instructions=SYSTEM_INSTRUCTIONS,
        dense=False,  # the full form; the dense one: tests/test_dense_render.py
    )
    golden = data_dir / "render_state_golden.xml"
    assert text == golden.read_text(encoding="utf-8")


def test_render_state_orders_aware_and_naive_times_on_one_timeline() -> None:
    early = original(1).model_copy(update={"timestamp": datetime(2026, 2, 14, 9, 0, tzinfo=UTC)})
    late = original(2).model_copy(update={"timestamp": datetime(2026, 2, 14, 9, 30)})
    text = render_state(build(late, early), current_time=NOW)
    assert text.index(pid(1)) < text.index(pid(2))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_content_never_changes_structure(hostile: str) -> None:
    """P6 / DESIGN section 8: page content is data, whatever it holds."""
    page = original(1).model_copy(update={"content": f"before {hostile} after", "summary": hostile})
    state = ok(consult(build(page, original(2)), pid(1)))
    text = render_state(state, current_time=NOW, query=hostile, dense=False)  # dense: test_dense_render.py
    root = etree.fromstring(text.encode("utf-8"))
    assert len(root.findall("Linear_Flow/Node")) == 2
    assert len(root.findall(".//Content")) == 1
    doc = parse_document(text)
    assert doc.flow[0].content == f"before {hostile} after"
    assert doc.query == hostile


def test_megabytes_of_content_round_trip() -> None:
    big = ("</Node>]]><Consult" * 1000 + "x" * 1000) * 300  # about 5.7 MB
    page = original(1).model_copy(update={"content": big})
    text = render_state(ok(consult(build(page), pid(1))), current_time=NOW)
    doc = parse_document(text)
    assert doc.flow[0].content == big
    assert len(doc.flow) == 1


KEYWORD = st.text(
    st.characters(blacklist_categories=["Cc", "Cs", "Zs"], blacklist_characters=","), min_size=1
)
TIMES = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1)).map(
    lambda t: t.replace(microsecond=0)
)


def _leaf(draw: st.DrawFn, view: View) -> ContextNode:
    is_original = draw(st.booleans())
    text = draw(st.text())
    return ContextNode(
        id=draw(st.from_regex(r"\A[0-9a-f]{8}\Z")),
        type=PageType.ORIGINAL if is_original else PageType.CONSOLIDATED,
        view=view,
        depth=draw(st.integers(0, 9)),
        origin=draw(st.sampled_from(list(Origin))) if is_original else None,
        keywords=tuple(dict.fromkeys(draw(st.lists(KEYWORD.map(str.strip).filter(bool), max_size=3)))),
        timestamp=draw(TIMES),
        handle=draw(st.none() | st.from_regex(r"\Apb:[0-9a-f]{8}\Z")),
        draft=draw(st.booleans()),
        summary=text if view is View.SUMMARY and draw(st.booleans()) else None,
        content=text if view is View.DETAIL else None,
    )


@st.composite
def nodes(draw: st.DrawFn, depth: int = 0) -> ContextNode:
    if depth < 2 and draw(st.integers(0, 3)) == 0:
        kids = tuple(draw(st.lists(nodes(depth + 1), min_size=1, max_size=3)))
        base = _leaf(draw, View.SUMMARY)
        return base.model_copy(
            update={"type": PageType.CONSOLIDATED, "view": View.UNPACKED, "summary": None, "children": kids}
        )
    return _leaf(draw, draw(st.sampled_from([View.SUMMARY, View.DETAIL])))


@st.composite
def summary_nodes(draw: st.DrawFn) -> ContextNode:
    return _leaf(draw, View.SUMMARY)


@st.composite
def documents(draw: st.DrawFn) -> PagedContextDocument:
    return PagedContextDocument(
        current_time=draw(TIMES),
        registry=tuple(
            RegistryEntry(id=f"K{i}", value=v) for i, v in enumerate(draw(st.lists(st.text(), max_size=2)))
        ),
        query=draw(st.text()),
        trace=tuple(
            TraceStep(action=a, target=t, reason=r)
            for a, t, r in draw(
                st.lists(st.tuples(st.sampled_from(["Consult", "Shelve"]), st.text(), st.text()), max_size=3)
            )
        ),
        flow=tuple(draw(st.lists(nodes(), max_size=4))),
        background=draw(st.none() | st.lists(summary_nodes(), max_size=3).map(tuple)),
    )


@pytest.mark.slow
@settings(max_examples=300)
@given(documents())
def test_render_parse_render_is_identical(doc: PagedContextDocument) -> None:
    """P6: any document survives render -> parse unchanged, and renders to the same bytes again."""
    text = render_document(doc, dense=False)  # the dense form: tests/test_dense_render.py
    back = parse_document(text)
    assert back == doc
    assert render_document(back, dense=False) == text


@settings(max_examples=500)
@given(st.text())
def test_text_escape_round_trips(text: str) -> None:
    encoded = encode(text) if needs_escape(text) else text
    assert not needs_escape(encoded)
    assert (decode(encoded) if needs_escape(text) else encoded) == text


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("<PagedContext", 1, "not well-formed"),
        (
            '<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n'
            '<PagedContext version="0.1.0-alpha"/>',
            1,
            "DOCTYPE",
        ),
        ('<PagedContext version="0.1.0-alpha">\n<Query>q</Query>\n</PagedContext>', None, "schema"),
    ],
)
def test_malformed_documents_raise_context_format_error(text: str, line: int | None, fragment: str) -> None:
    with pytest.raises(ContextFormatError) as info:
        parse_document(text)
    assert fragment in info.value.message
    if line is not None:
        assert info.value.line == line


def _doc_with(node_xml: str) -> str:
    return (
        '<PagedContext version="0.1.0-alpha"><Static_Registry>'
        '<ST-Node id="CURRENT_TIME" value="2026-02-14T10:00:00"/><System_Instructions>x</System_Instructions>'
        "</Static_Registry><Query>q</Query><Reasoning_Trace/><Linear_Flow>"
        f"{node_xml}</Linear_Flow></PagedContext>"
    )


@pytest.mark.parametrize(
    "node_xml",
    [
        '<Node id="abcd1234" type="Original" view="Unpacked" depth="1" origin="History" '
        'timestamp="2026-02-14T10:00:00"><Node id="abcd1235" type="Original" view="Summary" depth="2" '
        'origin="History" timestamp="2026-02-14T10:00:00"/></Node>',
        '<Node id="abcd1234" type="Original" view="Detail" depth="1" origin="History" '
        'timestamp="2026-02-14T10:00:00"/>',
        '<Node id="abcd1234" type="Original" view="Summary" depth="1" timestamp="2026-02-14T10:00:00"/>',
        '<Node id="ABCD" type="Consolidated" view="Summary" depth="1" timestamp="2026-02-14T10:00:00"/>',
        '<Node id="abcd1234" type="Consolidated" view="Unpacked" depth="1" timestamp="2026-02-14T10:00:00"/>',
        '<Node id="abcd1234" type="Consolidated" view="Summary" depth="-1" timestamp="2026-02-14T10:00:00"/>',
        '<Node id="abcd1234" type="Consolidated" view="Summary" depth="1" timestamp="yesterday"/>',
    ],
    ids=[
        "original-unpacked",
        "detail-without-content",
        "original-without-origin",
        "bad-id",
        "unpacked-empty",
        "negative-depth",
        "bad-timestamp",
    ],
)
def test_schema_refuses_illegal_nodes(node_xml: str) -> None:
    """P4/P6: the schema encodes the view rules (Unpacked only for Consolidated, with children)."""
    with pytest.raises(ContextFormatError):
        validate_text(_doc_with(node_xml))


def test_cli_xml_validate_exit_codes(data_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    good = runner.invoke(app, ["xml", "validate", str(data_dir / "seed_002_boilerplate.xml")])
    assert good.exit_code == 0 and good.output.startswith("valid:")
    bad = runner.invoke(app, ["xml", "validate", str(data_dir / "seed_002_boilerplate_raw.xml")])
    assert bad.exit_code == 1
    assert "YYYY-MM-DDTHH:mm:ss" in bad.output
    missing = runner.invoke(app, ["xml", "validate", str(tmp_path / "nope.xml")])
    assert missing.exit_code == 2
    stdin = runner.invoke(app, ["xml", "validate", "-"], input=_doc_with(""))
    assert stdin.exit_code == 0


def test_cli_prints_the_schema() -> None:
    result = CliRunner().invoke(app, ["xml", "schema"])
    assert result.exit_code == 0
    etree.RelaxNG(etree.fromstring(result.output.encode("utf-8")))


def test_timestamps_keep_their_offsets() -> None:
    stamp = datetime(2026, 2, 14, 10, 0, tzinfo=timezone(timedelta(hours=8)))
    doc = PagedContextDocument(current_time=stamp)
    assert parse_document(render_document(doc)).current_time == stamp
