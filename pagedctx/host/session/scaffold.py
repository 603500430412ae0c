"""Intent scaffolding (P12): a deterministic rebuild of low-information input.

"continue", "go on", "继续", "ok", "next" carry no intent of their own: the router would address
nothing with them. When the tail of the dialogue is such an input, the intent is rebuilt from the
previous round: its intent and what the round ended on (its answer's first sentence, or the
targets of its last actions). Anything with content words is kept as it is. The same input and
history always give the same intent.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from pagedctx.host.text.intent import Intent
from pagedctx.host.text.terms import terms

__all__ = ["LOW_INFORMATION", "PreviousRound", "is_low_information", "scaffold"]

LOW_INFORMATION = frozenset(
    {
        "continue",
        "go on",
        "keep going",
        "carry on",
        "go ahead",
        "proceed",
        "next",
        "more",
        "ok",
        "okay",
        "yes",
        "y",
        "sure",
        "and",
        "and then",
        "then",
        "again",
        "please continue",
        "continue please",
        "do it",
        "same",
        "resume",
        "继续",
        "接着",
        "然后",
        "然后呢",
        "好",
        "好的",
        "嗯",
        "下一步",
        "继续吧",
        "请继续",
        "是",
        "对",
    }
)
_PUNCTUATION = re.compile(r"[\s\.\!\?,;:…。！？，、~\-]+")


class PreviousRound(BaseModel):
    """What the scaffolder may reuse from the round before."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: str
    answer: str | None = None
    targets: tuple[str, ...] = ()


def _normal(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _PUNCTUATION.sub(" ", folded).strip()


def is_low_information(text: str) -> bool:
    """True for input that names nothing: a continuation phrase, or no content term at all."""
    normal = _normal(text)
    if not normal or normal in LOW_INFORMATION:
        return True
    has_cjk = any("\u4e00" <= ch <= "\u9fff" for ch in normal)
    return not has_cjk and not terms(normal)


def _first_sentence(text: str, limit: int = 200) -> str:
    sentence = re.split(r"(?<=[.!?。！？])\s", text.strip(), maxsplit=1)[0]
    return sentence[:limit]


def scaffold(asked: str | Intent, history: Sequence[PreviousRound] = ()) -> Intent:
    """The intent asked (`Intent.asked`, returned as it is), or one rebuilt from the last round when
    what was asked carries no information."""
    intent = Intent.asked(asked)
    text = intent.original
    if not is_low_information(text) or not history:
        return intent
    last = history[-1]
    where = (
        f"; the last round ended on: {_first_sentence(last.answer)}"
        if last.answer
        else (f"; the last round looked at: {', '.join(last.targets[:8])}" if last.targets else "")
    )
    return Intent(text=f"Continue with: {last.intent}{where}", rebuilt=True, original=text)
