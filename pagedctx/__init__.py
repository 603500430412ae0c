"""pagedctx: a paged, addressable context runtime for LLM agents (Paged-Context-Protocol).

The public API: `Session` (open or resume a session by id, add repositories, dialogues, turns
and documents, ask) and `run` (one session, one ask: `pagedctx run`), the configuration, the
store, the model backends and every error. Names load lazily so `import pagedctx` and the CLI
stay fast; every name in `__all__` resolves (a test pins the list).
"""

from __future__ import annotations

import importlib
from typing import Any

from pagedctx._version import __version__

_EXPORTS: dict[str, str] = {
    "BackendError": "pagedctx.errors",
    "BudgetError": "pagedctx.errors",
    "BusFault": "pagedctx.errors",
    "Config": "pagedctx.config",
    "ConfigError": "pagedctx.errors",
    "ConsolidatedPage": "pagedctx.pages",
    "ContextFormatError": "pagedctx.errors",
    "EnvelopeViolation": "pagedctx.errors",
    "FailCode": "pagedctx.errors",
    "FunctionBackend": "pagedctx.host.models.recorded",
    "Index": "pagedctx.host.ingest.index",
    "InputFormatError": "pagedctx.errors",
    "ModelBackend": "pagedctx.host.models.base",
    "NoSearchTerms": "pagedctx.errors",
    "OriginalPage": "pagedctx.pages",
    "PagedctxError": "pagedctx.errors",
    "ProtocolFault": "pagedctx.errors",
    "RoleSpec": "pagedctx.host.models.factory",
    "ScopeConflict": "pagedctx.errors",
    "ScriptedBackend": "pagedctx.host.models.recorded",
    "Selected": "pagedctx.selecting",
    "Session": "pagedctx.session",
    "SessionResult": "pagedctx.session",
    "SessionState": "pagedctx.pages",
    "StoreError": "pagedctx.errors",
    "TokenizerError": "pagedctx.errors",
    "UsageError": "pagedctx.errors",
    "View": "pagedctx.pages",
    "load_config": "pagedctx.config",
    "open_store": "pagedctx.host.store.url",
    "run": "pagedctx.session",
    "select": "pagedctx.selecting",
}

__all__ = [
    "BackendError",
    "BudgetError",
    "BusFault",
    "Config",
    "ConfigError",
    "ConsolidatedPage",
    "ContextFormatError",
    "EnvelopeViolation",
    "FailCode",
    "FunctionBackend",
    "Index",
    "InputFormatError",
    "ModelBackend",
    "NoSearchTerms",
    "OriginalPage",
    "PagedctxError",
    "ProtocolFault",
    "RoleSpec",
    "ScopeConflict",
    "ScriptedBackend",
    "Selected",
    "Session",
    "SessionResult",
    "SessionState",
    "StoreError",
    "TokenizerError",
    "UsageError",
    "View",
    "__version__",
    "load_config",
    "open_store",
    "run",
    "select",
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
