"""Parse `<PagedContext>` XML back into a typed document (P6), strictly.

Both node forms are read (`pagedctx.protocol.paged_context.render`): the full one (every
attribute, `<Summary>` / `<Content>` elements) and the dense one (the text is the node's own,
attributes a reader can derive are left out: the view from the shape, the depth from the
nesting, the origin from the parent or the container, the timestamp from the node before:
`time` gives its end, `HH:MM` or `MM-DDTHH:MM`, the node before the rest).

Input is untrusted: entities are not resolved, no DTD is loaded, nothing is fetched from the
network, and a document type declaration is refused. Large documents (megabytes of page content)
parse (`huge_tree`). Any failure is a `ContextFormatError` naming the line and what was wrong.
"""

from __future__ import annotations

from datetime import datetime, time

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
from pagedctx.protocol.paged_context.schema import known_valid, validation_errors
from pagedctx.protocol.paged_context.xml_text import ESCAPE_ATTRIBUTE, ESCAPE_VALUE, decode

__all__ = ["parse_document", "parse_tree", "validate_text"]


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=True,
        remove_comments=True,
        remove_pis=True,
    )


def parse_tree(text: str | bytes) -> etree._Element:
    """Parse and validate; the root element of a valid document or a ContextFormatError."""
    if isinstance(text, str):
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ContextFormatError(
                f"the document holds a character that cannot be encoded ({exc.reason}); "
                "XML 1.0 documents carry no lone surrogates"
            ) from exc
    else:
        data = text
    try:
        tree = etree.fromstring(data, _parser()).getroottree()
    except etree.XMLSyntaxError as exc:
        line, column = exc.position if exc.position else (None, None)
        raise ContextFormatError(f"not well-formed XML: {exc.msg}", line=line, column=column) from exc
    if getattr(tree.docinfo, "doctype", ""):
        raise ContextFormatError("a <!DOCTYPE> declaration is not allowed in a PagedContext document", line=1)
    root = tree.getroot()
    errors = [] if known_valid(data) else validation_errors(root)  # these bytes were checked here before
    if errors:
        first = errors[0]
        where = f"line {first.line}: " if first.line else ""
        raise ContextFormatError(
            f"{where}the document does not match the PagedContext schema: "
            + "; ".join(e.message for e in errors[:5]),
            line=first.line,
            column=first.column,
        )
    return root


def validate_text(text: str | bytes) -> None:
    """Raise ContextFormatError unless `text` is a valid PagedContext document."""
    parse_tree(text)


def _escaped(element: etree._Element) -> bool:
    return element.get(ESCAPE_ATTRIBUTE) == ESCAPE_VALUE


def _text(element: etree._Element) -> str:
    text = element.text or ""
    return decode(text) if _escaped(element) else text


def _attr(element: etree._Element, name: str) -> str:
    value = element.get(name, "")
    return decode(value) if _escaped(element) else value


def _keywords(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(k.strip() for k in value.split(",") if k.strip())


class _Context:
    """What a node inherits while its container is read: the origin default, the last timestamp."""

    def __init__(self, origin: Origin | None) -> None:
        self.dense_origin = origin is not None
        self.origin = origin
        self.last: datetime | None = None

    def timestamp(self, element: etree._Element) -> datetime:
        stamp = element.get("timestamp")
        clock = element.get("time")
        if stamp is not None:
            value = datetime.fromisoformat(stamp)
        elif clock is not None:
            if self.last is None:
                raise ValueError(f"node {element.get('id')}: time={clock!r} with no timestamp before it")
            day, _, clock = clock.rpartition("T")  # MM-DDT: another day of the same year
            date = self.last.date()
            if day:
                month, _, day_of_month = day.partition("-")
                date = date.replace(month=int(month), day=int(day_of_month))
            value = datetime.combine(date, time.fromisoformat(clock), tzinfo=self.last.tzinfo)
        elif self.last is not None:
            value = self.last
        else:
            raise ValueError(f"node {element.get('id')}: the first node of a container needs a timestamp")
        self.last = value
        return value


def _node(
    element: etree._Element, context: _Context, implied_depth: int, inherited: Origin | None, background: bool
) -> ContextNode:
    summary: str | None = None
    content: str | None = None
    nested: list[etree._Element] = []
    payload = False
    for child in element:
        if child.tag == "Summary":
            summary, payload = _text(child), True
        elif child.tag == "Content":
            content, payload = _text(child), True
        else:
            nested.append(child)
    view_attr = element.get("view")
    type_attr = element.get("type")
    if view_attr is not None:
        view = View(view_attr)
    elif background:
        view = View.SUMMARY
    else:
        view = View.UNPACKED if nested else View.DETAIL
    page_type = PageType(type_attr) if type_attr is not None else (
        PageType.CONSOLIDATED if nested else PageType.ORIGINAL
    )  # fmt: skip
    if not payload and not nested:  # the dense form: the text is the node's own
        own = _text(element)
        if view is View.DETAIL:
            content = own
        elif view is View.SUMMARY:
            summary = own or None
    origin_attr = element.get("origin")
    origin = Origin(origin_attr) if origin_attr is not None else inherited
    depth_attr = element.get("depth")
    depth = int(depth_attr) if depth_attr is not None else implied_depth
    timestamp = context.timestamp(element)
    below = origin if context.dense_origin else None
    children = tuple(_node(child, context, depth + 1, below, False) for child in nested)
    return ContextNode(
        id=element.get("id", ""),
        type=page_type,
        view=view,
        depth=depth,
        origin=origin,
        keywords=_keywords(element.get("keywords")),
        timestamp=timestamp,
        handle=element.get("handle"),
        draft=element.get("draft") == "true",
        summary=summary,
        content=content,
        children=children,
    )


def _nodes(container: etree._Element, background: bool) -> tuple[ContextNode, ...]:
    default = container.get("origin")
    origin = Origin(default) if default is not None else None
    context = _Context(origin)
    return tuple(_node(n, context, 0, origin, background) for n in container)


def _document(root: etree._Element) -> PagedContextDocument:
    static = root.find("Static_Registry")
    assert static is not None  # guaranteed by the schema
    st_nodes = static.findall("ST-Node")
    current_time = datetime.fromisoformat(st_nodes[0].get("value", ""))
    registry = tuple(RegistryEntry(id=n.get("id", ""), value=_attr(n, "value")) for n in st_nodes[1:])
    instructions = static.find("System_Instructions")
    query = root.find("Query")
    steps = root.find("Reasoning_Trace")
    flow = root.find("Linear_Flow")
    background = root.find("Background_Context")
    assert instructions is not None and query is not None and steps is not None and flow is not None
    return PagedContextDocument(
        version=root.get("version", ""),
        current_time=current_time,
        registry=registry,
        system_instructions=_text(instructions),
        query=_text(query),
        trace=tuple(
            TraceStep(
                action=s.get("action", ""),
                target=_attr(s, "target"),
                reason=_attr(s, "reason"),
                keywords=_keywords(s.get("keywords")),
                status=s.get("status"),
            )
            for s in steps
        ),
        flow=_nodes(flow, background=False),
        background=_nodes(background, background=True) if background is not None else None,
    )


def parse_document(text: str | bytes) -> PagedContextDocument:
    """Parse a PagedContext document into its typed form."""
    root = parse_tree(text)
    try:
        return _document(root)
    except (ValidationError, ValueError) as exc:
        # The schema leaves a few rules to the model (keyword syntax, date range edge cases).
        raise ContextFormatError(f"the document is valid XML but not a valid PagedContext: {exc}") from exc
