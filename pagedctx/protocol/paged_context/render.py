"""Render the `<PagedContext>` XML (P6, P7) with lxml, validated against the shipped schema.

Two entry points share one element builder, so they cannot drift apart:
- `render_document(doc)` for a typed `PagedContextDocument` (the parse/render round trip);
- `render_state(state, ...)` straight from a session state (the per-turn hot path: no
  intermediate objects per node).

Text is never concatenated into markup: every value goes through lxml, and strings XML 1.0 cannot
carry are written in backslash form (`pagedctx.protocol.paged_context.xml_text`). Pages are ordered on the
timeline (timestamp, then id). Every rendered document is validated; a failure is a bug, raised
as ContextFormatError.

Two forms, one schema. The dense form (the default) writes what a reader needs per node
and nothing it can derive:
- the page's text is the `<Node>`'s own text: its content (Detail), or its summary with
  `view="Summary"` (a Background_Context node is always a Summary and says nothing); child
  `<Node>`s mean Unpacked. `type` is written only for a Consolidated page not Unpacked;
- `depth` only where it is not the nesting (0 for a root, the parent's + 1 below it);
- `origin` once on `<Linear_Flow>` / `<Background_Context>` (their most common origin, when every
  node there has one), and on a node only where it differs from its parent's (or the container's);
- `timestamp` only when it changes from the node before (document order within the container),
  and as `time="HH:MM"` (seconds when there are any) when only the time of day changed, as
  `time="MM-DDTHH:MM"` when only the year and the zone stay (the rest comes from the node before);
- `keywords` only those the node's text does not already say (all of them on an Unpacked page, which
  shows no text of its own: a file's path, a segment's topic); `handle` only on a Consolidated page
  (Explore searches inside a structured block; a turn or a chunk has no inside).
`dense_form(doc)` is what a document looks like after a dense round trip: `parse_document` of the
dense XML gives exactly it. The full form (`dense=False`) writes every attribute on every node, with
`<Summary>` / `<Content>` elements, as the seed's boilerplate (section 9.3) does.

One room: both forms, both entry points and the node estimate (`node_lines`) write the same
`<Node>`, and are kept beside the one element builder so they cannot drift apart.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from lxml import etree

from pagedctx.errors import ContextFormatError
from pagedctx.pages import ConsolidatedPage, Origin, OriginalPage, Page, PageType, SessionState, View
from pagedctx.protocol.paged_context.context import (
    PROTOCOL_VERSION,
    ContextNode,
    PagedContextDocument,
    RegistryEntry,
    TraceStep,
)
from pagedctx.protocol.paged_context.instructions_text import SHORT_INSTRUCTIONS
from pagedctx.protocol.paged_context.schema import validation_errors
from pagedctx.protocol.paged_context.xml_text import ESCAPE_ATTRIBUTE, ESCAPE_VALUE, encode, needs_escape

__all__ = [
    "build_document_tree",
    "build_state_tree",
    "dense_form",
    "dense_keywords",
    "dense_time",
    "markup_tokens",
    "node_lines",
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


def dense_keywords(keywords: Sequence[str], text: str | None) -> tuple[str, ...]:
    """The keywords a dense node shows: those the text it shows does not already say."""
    if not keywords:
        return ()
    return _dense_keywords(tuple(keywords), text)


@functools.lru_cache(maxsize=8192)  # a node is rendered many times a round (governance, the fill)
def _dense_keywords(keywords: tuple[str, ...], text: str | None) -> tuple[str, ...]:
    said = set(_WORD.findall((text or "").casefold()))
    return tuple(k for k in keywords if not set(_WORD.findall(k.casefold())) <= said)


_WORD = re.compile(r"\w+")


def _stamp(value: datetime) -> str:
    """ISO-8601 in its shortest form `datetime.fromisoformat` reads back: `Z` for UTC, no seconds
    when there are none."""
    return _zulu(value.isoformat("T", "minutes" if not value.second and not value.microsecond else "auto"))


def _zulu(text: str) -> str:
    """An ISO-8601 time with `Z` for UTC: 3 tokens fewer than `+00:00` in every view."""
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def dense_time(value: datetime, previous: datetime | None) -> tuple[str, str] | None:
    """The dense timestamp attribute of a node after one stamped `previous`: None when equal;
    within the same zone, `time` when only the time of day changed (`HH:MM`, seconds when there are
    any) and `time="MM-DDTHH:MM"` when the year is the same; else `timestamp` whole."""
    if previous is not None and value == previous and value.utcoffset() == previous.utcoffset():
        return None
    if (
        previous is not None
        and value.year == previous.year
        and (value.tzinfo is None) == (previous.tzinfo is None)
        and value.utcoffset() == previous.utcoffset()
    ):
        clock = value.time()
        text = clock.isoformat("minutes" if not clock.second and not clock.microsecond else "auto")
        return "time", text if value.date() == previous.date() else f"{value:%m-%d}T{text}"
    return "timestamp", _stamp(value)


@dataclass(slots=True)
class _Scope:
    """What a dense node inherits within one container: the origin default, the last timestamp."""

    dense: bool
    origin: Origin | None = None
    last: datetime | None = None


@dataclass(frozen=True, slots=True)
class _Shown:
    """One page as a node shows it: the fields of a `<Node>`, and what the dense form derives from."""

    page_id: str
    page_type: PageType
    view: View
    depth: int
    origin: Origin | None
    keywords: Sequence[str]
    timestamp: datetime
    handle: str | None
    draft: bool
    summary: str | None
    content: str | None


def _full_element(parent: etree._Element, shown: _Shown) -> etree._Element:
    # Attribute order follows the seed's boilerplate (section 9.3); one dict, one lxml call.
    attrib = {"id": shown.page_id, "type": shown.page_type.value, "view": shown.view.value}
    attrib["depth"] = str(shown.depth)
    if shown.keywords:
        attrib["keywords"] = ", ".join(shown.keywords)
    if shown.origin is not None:
        attrib["origin"] = shown.origin.value
    attrib["timestamp"] = shown.timestamp.isoformat()
    if shown.handle is not None:
        attrib["handle"] = shown.handle
    if shown.draft:
        attrib["draft"] = "true"
    node = etree.SubElement(parent, "Node", attrib)
    if shown.summary is not None:
        _set_text(etree.SubElement(node, "Summary"), shown.summary)
    if shown.content is not None:
        _set_text(etree.SubElement(node, "Content"), shown.content)
    return node


def _dense_element(
    parent: etree._Element,
    scope: _Scope,
    shown: _Shown,
    *,
    implied_depth: int,
    inherited: Origin | None,
    background: bool,
) -> etree._Element:
    attrib = {"id": shown.page_id}
    view = shown.view
    if shown.page_type is PageType.CONSOLIDATED and view is not View.UNPACKED:
        attrib["type"] = shown.page_type.value
    if view is View.SUMMARY and not background:
        attrib["view"] = view.value
    if shown.depth != implied_depth:
        attrib["depth"] = str(shown.depth)
    text = shown.content if view is View.DETAIL else shown.summary if view is View.SUMMARY else None
    keywords = dense_keywords(shown.keywords, text)
    if keywords:
        attrib["keywords"] = ", ".join(keywords)
    if shown.origin is not inherited and shown.origin is not None:
        attrib["origin"] = shown.origin.value
    stamp = dense_time(shown.timestamp, scope.last)
    if stamp is not None:
        attrib[stamp[0]] = stamp[1]
    scope.last = shown.timestamp
    if shown.handle is not None and shown.page_type is PageType.CONSOLIDATED:
        attrib["handle"] = shown.handle
    if shown.draft:
        attrib["draft"] = "true"
    node = etree.SubElement(parent, "Node", attrib)
    if text:
        _set_text(node, text)
    return node


def _node_element(
    parent: etree._Element,
    scope: _Scope,
    shown: _Shown,
    *,
    implied_depth: int,
    inherited: Origin | None,
    background: bool,
) -> etree._Element:
    if not scope.dense:
        return _full_element(parent, shown)
    return _dense_element(
        parent, scope, shown, implied_depth=implied_depth, inherited=inherited, background=background
    )


def _scope_for(dense: bool, origins: Iterable[Origin | None]) -> _Scope:
    """A container's scope: its default origin is the most common one, when every node has one."""
    if not dense:
        return _Scope(dense=False)
    counted = Counter(origins)
    if not counted or None in counted:
        return _Scope(dense=True)
    best = max(counted.values())
    return _Scope(dense=True, origin=next(o for o, n in counted.items() if n == best))


