"""pagedctx.pages: pure data and state of PCP, with no I/O (DESIGN.md section 1).

Physical blocks, Original/Consolidated pages, views, the logic tree and the zoom/fold state machine.
Imports nothing of ours.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pagedctx.pages.ids import handle_for, short_hash, short_number
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

#: Where each name lives: a name is imported with its module when first used, so a reader of one
#: model (the code index reads PBlock) does not pay for the session's state machine.
_HOME = {
    "Activation": "model",
    "ConsolidatedPage": "model",
    "Fault": "state",
    "FaultCode": "state",
    "Keyword": "model",
    "Origin": "model",
    "OriginalPage": "model",
    "PBlock": "model",
    "PBlockKind": "model",
    "PMap": "pmap",
    "Page": "model",
    "PageType": "model",
    "Placement": "state",
    "RoundEnd": "state",
    "SessionState": "state",
    "Transition": "state",
    "View": "model",
    "ViewChange": "state",
    "activation": "state",
    "add_pages": "moves",
    "check_invariants": "state",
    "consult": "moves",
    "dehydrate": "moves",
    "end_round": "moves",
    "fold_to_background": "moves",
    "handle_for": "ids",
    "is_handle": "model",
    "is_visible": "state",
    "page_adapter": "model",
    "shelve": "moves",
    "short_hash": "ids",
    "short_number": "ids",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


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
    "short_number",
]
