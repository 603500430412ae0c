"""Grammars and compiled tags queries of the chunker's languages (S2): built lazily, once per process.

`compiled(language)` loads a spec's grammar and compiles its chunking query: the grammar's stock
`queries/tags.scm` (read from the installed package with importlib.resources, never copied), our
extension files in `queries/` (their definitions marked `EXTENSION_MARK`), then the engine's own
patterns (`IDENTIFIER_CAPTURE`, `LEADING_CAPTURE`, `TOKENS_CAPTURE`); `CompiledLanguage.tags` is
the same text with every reference pattern enabled.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib.resources import files

import tree_sitter as ts

from pagedctx.errors import UsageError
from pagedctx.host.code.languages import LanguageSpec, spec_for

__all__ = [
    "EXTENSION_MARK",
    "IDENTIFIER_CAPTURE",
    "LEADING_CAPTURE",
    "TOKENS_CAPTURE",
    "CompiledLanguage",
    "compiled",
    "query_source",
]

_DEFINITION_KIND = re.compile(r"@(?:name\.)?definition\.([A-Za-z_]+)")
IDENTIFIER_CAPTURE = "identifier"
"""The capture of the pattern appended to the chunking query for identifier-like leaves."""
EXTENSION_MARK = ".ext"
"""Suffix of our extension files' `@definition.<kind>` captures in the compiled queries: when a stock
pattern and one of ours capture the same node, ours says what it is (chunker rule 1)."""
_EXTENSION_DEFINITION = re.compile(r"@definition\.([A-Za-z_]+)")
_MARK = rf"@definition.\1{EXTENSION_MARK}"
LEADING_CAPTURE = "leading"
"""The capture of the pattern appended to the chunking query for `leading_types` nodes."""
TOKENS_CAPTURE = "tokens"
"""The capture of the pattern appended to the chunking query for `token_types` nodes."""


@dataclass(frozen=True)
class CompiledLanguage:
    """A language's grammar and queries, compiled once per process (see `compiled`)."""

    spec: LanguageSpec
    language: ts.Language
    chunking: ts.Query
    """Stock + extension queries, every pattern that defines no known kind disabled, then the
    engine's patterns: identifier-like leaves (`@identifier`) and `leading_types` nodes (`@leading`).
    One tree walk per file gives everything."""
    identifier_types: frozenset[str]

    def parser(self) -> ts.Parser:
        """A new parser (parsers are cheap and not thread-safe, so none is shared)."""
        return ts.Parser(self.language)

    @functools.cached_property
    def tags(self) -> ts.Query:
        """Stock + extension queries with every pattern enabled (definitions and references), but the
        stock definition patterns of a spec without `stock_definitions`; the stock `@doc` capture
        off (tags do not use it, and the stock `(comment)* @doc` made a run of k comments cost k^2)."""
        text = query_source(self.spec)
        query = _query(self.language, text, self.spec.name)
        _disable_stock_definitions(self.spec, query, text)
        query.disable_capture("doc")
        return query


def _stock_source(spec: LanguageSpec) -> str:
    parts = []
    for package, resource in spec.stock_sources():
        stock = files(package).joinpath(resource).read_text(encoding="utf-8")
        parts.append(f"; ---- stock: {package}/{resource}\n{stock}")
    return "\n".join(parts)


def query_source(spec: LanguageSpec) -> str:
    """The stock tags.scm files of a spec followed by its extension files, as one query text; the
    extension files' `@definition.<kind>` captures are marked `@definition.<kind>.ext`."""
    parts = [_stock_source(spec)] if spec.stock_sources() else []
    queries = files("pagedctx.host.code").joinpath("queries")
    for name in spec.extension_queries:
        ours = queries.joinpath(name).read_text(encoding="utf-8")
        parts.append(f"; ---- extension: queries/{name}\n{_EXTENSION_DEFINITION.sub(_MARK, ours)}")
    return "\n".join(parts)


def _pattern_text(query: ts.Query, raw: bytes, index: int) -> str:
    return raw[query.start_byte_for_pattern(index) : query.end_byte_for_pattern(index)].decode()


def _disable_stock_definitions(spec: LanguageSpec, query: ts.Query, text: str) -> None:
    """Disable the stock file's definition patterns of a spec without `stock_definitions`."""
    if spec.stock_definitions:
        return
    raw, stock_end = text.encode(), len(_stock_source(spec).encode())
    for index in range(query.pattern_count):
        if query.start_byte_for_pattern(index) >= stock_end:
            break
        if _DEFINITION_KIND.search(_pattern_text(query, raw, index)):
            query.disable_pattern(index)


def _query(language: ts.Language, text: str, name: str) -> ts.Query:
    try:
        return ts.Query(language, text)
    except ts.QueryError as exc:
        raise UsageError(
            f"the tags queries for {name} do not compile against the installed grammar ({exc}); "
            "reinstall pagedctx with its pinned tree-sitter grammar packages"
        ) from None


@functools.cache
def compiled(language: str) -> CompiledLanguage:
    """The compiled grammar and queries of a language, built on first use and cached."""
    spec = spec_for(language)
    lang = ts.Language(spec.load_grammar())
    kinds = frozenset(kind for kind in spec.identifier_types if lang.id_for_node_kind(kind, True) is not None)
    leading = sorted(kind for kind in spec.leading_types if lang.id_for_node_kind(kind, True) is not None)
    tokens = sorted(kind for kind in spec.token_types if lang.id_for_node_kind(kind, True) is not None)
    extra = [
        "[" + " ".join(f"({kind})" for kind in sorted(kinds)) + f"] @{IDENTIFIER_CAPTURE}",
        *(["[" + " ".join(f"({kind})" for kind in leading) + f"] @{LEADING_CAPTURE}"] if leading else []),
        *(["[" + " ".join(f"({kind})" for kind in tokens) + f"] @{TOKENS_CAPTURE}"] if tokens else []),
    ]
    text = query_source(spec) + "\n; ---- engine\n" + "\n".join(extra) + "\n"
    query = _query(lang, text, spec.name)
    raw = text.encode()
    for index in range(query.pattern_count - len(extra)):
        pattern = _pattern_text(query, raw, index)
        if not any(spec.kind(kind) is not None for kind in _DEFINITION_KIND.findall(pattern)):
            query.disable_pattern(index)
    _disable_stock_definitions(spec, query, text)
    query.disable_capture("doc")  # the engine attaches doc comments itself (chunker rule 2)
    return CompiledLanguage(spec, lang, query, kinds)