def _container(root: etree._Element, tag: str, scope: _Scope) -> etree._Element:
    element = etree.SubElement(root, tag)
    if scope.origin is not None:
        element.set("origin", scope.origin.value)
    return element


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
    etree.SubElement(static, "ST-Node", id="CURRENT_TIME", value=_zulu(current_time.isoformat()))
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


def _escaped_text(text: str) -> tuple[str, str]:
    """(the escape marker attribute, the text) as lxml writes a node's text."""
    marker = ""
    if needs_escape(text):
        text = encode(text)
        marker = f' {ESCAPE_ATTRIBUTE}="{ESCAPE_VALUE}"'
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
    return marker, text


_NODE_LINES_KEPT = 4096  # nodes remembered (a round shows a few hundred; governance re-reads them)
_node_memo: OrderedDict[tuple[int, View, int, str], tuple[Page, tuple[str, ...]]] = OrderedDict()
_node_lock = threading.Lock()


def node_lines(page: Page, view: View, level: int, indent: str = "") -> list[str]:
    """A text shaped like the page's dense `<Node>` at nesting `level` (an estimate for overflow
    governance: the exact count is of the XML), given as its element lines (each ends before a
    line break followed by a `<`; text never holds a literal `<`). It assumes the origin and the
    depth implied and the timestamp written whole: a node costs at most about this much, so a
    move saves at least what it is credited with and governance never takes more than it needs
    (the exact count of the render after a batch decides whether more is needed).

    A page is immutable: the lines of the last pages asked are remembered by the page object
    (`_NODE_LINES_KEPT`), since governance and the fill price the same nodes many times a round."""
    key = (id(page), view, level, indent)
    with _node_lock:
        kept = _node_memo.get(key)
        if kept is not None and kept[0] is page:
            _node_memo.move_to_end(key)
            return list(kept[1])
    lines = _node_lines(page, view, level, indent)
    with _node_lock:
        _node_memo[key] = (page, tuple(lines))
        _node_memo.move_to_end(key)
        if len(_node_memo) > _NODE_LINES_KEPT:
            _node_memo.popitem(last=False)
    return lines


