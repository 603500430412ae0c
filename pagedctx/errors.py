"""Every exception pagedctx raises, in one tree.

```
PagedctxError                 base of everything below; never raised itself
├── UsageError                for a person: a wrong flag, a missing file; the message names the fix
│   ├── ConfigError           a config file or PAGEDCTX_* variable that does not validate
│   ├── NoSearchTerms         a text to search by (an intent) that holds no searchable word
│   └── InputFormatError      an input file (a dialogue JSONL, ...) that breaks its format; names
│                             the file and the line
├── ProtocolFault             a protocol document or model answer that breaks its contract;
│   │                         carries a FailCode (SPEC E2) so callers can route without parsing text
│   ├── BusFault              worker output that does not follow the instruction grammar (P9);
│   │                         its message is for the model: it quotes the bad input and the valid form
│   ├── ContextFormatError    a <PagedContext> document that does not parse or validate (P6)
│   └── EnvelopeViolation     a module answer that breaks the v2.2 envelope contract (M2-M5)
├── BackendError              a model backend failed (HTTP, SDK, engine)
├── StoreError                the store failed (SQLite, Redis); state is unchanged
├── BudgetError               a context that cannot fit its token budget even fully governed (P12)
└── TokenizerError            a tokenizer could not be loaded or used
```

Rules (STYLE.md, "Errors"): foreign exceptions (lxml, redis, tree-sitter, Ray) are translated at the
edge module that calls the foreign library; constructors never log; every exception pickles (it may
cross a Ray boundary) and has a JSON form (`to_dict`) for traces and CLI output.

This module is the lowest layer: it imports nothing of ours.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = [
    "BackendError",
    "BudgetError",
    "BusFault",
    "ConfigError",
    "ContextFormatError",
    "EnvelopeViolation",
    "FailCode",
    "InputFormatError",
    "NoSearchTerms",
    "PagedctxError",
    "ProtocolFault",
    "ScopeConflict",
    "SourcePosition",
    "StoreError",
    "TokenizerError",
    "UsageError",
]


class FailCode(enum.StrEnum):
    """The fail-code catalog of SPEC E2 (seed 001): one code per way a task can fail."""

    SCOPE_CONFLICT = "SCOPE_CONFLICT"
    CI_FAILED = "CI_FAILED"
    SCHEMA_VIOLATION = "SCHEMA_VIOLATION"
    PINS_INSUFFICIENT = "PINS_INSUFFICIENT"
    POLICY_VIOLATION = "POLICY_VIOLATION"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    TIMEOUT_EXCEEDED = "TIMEOUT_EXCEEDED"
    EXECUTOR_ERROR = "EXECUTOR_ERROR"
    PREFLIGHT_FAILED = "PREFLIGHT_FAILED"
    FILE_NOT_FOUND = "FILE_NOT_FOUND"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    MERGE_CONFLICT = "MERGE_CONFLICT"
    EVIDENCE_MISSING = "EVIDENCE_MISSING"
    NEEDS_CLARIFICATION = "NEEDS_CLARIFICATION"


class SourcePosition:
    """A place in a text: 0-based character offset, 1-based line and column."""

    __slots__ = ("column", "line", "offset")

    def __init__(self, offset: int, line: int, column: int) -> None:
        self.offset = offset
        self.line = line
        self.column = column

    @classmethod
    def in_text(cls, text: str, offset: int) -> SourcePosition:
        """The position of `offset` in `text` (offsets past the end clamp to the end)."""
        offset = max(0, min(offset, len(text)))
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        return cls(offset, line, column)

    def to_dict(self) -> dict[str, int]:
        return {"offset": self.offset, "line": self.line, "column": self.column}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SourcePosition):
            return NotImplemented
        return (self.offset, self.line, self.column) == (other.offset, other.line, other.column)

    def __hash__(self) -> int:
        return hash((self.offset, self.line, self.column))

    def __repr__(self) -> str:
        return f"SourcePosition(offset={self.offset}, line={self.line}, column={self.column})"

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (SourcePosition, (self.offset, self.line, self.column))


class PagedctxError(Exception):
    """Base of every pagedctx exception."""

    kind: str = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message,))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form used in traces and CLI output."""
        return {"kind": self.kind, "type": type(self).__name__, "message": self.message}


