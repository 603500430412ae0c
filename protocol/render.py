"""Render the `<PagedContext>` XML (P6, P7) with lxml, validated against the shipped schema.

Two entry points share one element builder, so they cannot drift apart:
- `render_document(doc)` for a typed `PagedContextDocument` (the parse/render round trip);
- `render_state(state, ...)` straight from a session state (the per-turn hot path: no
  intermediate objects per node).

Text is never concatenated into markup: every value goes through lxml, and strings XML 1.0 cannot
carry are written in backslash form (`pagedctx.protocol.xml_text`). Pages are ordered on the
timeline (timestamp, then id). Every rendered document is validated; a failure is a bug, raised
as ContextFormatError.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from lxml import etree

from pagedctx.errors import ContextFormatError
from pagedctx.pages import ConsolidatedPage, OriginalPage, Page, PageType, SessionState, View
from pagedctx.protocol.context import (
    PROTOCOL_VERSION,
    SYSTEM_INSTRUCTIONS,
    ContextNode,
    PagedContextDocument,
    RegistryEntry,
    TraceStep,
)
from pagedctx.protocol.schema import validation_errors
from pagedctx.protocol.xml_text import ESCAPE_ATTRIBUTE, ESCAPE_VALUE, encode, needs_escape

__all__ = [
    "build_document_tree",
    "build_state_tree",
    "render_document",
    "render_state",
    "serialize",
    "timeline_key",
]


def timeline_key(timestamp: datetime, page_id: str) -> tuple[datetime, str]:
    """Order on the timeline (P7): by instant (naive times are read as UTC), then by id."""
    if timestamp.tzinfo is not None:
        timestamp = timestamp.astimezone(UTC).replace(tzinfo=None)
    return (timestamp, page_id)


def _set_text(element: etree._Element, text: str) -> None:
    if needs_escape(text):
        element.set(ESCAPE_ATTRIBUTE, ESCAPE_VALUE)
        text = encode(text)
    element.text = text


def _set_free_attributes(element: etree._Element, values: Sequence[tuple[str, str]]) -> None:
    """Set attributes holding free text; if one needs escaping, all of them are escaped."""
    escape = any(needs_escape(value) for _, value in values)
    for name, value in values:
        element.set(name, encode(value) if escape else value)
    if escape:
        element.set(ESCAPE_ATTRIBUTE, ESCAPE_VALUE)


def _node_element(
    parent: etree._Element,
    *,
    page_id: str,
    page_type: PageType,
    view: View,
    depth: int,
    origin: str | None,
    keywords: Sequence[str],
    timestamp: datetime,
    handle: str | None,
    draft: bool,
    summary: str | None,
    content: str | None,
) -> etree._Element:
    # Attribute order follows the seed's boilerplate (section 9.3); one dict, one lxml call.
    attrib = {"id": page_id, "type": page_type.value, "view": view.value, "depth": str(depth)}
    if keywords:
        attrib["keywords"] = ", ".join(keywords)
    if origin is not None:
        attrib["origin"] = origin
    attrib["timestamp"] = timestamp.isoformat()
    if handle is not None:
        attrib["handle"] = handle
    if draft:
        attrib["draft"] = "true"
    node = etree.SubElement(parent, "Node", attrib)
    if summary is not None:
        _set_text(etree.SubElement(node, "Summary"), summary)
    if content is not None:
        _set_text(etree.SubElement(node, "Content"), content)
    return node


def _skeleton(
    *,
    version: str,
    current_time: datetime,
    registry: Iterable[RegistryEntry],
    system_instructions: str,
    query: str,
    trace: Iterable[TraceStep],
) -> tuple[etree._Element, etree._Element]:
    root = etree.Element("PagedContext", version=version)
    static = etree.SubElement(root, "Static_Registry")
    etree.SubElement(static, "ST-Node", id="CURRENT_TIME", value=current_time.isoformat())
    for entry in registry:
        st_node = etree.SubElement(static, "ST-Node", id=entry.id)
        _set_free_attributes(st_node, [("value", entry.value)])
    _set_text(etree.SubElement(static, "System_Instructions"), system_instructions)
    _set_text(etree.SubElement(root, "Query"), query)
    trace_el = etree.SubElement(root, "Reasoning_Trace")
    for step in trace:
        step_el = etree.SubElement(trace_el, "Step", action=step.action)
        _set_free_attributes(step_el, [("target", step.target), ("reason", step.reason)])
        if step.keywords:
            step_el.set("keywords", ", ".join(step.keywords))
        if step.status is not None:
            step_el.set("status", step.status)
    flow = etree.SubElement(root, "Linear_Flow")
    return root, flow


# --- from a typed document -----------------------------------------------------------------


def _document_node(parent: etree._Element, node: ContextNode) -> None:
    element = _node_element(
        parent,
        page_id=node.id,
        page_type=node.type,
        view=node.view,
        depth=node.depth,
        origin=node.origin.value if node.origin is not None else None,
        keywords=node.keywords,
        timestamp=node.timestamp,
        handle=node.handle,
        draft=node.draft,
        summary=node.summary,
        content=node.content,
    )
    for child in node.children:
        _document_node(element, child)


def build_document_tree(doc: PagedContextDocument) -> etree._Element:
    """The lxml tree of a typed document, nodes in the order the document gives them."""
    root, flow = _skeleton(
        version=doc.version,
        current_time=doc.current_time,
        registry=doc.registry,
        system_instructions=doc.system_instructions,
        query=doc.query,
        trace=doc.trace,
    )
    for node in doc.flow:
        _document_node(flow, node)
    if doc.background is not None:
        background = etree.SubElement(root, "Background_Context")
        for node in doc.background:
            _document_node(background, node)
    return root


def render_document(doc: PagedContextDocument, *, validate: bool = True) -> str:
    """The XML text of a typed document."""
    return serialize(build_document_tree(doc), validate=validate)


# --- straight from a session state ---------------------------------------------------------


def _page_element(parent: etree._Element, state: SessionState, page: Page, view: View) -> None:
    summary: str | None = None
    content: str | None = None
    if view is View.SUMMARY:
        summary = page.summary or None
    elif view is View.DETAIL:
        # P4: Detail shows an Original page's content, and a Consolidated page's summary in full.
        content = page.content if isinstance(page, OriginalPage) else page.summary
    element = _node_element(
        parent,
        page_id=page.id,
        page_type=page.type,
        view=view,
        depth=page.depth,
        origin=page.origin.value if page.origin is not None else None,
        keywords=page.keywords,
        timestamp=page.timestamp,
        handle=page.pblock,
        draft=page.draft,
        summary=summary,
        content=content,
    )
    if view is View.UNPACKED and isinstance(page, ConsolidatedPage):
        for child_id in _on_timeline(state, state.children_of(page.id)):
            _page_element(element, state, state.pages[child_id], state.views[child_id])


def _on_timeline(state: SessionState, page_ids: Iterable[str]) -> list[str]:
    pages = state.pages
    return sorted(page_ids, key=lambda i: timeline_key(pages[i].timestamp, i))


def build_state_tree(
    state: SessionState,
    *,
    current_time: datetime,
    query: str = "",
    trace: Sequence[TraceStep] = (),
    registry: Sequence[RegistryEntry] = (),
    system_instructions: str = SYSTEM_INSTRUCTIONS,
    version: str = PROTOCOL_VERSION,
) -> etree._Element:
    """The lxml tree showing a session state: flow and background roots on the timeline."""
    root, flow = _skeleton(
        version=version,
        current_time=current_time,
        registry=registry,
        system_instructions=system_instructions,
        query=query,
        trace=trace,
    )
    for page_id in _on_timeline(state, state.flow):
        _page_element(flow, state, state.pages[page_id], state.views[page_id])
    if state.background:
        background = etree.SubElement(root, "Background_Context")
        for page_id in _on_timeline(state, state.background):
            _page_element(background, state, state.pages[page_id], View.SUMMARY)
    return root


def render_state(
    state: SessionState,
    *,
    current_time: datetime,
    query: str = "",
    trace: Sequence[TraceStep] = (),
    registry: Sequence[RegistryEntry] = (),
    system_instructions: str = SYSTEM_INSTRUCTIONS,
    validate: bool = True,
) -> str:
    """The XML text a Worker sees for this state (CURRENT_TIME comes from the caller's clock)."""
    tree = build_state_tree(
        state,
        current_time=current_time,
        query=query,
        trace=trace,
        registry=registry,
        system_instructions=system_instructions,
    )
    return serialize(tree, validate=validate)


def serialize(root: etree._Element, *, validate: bool = True) -> str:
    """Validate (by default) and serialize a PagedContext tree, indented for the model to read."""
    if validate:
        errors = validation_errors(root)
        if errors:
            first = errors[0]
            raise ContextFormatError(
                "rendered <PagedContext> does not match the schema (a pagedctx bug, please report it): "
                + "; ".join(e.message for e in errors[:5]),
                line=first.line,
                column=first.column,
            )
    return etree.tostring(root, encoding="unicode", pretty_print=True)
