"""pagedctx: a paged, addressable context runtime for LLM agents (Paged-Context-Protocol).

The public API. Names load lazily so `import pagedctx` and the CLI stay fast; every name in
`__all__` resolves (a test pins the list).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pagedctx._source_tree import install as _install_source_tree
from pagedctx._version import __version__

_install_source_tree(Path(__file__).parent)

_EXPORTS: dict[str, str] = {
    "BusFault": "pagedctx.errors",
    "ConsolidatedPage": "pagedctx.pages",
    "ContextFormatError": "pagedctx.errors",
    "EnvelopeViolation": "pagedctx.errors",
    "Index": "pagedctx.host.ingest.index",
    "OriginalPage": "pagedctx.pages",
    "PagedctxError": "pagedctx.errors",
    "SessionState": "pagedctx.pages",
    "UsageError": "pagedctx.errors",
    "View": "pagedctx.pages",
}

__all__ = [
    "BusFault",
    "ConsolidatedPage",
    "ContextFormatError",
    "EnvelopeViolation",
    "Index",
    "OriginalPage",
    "PagedctxError",
    "SessionState",
    "UsageError",
    "View",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pagedctx' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
