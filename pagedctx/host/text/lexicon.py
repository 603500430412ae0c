"""WordNet as a read-only lexicon: related words for query expansion (P8 recall, P16 search).

People ask in other words than they wrote: "Which town is my sibling based in?" for "my sister
signed a lease on a flat in Porto". WordNet (Princeton, WordNet 3.0 as Debian's `wordnet-base`
ships it in /usr/share/wordnet) links "sister" to "sibling" (hypernym), "reside" to "live" (same
synset), "allergic" to "allergy" to "reaction". This module reads the database files directly:
index files are sorted, so a lemma is found by binary search over a memory map; a synset's offset
is its byte offset in the data file, so it is read with one seek. Nothing is loaded up front.

`Lexicon.related(word)` gives weighted related lemmas: synonyms (the lemma's first senses),
derivationally related forms, hypernyms up to `up` levels (weight halving per level) and, for
nouns, direct hyponyms. Inflections are reduced with WordNet's own exception lists and detachment
rules (morphy). `Lexicon.empty()` is the lexicon of a machine without WordNet: it relates nothing.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

__all__ = ["DEFAULT_WORDNET", "Lexicon", "find_wordnet"]

DEFAULT_WORDNET = Path("/usr/share/wordnet")
_POS = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
_RULES = {
    "n": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
          ("men", "man"), ("ies", "y")],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
          ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "r": [],
}  # fmt: skip
_SENSES = 2  # senses of a lemma used (WordNet lists the most frequent first)
_MAX_HYPONYMS = 12  # a synset with more direct hyponyms is too general to expand downwards


def find_wordnet() -> Path | None:
    """`$PAGEDCTX_WORDNET`, else /usr/share/wordnet, when it holds the database files; else None."""
    configured = os.environ.get("PAGEDCTX_WORDNET")
    for candidate in ([Path(configured)] if configured else []) + [DEFAULT_WORDNET]:
        if (candidate / "index.noun").is_file() and (candidate / "data.noun").is_file():
            return candidate
    return None


@dataclass(frozen=True)
class _Synset:
    words: tuple[str, ...]
    hypernyms: tuple[tuple[int, str], ...]
    hyponyms: tuple[tuple[int, str], ...]
    derived: tuple[tuple[int, str], ...]
    similar: tuple[tuple[int, str], ...]


@dataclass
class _Files:
    folder: Path
    index: dict[str, mmap.mmap] = field(default_factory=dict)
    data: dict[str, mmap.mmap] = field(default_factory=dict)
    exceptions: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def open(self) -> None:
        for pos, name in _POS.items():
            for kind, target in (("index", self.index), ("data", self.data)):
                with (self.folder / f"{kind}.{name}").open("rb") as handle:
                    target[pos] = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            table: dict[str, list[str]] = {}
            exc = self.folder / f"{name}.exc"
            if exc.is_file():
                for line in exc.read_text(encoding="latin-1").splitlines():
                    parts = line.split()
                    if len(parts) >= 2:
                        table.setdefault(parts[0], []).extend(parts[1:])
            self.exceptions[pos] = table


def _index_line(data: mmap.mmap, lemma: str) -> str | None:
    """Binary search of a sorted WordNet index file for the line of `lemma`."""
    key = lemma.encode("latin-1", errors="ignore") + b" "
    low, high = 0, len(data)
    while low < high:
        middle = (low + high) // 2
        start = data.rfind(b"\n", 0, middle) + 1
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        line = data[start:end]
        if line.startswith(b"  "):  # the license header sorts first
            low = end + 1
            continue
        if line.startswith(key):
            return line.decode("latin-1")
        if line < key:
            low = end + 1
        else:
            high = start
    return None


class Lexicon:
    """Related words from WordNet (see the module docstring)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._files: _Files | None = None
        if folder is not None:
            files = _Files(folder)
            files.open()
            self._files = files

    @classmethod
    def empty(cls) -> Lexicon:
        return cls(None)

    @classmethod
    def default(cls) -> Lexicon:
        """WordNet where `find_wordnet` finds it, else the empty lexicon."""
        return _default()

    @property
    def available(self) -> bool:
        return self._files is not None

    def lemmas(self, word: str, pos: str) -> list[str]:
        """Base forms of `word` as part of speech `pos` ('n', 'v', 'a', 'r') that WordNet knows."""
        if self._files is None:
            return []
        word = word.lower()
        found: list[str] = []
        for base in [word, *self._files.exceptions[pos].get(word, [])]:
            if base not in found and _index_line(self._files.index[pos], base) is not None:
                found.append(base)
        for suffix, ending in _RULES[pos]:
            if word.endswith(suffix) and len(word) > len(suffix) + 1:
                base = word[: -len(suffix)] + ending
                if base not in found and _index_line(self._files.index[pos], base) is not None:
                    found.append(base)
        return found

    def _offsets(self, lemma: str, pos: str) -> list[int]:
        assert self._files is not None
        line = _index_line(self._files.index[pos], lemma)
        if line is None:
            return []
        parts = line.split()
        pointers = int(parts[3])
        senses = int(parts[2])
        offsets = parts[4 + pointers + 2 : 4 + pointers + 2 + senses]
        return [int(o) for o in offsets[:_SENSES]]

    def _synset(self, offset: int, pos: str) -> _Synset:
        return _read_synset(self, offset, pos)

    def _words(self, offset: int, pos: str) -> tuple[str, ...]:
        return self._synset(offset, pos).words

    def related(self, word: str, *, up: int = 2) -> dict[str, float]:
        """Related lemmas of `word` with weights in (0, 1]: 1 synonyms and derivations, then 0.5**level."""
        return dict(_related(self, word.lower(), up))

    def hypernym_closure(self, word: str, *, up: int = 3) -> dict[str, float]:
        """Base forms of a word and the hypernyms of its first senses up to `up` levels (what a text says)."""
        out: dict[str, float] = {}
        if self._files is None:
            return out
        for pos in ("n", "v"):
            for lemma in self.lemmas(word, pos):
                out[lemma] = 1.0  # the base form ("living" is also "live")
                for offset in self._offsets(lemma, pos):
                    for name, weight in self._climb(offset, pos, up):
                        out[name] = max(out.get(name, 0.0), weight)
        out.pop(word.lower(), None)
        return out

    def _climb(self, offset: int, pos: str, up: int) -> Iterator[tuple[str, float]]:
        frontier = [(offset, pos)]
        seen = {(offset, pos)}
        for level in range(1, up + 1):
            following: list[tuple[int, str]] = []
            for current, current_pos in frontier:
                for parent in self._synset(current, current_pos).hypernyms:
                    if parent not in seen:
                        seen.add(parent)
                        following.append(parent)
                        for name in self._words(*parent):
                            yield name, 0.5**level
            frontier = following


