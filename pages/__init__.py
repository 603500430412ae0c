"""pagedctx.pages: pure data and state of PCP, with no I/O (DESIGN.md section 1).

Physical blocks, Original/Consolidated pages, views, the logic tree and the zoom/fold state machine.
Imports nothing of ours.
"""

from pagedctx.pages.ids import handle_for, short_hash
from pagedctx.pages.model import (
    Activation,
    ConsolidatedPage,
    Keyword,
    Origin,
    OriginalPage,
    Page,
    PageType,
    PBlock,
    PBlockKind,
    View,
    is_handle,
    page_adapter,
)
from pagedctx.pages.moves import add_pages, consult, dehydrate, end_round, fold_to_background, shelve
from pagedctx.pages.pmap import PMap
from pagedctx.pages.state import (
    Fault,
    FaultCode,
    Placement,
    RoundEnd,
    SessionState,
    Transition,
    ViewChange,
    activation,
    check_invariants,
    is_visible,
)

__all__ = [
    "Activation",
    "ConsolidatedPage",
    "Fault",
    "FaultCode",
    "Keyword",
    "Origin",
    "OriginalPage",
    "PBlock",
    "PBlockKind",
    "PMap",
    "Page",
    "PageType",
    "Placement",
    "RoundEnd",
    "SessionState",
    "Transition",
    "View",
    "ViewChange",
    "activation",
    "add_pages",
    "check_invariants",
    "consult",
    "dehydrate",
    "end_round",
    "fold_to_background",
    "handle_for",
    "is_handle",
    "is_visible",
    "page_adapter",
    "shelve",
    "short_hash",
]
