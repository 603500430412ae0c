"""The fail classifier (E1, E9): logs and diff -> fail classes and the most specific reason code.

Plain rules over the text, in order of specificity; each names what it matched, so a
classification can be audited. Nothing matched in a failed run is `test_failure` only when a test
failed, else no class (the verdict still fails: fail-closed).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from pagedctx.errors import FailCode
from pagedctx.evidence.schemas import FailClass

__all__ = ["Classification", "classify"]

_TIMEOUT = r"^TIMEOUT after|EXIT_CODE=124$|Timeout(Error|Expired)"
_SECRET = (
    r"(?i)(-----BEGIN [A-Z ]*PRIVATE KEY-----|\bAKIA[0-9A-Z]{16}\b|\bsk-[A-Za-z0-9]{20,}"
    r"|ghp_[A-Za-z0-9]{30,})"
)
_MISSING = (
    r"ModuleNotFoundError|No module named|ConnectionError|Could not resolve host|command not found|ENOTFOUND"
)
_TYPES = r"error: .*\[[a-z-]+\]$|Found \d+ errors? in \d+ files?|TS\d{4}:"
_LINT = r"^[\w/.-]+:\d+:\d+: [A-Z]+\d+ |Found \d+ errors?\.$|SyntaxError|IndentationError"
_TESTS = r"^FAILED |AssertionError|\b\d+ failed\b|--- FAIL:|Tests:\s+\d+ failed"
_RULES: tuple[tuple[FailClass, FailCode, re.Pattern[str]], ...] = (
    (FailClass.TIMEOUT, FailCode.TIMEOUT_EXCEEDED, re.compile(_TIMEOUT, re.M)),
    (FailClass.SECURITY_VIOLATION, FailCode.POLICY_VIOLATION, re.compile(_SECRET)),
    (FailClass.EXTERNAL_DEPENDENCY, FailCode.EXECUTOR_ERROR, re.compile(_MISSING)),
    (FailClass.TYPE_ERROR, FailCode.CI_FAILED, re.compile(_TYPES, re.M)),
    (FailClass.LINT_ERROR, FailCode.CI_FAILED, re.compile(_LINT, re.M)),
    (FailClass.TEST_FAILURE, FailCode.CI_FAILED, re.compile(_TESTS, re.M)),
)


class Classification(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    fail_class: tuple[FailClass, ...]
    reason_code: FailCode | None
    matched: tuple[str, ...]


def classify(logs: str, diff: str = "") -> Classification:
    """Fail classes in the logs (and secrets in the diff), most specific first."""
    classes: list[FailClass] = []
    codes: list[FailCode] = []
    matched: list[str] = []
    for fail_class, code, pattern in _RULES:
        text = logs + ("\n" + diff if fail_class is FailClass.SECURITY_VIOLATION else "")
        found = pattern.search(text)
        if found:
            classes.append(fail_class)
            codes.append(code)
            matched.append(f"{fail_class}: {found.group(0)[:80]!r}")
    return Classification(
        fail_class=tuple(classes), reason_code=codes[0] if codes else None, matched=tuple(matched)
    )
