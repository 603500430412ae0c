"""The page model of PCP (P1, P2, P4): physical blocks, Original and Consolidated pages, views.

Pure data: no I/O, no clock. Timestamps are given by the caller. Pages are immutable once made;
what changes during a session (the view each page is shown in) lives in `pagedctx.pages.state`.

Sizes are bounded here, once for every producer (providers, consolidation, memory, models): a
keyword is at most `MAX_KEYWORD_LENGTH` characters (`clean_keyword` cuts longer ones; a page
refuses them) and a page has at most `MAX_PAGE_KEYWORDS`; a summary is at most `MAX_SUMMARY_CHARS`
characters (`Summary` cuts a longer one at a word and marks the cut with `SUMMARY_CUT`). The
content of an Original page is never cut (P1: no uncontrolled deletion): a 1 MB turn keeps its
1 MB of content, and its summary and keywords stay small enough to show beside the rest.
"""

from __future__ import annotations

import enum
import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, field_validator

__all__ = [
    "MAX_KEYWORD_LENGTH",
    "MAX_PAGE_KEYWORDS",
    "MAX_SUMMARY_CHARS",
    "SUMMARY_CUT",
    "Activation",
    "ConsolidatedPage",
    "Keyword",
    "Origin",
    "OriginalPage",
    "PBlock",
    "PBlockKind",
    "Page",
    "PageType",
    "Summary",
    "View",
    "bound_summary",
    "clean_keyword",
    "is_handle",
    "page_adapter",
]

