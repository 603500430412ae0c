"""Parse `<PagedContext>` XML back into a typed document (P6), strictly.

Input is untrusted: entities are not resolved, no DTD is loaded, nothing is fetched from the
network, and a document type declaration is refused. Large documents (megabytes of page content)
parse (`huge_tree`). Any failure is a `ContextFormatError` naming the line and what was wrong.
"""

from __future__ import annotations

from datetime import datetime

from lxml import etree
from pydantic import ValidationError

from pagedctx.errors import ContextFormatError
from pagedctx.pages import Origin, PageType, View
from pagedctx.protocol.context import ContextNode, PagedContextDocument, RegistryEntry, TraceStep
from pagedctx.protocol.schema import validation_errors
from pagedctx.protocol.xml_text import ESCAPE_ATTRIBUTE, ESCAPE_VALUE, decode

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
    errors = validation_errors(root)
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


def _node(element: etree._Element) -> ContextNode:
    summary: str | None = None
    content: str | None = None
    children: list[ContextNode] = []
    for child in element:
        if child.tag == "Summary":
            summary = _text(child)
        elif child.tag == "Content":
            content = _text(child)
        else:
            children.append(_node(child))
    origin = element.get("origin")
    return ContextNode(
        id=element.get("id", ""),
        type=PageType(element.get("type", "")),
        view=View(element.get("view", "")),
        depth=int(element.get("depth", "0")),
        origin=Origin(origin) if origin is not None else None,
        keywords=_keywords(element.get("keywords")),
        timestamp=datetime.fromisoformat(element.get("timestamp", "")),
        handle=element.get("handle"),
        draft=element.get("draft") == "true",
        summary=summary,
        content=content,
        children=tuple(children),
    )


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
        flow=tuple(_node(n) for n in flow),
        background=tuple(_node(n) for n in background) if background is not None else None,
    )


def parse_document(text: str | bytes) -> PagedContextDocument:
    """Parse a PagedContext document into its typed form."""
    root = parse_tree(text)
    try:
        return _document(root)
    except (ValidationError, ValueError) as exc:
        # The schema leaves a few rules to the model (keyword syntax, date range edge cases).
        raise ContextFormatError(f"the document is valid XML but not a valid PagedContext: {exc}") from exc
