"""The bus mediator (P5, P12, P16, P17): a round of worker instructions, applied atomically.

`apply_actions(state, actions, blocks)` executes Consult / Explore / Shelve in order on a working
copy of the session state and returns either the new state and one Reasoning_Trace step per
action, or, at the first failure (an unknown id or handle, an illegal move, a block or store read
that fails), the state exactly as given and a single fault step naming what went wrong. Nothing is
persisted here: the caller persists the outcome's state only when `applied` is true, so a failed
round leaves the persisted state byte-identical.

- Consult(id): through the pages state machine (Summary -> Detail -> Unpacked). Consulting a
  Consolidated page in Detail that maps a structured block and has no children yet scans the block
  (P17): its sub-blocks are materialized as draft pages under it, in Summary, and it unpacks.
- Explore(handle, keywords): BM25 inside the block (P16, the provider's `search`); pieces under the
  relevance threshold stay physical; the hits become draft pages shown in Detail: under the block's
  page when the session shows one (it is unpacked to show them), else as new Linear_Flow roots.
  Pieces already materialized in the session are not materialized twice. Keywords that hold no
  searchable word (all stop words, numbers or punctuation) and find nothing by name are a fault
  (USAGE_ERROR) that says so: the worker learns to use content words, not that the block is empty.
- Shelve(id): Unpacked -> Detail -> Summary, with the cascading fold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, InstanceOf

from pagedctx.errors import PagedctxError, UsageError
from pagedctx.host.blocks.base import BlockProvider, Piece, TakenIds, materialize
from pagedctx.host.text.terms import terms, unsearchable
from pagedctx.pages import ConsolidatedPage, SessionState, View
from pagedctx.pages.moves import add_pages, consult, shelve
from pagedctx.pages.state import Fault, Transition, is_visible
from pagedctx.protocol.paged_context.context import TraceStep
from pagedctx.protocol.worker.instructions import Consult, Explore, Instruction, Shelve

__all__ = [
    "DEFAULT_EXPLORE_HITS",
    "DEFAULT_EXPLORE_THRESHOLD",
    "BusFaultRecord",
    "BusOutcome",
    "apply_actions",
]

DEFAULT_EXPLORE_THRESHOLD = 0.35
DEFAULT_EXPLORE_HITS = 8


class BusFaultRecord(BaseModel):
    """Why a round was refused: the failing action's position, a code and a message for the worker."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int
    action: str
    target: str
    code: str
    message: str


class BusOutcome(BaseModel):
    """The result of one round of instructions."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    state: InstanceOf[SessionState]
    steps: tuple[TraceStep, ...]
    applied: bool
    fault: BusFaultRecord | None = None
    materialized: tuple[str, ...] = ()


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _moved(result: Transition | Fault) -> SessionState:
    if isinstance(result, Fault):
        raise _Refused(result.code.value, result.message)
    return result.state


class _Round:
    def __init__(self, state: SessionState, blocks: BlockProvider, threshold: float, max_hits: int) -> None:
        self.state = state
        self.blocks = blocks
        self.threshold = threshold
        self.max_hits = max_hits
        self.made: list[str] = []
        self._handles: dict[str, str] | None = None

    @property
    def _by_handle(self) -> dict[str, str]:
        """Page id by PBlock handle, over the pages known when the round began and those it made.

        Built on first use: Consult and Shelve of pages that map no block never need it.
        """
        if self._handles is None:
            state = self.state
            self._handles = {page.pblock: pid for pid, page in state.pages.items() if page.pblock is not None}
        return self._handles

    def _add(self, pieces: Sequence[Piece], depth: int) -> list[Any]:
        taken = TakenIds(self.state.pages)
        pages = [materialize(piece, taken=taken, depth=depth, draft=True) for piece in pieces]
        for piece, page in zip(pieces, pages, strict=True):
            self._by_handle[piece.handle] = page.id
            self.made.append(page.id)
        return pages

    def consult(self, action: Consult) -> str:
        state = self.state
        page = state.pages.get(action.id)
        scan = (
            isinstance(page, ConsolidatedPage)
            and page.pblock is not None
            and not state.children_of(action.id)
            and state.views.get(action.id) is View.DETAIL
        )
        detail = ""
        if scan and page is not None and page.pblock is not None:
            pieces = [p for p in self.blocks.children(page.pblock) if p.handle not in self._by_handle]
            if pieces:
                state = _moved(add_pages(state, self._add(pieces, page.depth + 1), parent=action.id))
                detail = f" (scanned {len(pieces)} sub-blocks)"
        self.state = _moved(consult(state, action.id))
        return detail

    def explore(self, action: Explore) -> str:
        result = self.blocks.search(action.handle, list(action.keywords), self.threshold)
        if not result.hits and not terms(" ".join(action.keywords)):
            words = ", ".join(action.keywords)
            raise UsageError(
                f"{unsearchable(words, 'the keywords')}, and none names a piece of {action.handle}; "
                "explore with names or content words"
            )
        hits = [h for h in result.hits[: self.max_hits] if h.handle not in self._by_handle]
        if not hits:
            return f" (no new piece above the threshold; {result.physical} stay physical)"
        owner = self._by_handle.get(action.handle)
        state = self.state
        owner_page = state.pages.get(owner) if owner is not None else None
        if owner is not None and isinstance(owner_page, ConsolidatedPage) and is_visible(state, owner):
            pages = self._add(hits, owner_page.depth + 1)
            state = _moved(add_pages(state, pages, parent=owner))
            while state.views[owner] is not View.UNPACKED:
                state = _moved(consult(state, owner))
            for page in pages:
                state = _moved(consult(state, page.id))
        else:
            pages = self._add(hits, 0)
            state = _moved(add_pages(state, pages, views={p.id: View.DETAIL for p in pages}))
        self.state = state
        return f" (materialized {len(pages)}; {result.physical} stay physical)"

    def shelve(self, action: Shelve) -> str:
        self.state = _moved(shelve(self.state, action.id))
        return ""


def _target(action: Instruction) -> str:
    return action.handle if isinstance(action, Explore) else action.id


def _step(action: Instruction, reason: str, status: str) -> TraceStep:
    keywords = tuple(dict.fromkeys(action.keywords)) if isinstance(action, Explore) else ()
    return TraceStep(
        action=action.action, target=_target(action), reason=reason, keywords=keywords, status=status
    )


def apply_actions(
    state: SessionState,
    actions: Sequence[Instruction],
    blocks: BlockProvider,
    *,
    threshold: float = DEFAULT_EXPLORE_THRESHOLD,
    max_hits: int = DEFAULT_EXPLORE_HITS,
) -> BusOutcome:
    """Apply a round of instructions atomically (see the module docstring)."""
    work = _Round(state, blocks, threshold, max_hits)
    steps: list[TraceStep] = []
    for index, action in enumerate(actions):
        try:
            if isinstance(action, Consult):
                detail = work.consult(action)
            elif isinstance(action, Explore):
                detail = work.explore(action)
            else:
                detail = work.shelve(action)
        except (_Refused, PagedctxError) as exc:
            code = exc.code if isinstance(exc, _Refused) else str(getattr(exc, "kind", "error")).upper()
            message = exc.message
            record = BusFaultRecord(
                index=index, action=action.action, target=_target(action), code=str(code), message=message
            )
            fault_step = _step(action, f"{action.reason} -> fault {code}: {message}", "fault")
            return BusOutcome(state=state, steps=(fault_step,), applied=False, fault=record)
        steps.append(_step(action, action.reason + detail, "ok"))
    return BusOutcome(state=work.state, steps=tuple(steps), applied=True, materialized=tuple(work.made))