class UsageError(PagedctxError):
    """A mistake by the person calling pagedctx; the message says how to fix it."""

    kind = "usage_error"


class ConfigError(UsageError):
    """A configuration value (file, profile, environment variable) that does not validate."""

    kind = "config_error"


class NoSearchTerms(UsageError):
    """A text to search by (an intent, keywords) holding no searchable word and naming nothing."""

    kind = "no_search_terms"


class InputFormatError(UsageError):
    """An input file that does not follow its format; `path` and `line` (1-based) say where."""

    kind = "input_format_error"

    def __init__(self, message: str, *, path: str = "", line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, {"path": self.path, "line": self.line}))

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "path": self.path, "line": self.line}


class ProtocolFault(PagedctxError):
    """A document or answer that breaks a protocol contract; carries its fail code (E2)."""

    kind = "protocol_fault"
    default_code: FailCode = FailCode.SCHEMA_VIOLATION

    def __init__(self, message: str, *, code: FailCode | None = None) -> None:
        super().__init__(message)
        self.code = code if code is not None else self.default_code

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, {"code": self.code}))

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "code": str(self.code)}


class BusFault(ProtocolFault):
    """Worker output that does not follow the instruction grammar (P9, seed 002 section 2.4).

    The message is written for the model that produced the output: it names the position, quotes
    what was found, and says what was expected there.
    """

    kind = "bus_fault"

    def __init__(
        self,
        message: str,
        *,
        position: SourcePosition | None = None,
        expected: str = "",
        found: str = "",
        code: FailCode | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.position = position
        self.expected = expected
        self.found = found

    def __reduce__(self) -> tuple[Any, ...]:
        state = {"code": self.code, "position": self.position, "expected": self.expected, "found": self.found}
        return (_rebuild, (type(self), self.message, state))

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "position": self.position.to_dict() if self.position is not None else None,
            "expected": self.expected,
            "found": self.found,
        }


class ContextFormatError(ProtocolFault):
    """A <PagedContext> document that is not well-formed or does not match the shipped schema."""

    kind = "context_format_error"

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        code: FailCode | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.line = line
        self.column = column

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), self.message, {"code": self.code, "line": self.line, "column": self.column}),
        )

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "line": self.line, "column": self.column}


class EnvelopeViolation(ProtocolFault):
    """A module answer that breaks the v2.2 envelope contract; `violations` lists every broken rule."""

    kind = "envelope_violation"

    def __init__(
        self, message: str, *, violations: list[dict[str, str]] | None = None, code: FailCode | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.violations = list(violations or [])

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, {"code": self.code, "violations": self.violations}))

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "violations": self.violations}


class ScopeConflict(ProtocolFault):
    """A path outside the task's pins or outside the repository (E2 SCOPE_CONFLICT)."""

    default_code = FailCode.SCOPE_CONFLICT


class BackendError(PagedctxError):
    """A model backend failed: an HTTP error, an SDK error, an engine that is not reachable."""

    kind = "backend_error"


class StoreError(PagedctxError):
    """The store (SQLite or Redis) failed; the operation left the state as it was."""

    kind = "store_error"


class BudgetError(PagedctxError):
    """A rendered context over its token budget even after every overflow-governance action (P12).

    `minimum` is the size of the fully governed document: a budget of at least that many tokens fits.
    """

    kind = "budget_error"

    def __init__(self, message: str, *, budget: int, minimum: int) -> None:
        super().__init__(message)
        self.budget = budget
        self.minimum = minimum

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, {"budget": self.budget, "minimum": self.minimum}))

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "budget": self.budget, "minimum": self.minimum}


class TokenizerError(PagedctxError):
    """A tokenizer could not be loaded (missing file, missing optional package) or used."""

    kind = "tokenizer_error"


def _rebuild(cls: type[PagedctxError], message: str, state: dict[str, Any]) -> PagedctxError:
    """Unpickle an exception with keyword-only fields (pickle passes only positional args)."""
    return cls(message, **state)
