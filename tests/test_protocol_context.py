"""The typed <PagedContext> document's own rules, and the renderer's last line of defence (P6)."""

from __future__ import annotations

from datetime import datetime

import pytest
from lxml import etree
from pydantic import ValidationError

from pagedctx.errors import ContextFormatError
from pagedctx.pages import Origin, PageType, View
from pagedctx.protocol.paged_context.context import (
    ContextNode,
    PagedContextDocument,
    RegistryEntry,
    TraceStep,
)
from pagedctx.protocol.paged_context.parse import parse_document
from pagedctx.protocol.paged_context.render import build_document_tree, render_document, serialize

NOW = datetime(2026, 2, 14, 10, 0)


def node(**changes: object) -> ContextNode:
    fields: dict[str, object] = {
        "id": "abcd1234",
        "type": PageType.ORIGINAL,
        "view": View.SUMMARY,
        "depth": 1,
        "origin": Origin.HISTORY,
        "timestamp": NOW,
        "summary": "s",
    }
    fields.update(changes)
    return ContextNode.model_validate(fields)


@pytest.mark.parametrize("name", ["CURRENT_TIME", "1st", "has space", ""])
def test_registry_ids(name: str) -> None:
    with pytest.raises(ValidationError, match="registry id"):
        RegistryEntry(id=name, value="v")


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"origin": None}, "needs an origin"),
        ({"view": View.DETAIL}, "shows Summary"),
        ({"view": View.DETAIL, "summary": None, "content": None}, "shows Summary"),
        ({"view": View.UNPACKED, "summary": None}, "shows Summary"),
        ({"content": "c"}, "shows Summary"),
    ],
)
def test_node_shape_must_match_its_view(changes: dict[str, object], fragment: str) -> None:
    """P4: Summary shows a summary, Detail content, Unpacked children (Consolidated only)."""
    with pytest.raises(ValidationError, match=fragment):
        node(**changes)


def test_background_nodes_are_summaries() -> None:
    detail = node(view=View.DETAIL, summary=None, content="c")
    with pytest.raises(ValidationError, match="must be in Summary"):
        PagedContextDocument(current_time=NOW, background=(detail,))


def test_step_keywords_and_status() -> None:
    step = TraceStep(
        action="Explore", target="pb:0a1b2c3d", reason="find the retry loop", keywords=("retry", "loop")
    )
    doc = PagedContextDocument(
        current_time=NOW, trace=(step, TraceStep(action="Fault", target="x", reason="r", status="fault"))
    )
    assert parse_document(render_document(doc)) == doc
    with pytest.raises(ValidationError):
        TraceStep(action="Consult", target="x", reason="r", status="maybe")


def test_serialize_refuses_an_invalid_tree() -> None:
    """A renderer bug can never ship an invalid document: serialize validates first."""
    tree = build_document_tree(PagedContextDocument(current_time=NOW))
    etree.SubElement(tree, "Unexpected")
    with pytest.raises(ContextFormatError, match="does not match the schema"):
        serialize(tree)
    assert "<Unexpected/>" in serialize(tree, validate=False)


def test_parse_refuses_lone_surrogates_in_text_input() -> None:
    with pytest.raises(ContextFormatError, match="lone surrogates"):
        parse_document("<PagedContext>\ud800</PagedContext>")


def test_parse_reports_rules_the_schema_leaves_to_the_model() -> None:
    """Duplicate keywords pass the schema but not the page model's keyword rule."""
    text = render_document(PagedContextDocument(current_time=NOW, flow=(node(keywords=("a", "b")),)))
    with pytest.raises(ContextFormatError, match="not a valid PagedContext"):
        parse_document(text.replace('keywords="a, b"', 'keywords="a, a"'))