def _node_lines(page: Page, view: View, level: int, indent: str) -> list[str]:
    pad = indent * level
    attributes = f'id="{page.id}"'
    if page.type is PageType.CONSOLIDATED and view is not View.UNPACKED:
        attributes += ' type="Consolidated"'
    if view is View.SUMMARY:
        attributes += ' view="Summary"'
    text: str | None = None
    if view is View.DETAIL:
        text = page.content if isinstance(page, OriginalPage) else page.summary
    elif view is View.SUMMARY:
        text = page.summary or None
    keywords = dense_keywords(page.keywords, text)
    if keywords:
        attributes += ' keywords="' + _escaped_text(", ".join(keywords))[1].replace('"', "&quot;") + '"'
    attributes += f' timestamp="{_stamp(page.timestamp)}"'
    if page.pblock is not None and page.type is PageType.CONSOLIDATED:
        attributes += f' handle="{page.pblock}"'
    if page.draft:
        attributes += ' draft="true"'
    if view is View.UNPACKED:
        return [f"{pad}<Node {attributes}>\n", f"{pad}</Node>\n"]
    if not text:
        return [f"{pad}<Node {attributes}/>\n"]
    marker, body = _escaped_text(text)
    return [f"{pad}<Node {attributes}{marker}>{body}</Node>\n"]


