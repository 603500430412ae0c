"""The intent a round works on, made once (P8, P12, P16): its text, its words, its terms.

The intent used to be tokenised wherever it was needed, and the router's keywords, already stemmed,
were handed to block searches that stem again (`address` -> `addres` -> `addr` found nothing). An
`Intent` is made once per round, where scaffolding decides its text; what reads it takes the value:
`words` for searches that stem themselves (block searches), `terms` for those that take terms (the
page search, memory recall). It is frozen and pickles, so it crosses to the Router actor as it is.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from pagedctx.host.text.terms import identifiers, terms, word_terms

__all__ = ["Intent"]


class Intent(BaseModel):
    """The intent a round works on: `text` (rebuilt by scaffolding when `rebuilt`), the input as given
    (`original`), and, derived from `text` when the value is made, never passed in:

    - `words`: its identifiers as written, once each, those that carry a term;
    - `terms`: `terms(text)` once each, in order (stemmed once).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    rebuilt: bool = False
    original: str = ""
    words: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        """Words and terms come from the text, whatever was given for them (they cannot disagree)."""
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            return data
        text: str = data["text"]
        return {
            **data,
            "original": data.get("original") or text,
            "words": tuple(w for w in dict.fromkeys(identifiers(text)) if word_terms(w)),
            "terms": tuple(dict.fromkeys(terms(text))),
        }

    @classmethod
    def of(cls, text: str) -> Intent:
        """The intent for `text` as given (not rebuilt)."""
        return cls(text=text)