PAGE_ID_PATTERN = r"^[0-9a-f]{4,64}$"
HANDLE_PATTERN = r"^pb:[0-9a-f]{4,64}$"
_HANDLE_RE = re.compile(HANDLE_PATTERN)
# Characters XML 1.0 cannot carry in an attribute; keywords travel in one (P6: comma-separated).
_KEYWORD_FORBIDDEN = re.compile(r"[,\x00-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
MAX_KEYWORD_LENGTH = 64  # characters: a name, not a paste
MAX_PAGE_KEYWORDS = 16
MAX_SUMMARY_CHARS = 2000  # about 500 tokens: a summary is shown beside many others (P4, P12)
SUMMARY_CUT = "…"


class PageType(enum.StrEnum):
    """Physical nature of a page (P1): a leaf or a container."""

    ORIGINAL = "Original"
    CONSOLIDATED = "Consolidated"


class Origin(enum.StrEnum):
    """Where a page came from: the dialogue history, storage (files, code, streams) or memory (P14)."""

    HISTORY = "History"
    STORAGE = "Storage"
    MEMORY = "Memory"


class View(enum.StrEnum):
    """How a page is shown (P4). Ordered: Summary < Detail < Unpacked."""

    SUMMARY = "Summary"
    DETAIL = "Detail"
    UNPACKED = "Unpacked"


class Activation(enum.StrEnum):
    """Activation state of a page in a session (P3), derived from its view and visibility."""

    HOT = "Hot"  # injected: shown in Detail or Unpacked
    INDEXED = "Indexed"  # shown as its summary only
    SHELVED = "Shelved"  # known to the session, not shown


class PBlockKind(enum.StrEnum):
    """Kinds of physical block (P2)."""

    DIALOGUE = "Dialogue"
    FILE = "File"
    STREAM = "Stream"


def clean_keyword(text: str) -> str:
    """`text` made a valid keyword: forbidden characters as spaces, trimmed, cut to
    `MAX_KEYWORD_LENGTH` characters ('' if nothing is left)."""
    cleaned = _KEYWORD_FORBIDDEN.sub(" ", text).strip()
    return cleaned[:MAX_KEYWORD_LENGTH].rstrip() if len(cleaned) > MAX_KEYWORD_LENGTH else cleaned


def _check_keyword(value: str) -> str:
    if value != value.strip() or not value:
        raise ValueError(f"keyword {value!r} must be non-empty and carry no surrounding whitespace")
    if _KEYWORD_FORBIDDEN.search(value):
        raise ValueError(f"keyword {value!r} must not contain a comma or a control character")
    return value


def bound_summary(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    """`text` when it has at most `limit` characters, else its start cut at a word and `SUMMARY_CUT`.

    The result has at most `limit` characters, so bounding twice changes nothing.
    """
    if len(text) <= limit:
        return text
    room = limit - len(SUMMARY_CUT)
    head = text[:room]
    space = head.rfind(" ")
    if space > room // 2:
        head = head[:space]
    return head.rstrip() + SUMMARY_CUT


Keyword = Annotated[str, AfterValidator(_check_keyword)]
Summary = Annotated[str, AfterValidator(bound_summary)]
PageId = Annotated[str, Field(pattern=PAGE_ID_PATTERN)]
Handle = Annotated[str, Field(pattern=HANDLE_PATTERN)]


def is_handle(ref: str) -> bool:
    """True when `ref` is a PBlock handle (`pb:` + hex) rather than a page id."""
    return _HANDLE_RE.match(ref) is not None


class PBlock(BaseModel):
    """A physical block (P2): only the host makes them and hands out their handles.

    Structured blocks (a repository, a directory, a document with chapters) map to Consolidated
    draft pages and list their sub-blocks in `children`; unstructured ones (plain text, logs) are
    cut into fixed-size pieces that map to Original pages.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    handle: Handle
    kind: PBlockKind
    structured: bool
    source: str = Field(description="path, URI or session the block was read from")
    title: str = ""
    mtime: datetime | None = None
    content_hash: str = ""
    tokens: int = Field(default=0, ge=0)
    children: tuple[Handle, ...] = ()


class _PageBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: PageId
    depth: int = Field(ge=0)
    timestamp: datetime
    keywords: tuple[Keyword, ...] = ()
    summary: Summary = Field(
        description="entropy-compressed: keeps identifiers, variables, causal chain; at most "
        f"{MAX_SUMMARY_CHARS} characters"
    )
    topic_id: str | None = None
    draft: bool = Field(default=False, description="speculatively materialized, solid only if zoomed (P11)")
    pblock: Handle | None = Field(default=None, description="handle of the PBlock this page maps")

    @field_validator("keywords")
    @classmethod
    def _unique_keywords(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"keywords must be unique, got {list(value)}")
        if len(value) > MAX_PAGE_KEYWORDS:
            raise ValueError(f"a page has at most {MAX_PAGE_KEYWORDS} keywords, got {len(value)}")
        for keyword in value:
            if len(keyword) > MAX_KEYWORD_LENGTH:
                raise ValueError(
                    f"keyword {keyword[:20]!r}... has {len(keyword)} characters, more than "
                    f"{MAX_KEYWORD_LENGTH}; clean_keyword cuts it"
                )
        return value


class OriginalPage(_PageBase):
    """A leaf page (P1): verbatim content plus an entropy-compressed summary."""

    type: Literal[PageType.ORIGINAL] = PageType.ORIGINAL
    origin: Origin
    content: str = Field(description="verbatim evidence; never edited")


class ConsolidatedPage(_PageBase):
    """A container page (P1): the merged summary of its sources, which nest into a logic tree."""

    type: Literal[PageType.CONSOLIDATED] = PageType.CONSOLIDATED
    origin: Origin | None = None
    source_ids: tuple[str, ...] = Field(description="child page ids or PBlock handles")

    @field_validator("source_ids")
    @classmethod
    def _valid_sources(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for ref in value:
            if not (re.match(PAGE_ID_PATTERN, ref) or is_handle(ref)):
                raise ValueError(f"source id {ref!r} is neither a page id (hex) nor a PBlock handle (pb:hex)")
        if len(set(value)) != len(value):
            raise ValueError("source_ids must be unique")
        return value


Page = Annotated[OriginalPage | ConsolidatedPage, Field(discriminator="type")]
page_adapter: TypeAdapter[OriginalPage | ConsolidatedPage] = TypeAdapter(Page)