# --- from a typed document -----------------------------------------------------------------


def _document_node(
    parent: etree._Element, scope: _Scope, node: ContextNode, implied_depth: int, inherited: Origin | None,
    *, background: bool = False,
) -> None:  # fmt: skip
    shown = _Shown(
        node.id, node.type, node.view, node.depth, node.origin, node.keywords, node.timestamp,
        node.handle, node.draft, node.summary, node.content,
    )  # fmt: skip
    element = _node_element(
        parent, scope, shown, implied_depth=implied_depth, inherited=inherited, background=background
    )
    for child in node.children:
        _document_node(element, scope, child, node.depth + 1, node.origin if scope.origin else None)


def _all_nodes(nodes: Iterable[ContextNode]) -> Iterable[ContextNode]:
    for node in nodes:
        yield node
        yield from _all_nodes(node.children)


def build_document_tree(doc: PagedContextDocument, *, dense: bool = True) -> etree._Element:
    """The lxml tree of a typed document, nodes in the order the document gives them."""
    root, flow = _skeleton(
        version=doc.version,
        current_time=doc.current_time,
        registry=doc.registry,
        system_instructions=doc.system_instructions,
        query=doc.query,
        trace=doc.trace,
    )
    root.remove(flow)
    scope = _scope_for(dense, (n.origin for n in _all_nodes(doc.flow)))
    flow = _container(root, "Linear_Flow", scope)
    for node in doc.flow:
        _document_node(flow, scope, node, 0, scope.origin)
    if doc.background is not None:
        back_scope = _scope_for(dense, (n.origin for n in doc.background))
        background = _container(root, "Background_Context", back_scope)
        for node in doc.background:
            _document_node(background, back_scope, node, 0, back_scope.origin, background=True)
    return root


def render_document(doc: PagedContextDocument, *, validate: bool = True, dense: bool = True) -> str:
    """The XML text of a typed document."""
    return serialize(build_document_tree(doc, dense=dense), validate=validate, indent=not dense)


def dense_form(doc: PagedContextDocument) -> PagedContextDocument:
    """`doc` as a dense round trip gives it back (module docstring): only the keywords its text does
    not say, handles only on Consolidated pages, an empty summary as
    none."""

    def node(n: ContextNode) -> ContextNode:
        summary = n.summary or None
        text = n.content if n.view is View.DETAIL else summary if n.view is View.SUMMARY else None
        keywords = dense_keywords(n.keywords, text)
        handle = n.handle if n.type is PageType.CONSOLIDATED else None
        return n.model_copy(
            update={
                "summary": summary,
                "keywords": keywords,
                "handle": handle,
                "children": tuple(node(c) for c in n.children),
            }
        )

    background = tuple(node(n) for n in doc.background) if doc.background is not None else None
    return doc.model_copy(update={"flow": tuple(node(n) for n in doc.flow), "background": background})


# --- straight from a session state ---------------------------------------------------------


def _page_element(
    parent: etree._Element,
    scope: _Scope,
    state: SessionState,
    page: Page,
    view: View,
    *,
    implied_depth: int,
    inherited: Origin | None,
    background: bool = False,
) -> None:
    summary: str | None = None
    content: str | None = None
    if view is View.SUMMARY:
        summary = page.summary or None
    elif view is View.DETAIL:
        # P4: Detail shows an Original page's content, and a Consolidated page's summary in full.
        content = page.content if isinstance(page, OriginalPage) else page.summary
    shown = _Shown(
        page.id, page.type, view, page.depth, page.origin, page.keywords, page.timestamp, page.pblock,
        page.draft, summary, content,
    )  # fmt: skip
    element = _node_element(
        parent, scope, shown, implied_depth=implied_depth, inherited=inherited, background=background
    )
    if view is View.UNPACKED and isinstance(page, ConsolidatedPage):
        below = page.origin if scope.origin else None
        for child_id in _on_timeline(state, state.children_of(page.id)):
            child = state.pages[child_id]
            view_of = state.views[child_id]
            _page_element(
                element, scope, state, child, view_of, implied_depth=page.depth + 1, inherited=below
            )


