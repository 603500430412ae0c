"""What is asked, made once (P8, P12, P16): its text, its words, its terms.

An `Intent` is made at the door (`Intent.asked`: `Session.ask`, `Workspace.select`) from the text a
user gave, cleaned once, and carried typed below: the selection ranks with its `stems`, the
dialogue setup addresses turns with its `words`, and the rounds start from it (scaffolding makes
a new one only when it rebuilds a low-information input from the round before). What reads it
takes the value: `words` for searches that stem themselves (block searches; stemmed words would
be stemmed again, `address` -> `addres` -> `addr`), `terms` and `stems` for those that take terms
(the page search, memory recall, the code ranking). It is frozen and pickles, so it crosses to the
Router actor as it is.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from pagedctx.host.text.terms import identifiers, terms, word_terms
from pagedctx.protocol.text import clean_text

__all__ = ["Intent"]


class Intent(BaseModel):
    """The intent a round works on: `text` (rebuilt by scaffolding when `rebuilt`), the input as given
    (`original`), and, derived from `text` when the value is made, never passed in:

    - `words`: its identifiers as written, once each, those that carry a term;
    - `stems`: `terms(text)` in order, repeats kept (a ranking's query counts them);
    - `terms`: `stems` once each, in order.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    rebuilt: bool = False
    original: str = ""
    words: tuple[str, ...] = ()
    stems: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        """Words and terms come from the text, whatever was given for them (they cannot disagree)."""
        if not isinstance(data, dict) or not isinstance(data.get("text"), str):
            return data
        text: str = data["text"]
        stems = tuple(terms(text))
        return {
            **data,
            "original": data.get("original") or text,
            "words": tuple(w for w in dict.fromkeys(identifiers(text)) if word_terms(w)),
            "stems": stems,
            "terms": tuple(dict.fromkeys(stems)),
        }

    @classmethod
    def of(cls, text: str) -> Intent:
        """The intent for `text` as given (not rebuilt)."""
        return cls(text=text)

    @classmethod
    def asked(cls, text: str | Intent) -> Intent:
        """The intent a user asked with `text`: cleaned (lone surrogates become U+FFFD), its text
        stripped (kept whole when it is only spaces), the cleaned input kept as `original`. An
        `Intent` is returned as it is."""
        if isinstance(text, Intent):
            return text
        clean = clean_text(text)
        return cls(text=clean.strip() or clean, original=clean)
