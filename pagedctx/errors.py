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

Both come from one declaration: a class names its keyword-only constructor arguments in `fields`
(its parent's first, then its own), stores each under the same attribute name, and
`PagedctxError.__reduce__` and `to_dict` are derived from that tuple. A subclass adds fields and an
`__init__`, never a `__reduce__` or a `to_dict` of its own (tests/test_errors.py round-trips every
subclass there is).

This module is the lowest layer: it imports nothing of ours.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

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
    SANDBOX_UNAVAILABLE = "SANDBOX_UNAVAILABLE"  # no sandbox for the tests here: fail closed


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
    """Base of every pagedctx exception.

    `fields` names the keyword-only arguments of the constructor, each kept as the attribute of the
    same name: pickling passes them back to the constructor, `to_dict` writes them after `kind`,
    `type` and `message`. A subclass's tuple extends its parent's (checked when the class is made).
    """

    kind: ClassVar[str] = "error"
    fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__mro__[1:]:
            if issubclass(base, PagedctxError) and base.fields != cls.fields[: len(base.fields)]:
                raise TypeError(
                    f"{cls.__name__}.fields must start with {base.__name__}.fields {base.fields!r}, "
                    f"got {cls.fields!r}"
                )

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle passes only positional arguments; the fields are keyword-only, hence _rebuild.
        return (_rebuild, (type(self), self.message, {name: getattr(self, name) for name in self.fields}))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form used in traces and CLI output: kind, type, message, then the fields."""
        head: dict[str, Any] = {"kind": self.kind, "type": type(self).__name__, "message": self.message}
        return head | {name: _json_value(getattr(self, name)) for name in self.fields}


def _json_value(value: Any) -> Any:
    """A field's JSON form: a position as its dict, an enum (a fail code) as its plain value."""
    if isinstance(value, SourcePosition):
        return value.to_dict()
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _rebuild(cls: type[PagedctxError], message: str, state: dict[str, Any]) -> PagedctxError:
    """Unpickle an exception: its message positionally, its declared fields by keyword."""
    return cls(message, **state)


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
    fields = ("path", "line")

    def __init__(self, message: str, *, path: str = "", line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


class ProtocolFault(PagedctxError):
    """A document or answer that breaks a protocol contract; carries its fail code (E2)."""

    kind = "protocol_fault"
    # Annotated, or mypy takes the type to be a 1-tuple and refuses the subclasses' longer ones.
    fields: ClassVar[tuple[str, ...]] = ("code",)
    default_code: ClassVar[FailCode] = FailCode.SCHEMA_VIOLATION

    def __init__(self, message: str, *, code: FailCode | None = None) -> None:
        super().__init__(message)
        self.code = code if code is not None else self.default_code


class BusFault(ProtocolFault):
    """Worker output that does not follow the instruction grammar (P9, seed 002 section 2.4).

    The message is written for the model that produced the output: it names the position, quotes
    what was found, and says what was expected there.
    """

    kind = "bus_fault"
    fields = (*ProtocolFault.fields, "position", "expected", "found")

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


class ContextFormatError(ProtocolFault):
    """A <PagedContext> document that is not well-formed or does not match the shipped schema."""

    kind = "context_format_error"
    fields = (*ProtocolFault.fields, "line", "column")

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


class EnvelopeViolation(ProtocolFault):
    """A module answer that breaks the v2.2 envelope contract; `violations` lists every broken rule."""

    kind = "envelope_violation"
    fields = (*ProtocolFault.fields, "violations")

    def __init__(
        self, message: str, *, violations: list[dict[str, str]] | None = None, code: FailCode | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.violations = list(violations or [])


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
    fields = ("budget", "minimum")

    def __init__(self, message: str, *, budget: int, minimum: int) -> None:
        super().__init__(message)
        self.budget = budget
        self.minimum = minimum


class TokenizerError(PagedctxError):
    """A tokenizer could not be loaded (missing file, missing optional package) or used."""

    kind = "tokenizer_error"