def _on_timeline(state: SessionState, page_ids: Iterable[str]) -> list[str]:
    pages = state.pages
    return sorted(page_ids, key=lambda i: timeline_key(pages[i].timestamp, i))


def _shown_origins(state: SessionState, roots: Iterable[str], unpack: bool) -> Iterable[Origin | None]:
    stack = list(roots)
    while stack:
        page_id = stack.pop()
        yield state.pages[page_id].origin
        if unpack and state.views[page_id] is View.UNPACKED:
            stack.extend(state.children_of(page_id))


def build_state_tree(
    state: SessionState,
    *,
    current_time: datetime,
    query: str = "",
    trace: Sequence[TraceStep] = (),
    registry: Sequence[RegistryEntry] = (),
    system_instructions: str = SHORT_INSTRUCTIONS,
    version: str = PROTOCOL_VERSION,
    dense: bool = True,
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
    root.remove(flow)
    scope = _scope_for(dense, _shown_origins(state, state.flow, unpack=True))
    flow = _container(root, "Linear_Flow", scope)
    for page_id in _on_timeline(state, state.flow):
        page, view = state.pages[page_id], state.views[page_id]
        _page_element(flow, scope, state, page, view, implied_depth=0, inherited=scope.origin)
    if state.background:
        back_scope = _scope_for(dense, _shown_origins(state, state.background, unpack=False))
        background = _container(root, "Background_Context", back_scope)
        for page_id in _on_timeline(state, state.background):
            page = state.pages[page_id]
            _page_element(
                background, back_scope, state, page, View.SUMMARY,
                implied_depth=0, inherited=back_scope.origin, background=True,
            )  # fmt: skip
    return root


def render_state(
    state: SessionState,
    *,
    current_time: datetime,
    query: str = "",
    trace: Sequence[TraceStep] = (),
    registry: Sequence[RegistryEntry] = (),
    system_instructions: str = SHORT_INSTRUCTIONS,
    validate: bool = True,
    dense: bool = True,
) -> str:
    """The XML text a Worker sees for this state (CURRENT_TIME comes from the caller's clock)."""
    tree = build_state_tree(
        state,
        current_time=current_time,
        query=query,
        trace=trace,
        registry=registry,
        system_instructions=system_instructions,
        dense=dense,
    )
    return serialize(tree, validate=validate, indent=not dense)


def serialize(root: etree._Element, *, validate: bool = True, indent: bool = False) -> str:
    """Validate (by default) and serialize a PagedContext tree, one element a line: unindented (the
    dense form's default), or indented two spaces a level as the seed's boilerplate (`indent`)."""
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
    if indent:
        return etree.tostring(root, encoding="unicode", pretty_print=True)
    _lay_out(root)
    return etree.tostring(root, encoding="unicode") + "\n"


def _lay_out(root: etree._Element) -> None:
    """One element a line, unindented (an indent costs a token a line and says nothing
    the tags do not). Only elements holding elements alone get line breaks; text is never touched."""
    for element in root.iter():
        if len(element) and not (element.text or "").strip():
            element.text = "\n"
            for child in element:
                if not (child.tail or "").strip():
                    child.tail = "\n"


def markup_tokens(xml: str, count: Callable[[str], int]) -> tuple[int, int]:
    """(page tokens, all tokens) of a rendered document: page tokens are those of the texts pages
    show (`<Summary>`, `<Content>`, a dense `<Node>`'s own text); the rest is markup (the
    markup share is `1 - page / all`)."""
    root = etree.fromstring(xml.encode("utf-8"), etree.XMLParser(huge_tree=True, resolve_entities=False))
    page = 0
    for element in root.iter("Summary", "Content", "Node"):
        if element.tag == "Node" and len(element):
            continue  # nested nodes or payload elements: its own text is layout
        if element.text:
            page += count(element.text)
    return page, count(xml)
