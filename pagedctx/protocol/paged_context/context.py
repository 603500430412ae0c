"""The `<PagedContext>` document as typed data (P6): what the renderer writes and the parser reads.

The document is a snapshot of one round: the static registry (CURRENT_TIME first, P7), the system
instructions, the query, the reasoning trace, the Linear_Flow of nodes (nested when Unpacked) and
the optional Background_Context. `pagedctx.protocol.paged_context.render` turns it (or a
session state directly) into XML; `pagedctx.protocol.paged_context.parse` turns XML back into it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from pagedctx.pages import Keyword, Origin, PageType, View

__all__ = [
    "PROTOCOL_VERSION",
    "SYSTEM_INSTRUCTIONS",
    "ContextNode",
    "PagedContextDocument",
    "RegistryEntry",
    "TraceStep",
]

PROTOCOL_VERSION = "0.1.0-alpha"

SYSTEM_INSTRUCTIONS = """\
- Original: an atomic evidence or dialogue page; it cannot be taken apart.
- Consolidated: a logic summary page over child pages; it can be Unpacked.
- view="Summary": the distilled logic only; view="Detail": the full content; \
view="Unpacked": the container's child pages shown nested in place of its summary.
- Compare each page's timestamp with CURRENT_TIME to judge order and staleness.
- Consult(reason, id): zoom in one level (Summary → Detail; Detail → Unpacked for Consolidated).
- Explore(reason, handle, keywords): search inside the physical block `handle` with the keywords \
and materialize only the relevant pieces as new pages.
- Shelve(reason, id): zoom out one level (Unpacked → Detail; Detail → Summary) when a detail \
stops mattering; when every child of an Unpacked page is shelved, the page folds back to Detail.
- Never fill a gap by guessing: when the view cannot close the reasoning, Consult or Explore first.
- Write instructions exactly in the forms above; anything else is a bus fault and stops the round."""

_REGISTRY_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_ACTION = re.compile(r"^[A-Za-z][A-Za-z_]*$")


def _unique(values: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(values)) != len(values):
        raise ValueError(f"keywords must be unique, got {list(values)}")
    return values


UniqueKeywords = Annotated[tuple[Keyword, ...], AfterValidator(_unique)]


def _registry_id(value: str) -> str:
    if not _REGISTRY_ID.match(value) or value == "CURRENT_TIME":
        raise ValueError(
            f"registry id {value!r} must be a name ([A-Za-z_][A-Za-z0-9_.-]*) other than CURRENT_TIME"
        )
    return value


class RegistryEntry(BaseModel):
    """A constant of the Static_Registry (`<ST-Node id value/>`), other than CURRENT_TIME."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Annotated[str, AfterValidator(_registry_id)]
    value: str


class TraceStep(BaseModel):
    """One `<Step>` of the Reasoning_Trace: a zoom action of an earlier step, or a fault."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action: Annotated[str, Field(pattern=_ACTION.pattern)]
    target: str
    reason: str
    keywords: UniqueKeywords = ()
    status: str | None = Field(default=None, pattern=r"^(ok|fault)$")


class ContextNode(BaseModel):
    """One `<Node>` as shown: a page in a view, with its summary, content or nested children."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Annotated[str, Field(pattern=r"^[0-9a-f]{4,64}$")]
    type: PageType
    view: View
    depth: int = Field(ge=0)
    origin: Origin | None = None
    keywords: UniqueKeywords = ()
    timestamp: datetime
    handle: str | None = Field(default=None, pattern=r"^pb:[0-9a-f]{4,64}$")
    draft: bool = False
    summary: str | None = None
    content: str | None = None
    children: tuple[ContextNode, ...] = ()

    @model_validator(mode="after")
    def _shape_matches_view(self) -> ContextNode:
        if self.type is PageType.ORIGINAL and self.origin is None:
            raise ValueError(f"Original node {self.id} needs an origin")
        if self.view is View.SUMMARY:
            ok = self.content is None and not self.children
        elif self.view is View.DETAIL:
            ok = self.content is not None and self.summary is None and not self.children
        else:
            ok = (
                self.type is PageType.CONSOLIDATED
                and bool(self.children)
                and self.summary is None
                and self.content is None
            )
        if not ok:
            raise ValueError(
                f"node {self.id}: a {self.type} node in view {self.view} shows "
                "Summary (optional summary), Detail (content) or Unpacked (children, Consolidated only)"
            )
        return self


class PagedContextDocument(BaseModel):
    """A whole `<PagedContext>` document."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str = PROTOCOL_VERSION
    current_time: datetime
    registry: tuple[RegistryEntry, ...] = ()
    system_instructions: str = SYSTEM_INSTRUCTIONS
    query: str = ""
    trace: tuple[TraceStep, ...] = ()
    flow: tuple[ContextNode, ...] = ()
    background: tuple[ContextNode, ...] | None = None

    @model_validator(mode="after")
    def _background_is_folded(self) -> PagedContextDocument:
        for node in self.background or ():
            if node.view is not View.SUMMARY:
                raise ValueError(f"background node {node.id} must be in Summary, is {node.view}")
        return self