@lru_cache(maxsize=1 << 16)
def _read_synset(lexicon: Lexicon, offset: int, pos: str) -> _Synset:
    assert lexicon._files is not None
    data = lexicon._files.data[pos]
    end = data.find(b"\n", offset)
    fields = data[offset : end if end >= 0 else len(data)].decode("latin-1").split(" | ", 1)[0].split()
    count = int(fields[3], 16)
    words = tuple(fields[4 + 2 * i].split("(", 1)[0].replace("_", " ").lower() for i in range(count))
    at = 4 + 2 * count
    pointers = int(fields[at])
    hypernyms: list[tuple[int, str]] = []
    hyponyms: list[tuple[int, str]] = []
    derived: list[tuple[int, str]] = []
    similar: list[tuple[int, str]] = []
    for i in range(pointers):
        symbol, target, target_pos = fields[at + 1 + 4 * i : at + 4 + 4 * i]
        target_pos = "a" if target_pos == "s" else target_pos
        ref = (int(target), target_pos)
        if symbol in ("@", "@i"):
            hypernyms.append(ref)
        elif symbol in ("~", "~i"):
            hyponyms.append(ref)
        elif symbol in ("+", "\\", "="):
            derived.append(ref)
        elif symbol in ("&", "^"):
            similar.append(ref)
    return _Synset(words, tuple(hypernyms), tuple(hyponyms), tuple(derived), tuple(similar))


def _sense_words(lexicon: Lexicon, offset: int, pos: str, up: int) -> Iterator[tuple[str, float]]:
    """What one sense relates to: its synonyms, derivations, hypernyms, and a noun's few hyponyms."""
    synset = lexicon._synset(offset, pos)
    for name in synset.words:
        yield name, 1.0
    for ref in (*synset.derived, *synset.similar):
        for name in lexicon._words(*ref):
            yield name, 0.8
    if pos in ("n", "v"):
        yield from lexicon._climb(offset, pos, up)
    if pos == "n" and len(synset.hyponyms) <= _MAX_HYPONYMS:
        for ref in synset.hyponyms:
            for name in lexicon._words(*ref):
                yield name, 0.5


@lru_cache(maxsize=1 << 14)
def _related(lexicon: Lexicon, word: str, up: int) -> tuple[tuple[str, float], ...]:
    if lexicon._files is None:
        return ()
    out: dict[str, float] = {}
    for pos in ("n", "v", "a", "r"):
        for lemma in lexicon.lemmas(word, pos):
            found = [(lemma, 1.0)] + [
                pair
                for offset in lexicon._offsets(lemma, pos)
                for pair in _sense_words(lexicon, offset, pos, up)
            ]
            for name, weight in found:
                if name != word:
                    out[name] = max(out.get(name, 0.0), weight)
    return tuple(sorted(out.items(), key=lambda item: (-item[1], item[0])))


@lru_cache(maxsize=1)
def _default() -> Lexicon:
    folder = find_wordnet()
    return Lexicon(folder) if folder is not None else Lexicon.empty()
