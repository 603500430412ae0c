"""Answer PCR requests from the code index as PCES, deterministically (SPEC C1-C5; docs/pcr.md, Engine).

`answer(index, request)` gives one evidence per need, in need order (C1), each echoing its need's
ref and view (C2). Refs resolve as follows:

- `u12` -> `index.unit(12)`; `path::Q.name#N` -> `index.chunk(id)`; a bare symbol -> the chunks of
  `index.defining(name)` that define it by name or qualified name. None -> `status: missing` with
  the reason (exist: `status: no`); several -> `status: ambiguous` with every candidate
  `u<ID> <chunk id> @ <path>:<line>`, sorted by unit.
- a file path -> the file's chunks (its top-level definitions); a layout ref `.text` -> the
  assembly label chunks whose section (the first line of their skeleton) is that name.

Views (C3): exist (`path:start-end`), definition (kind, unit, the chunk's body), api (a function's
skeleton; a container's head and its members' skeletons, in source order), impl (the body), asm
(labels with their place and section; the instruction lines as `path:line: text`), summary
(key: value pairs), callchain (the shortest path through the reference graph of
`host/pces/callgraph.py`, calls first, then any reference; ties broken by unit number, every hop
after the first with its call site).

Integrity (C5): evidence whose content an earlier block already gave (the same unit and view, a
definition or implementation inside one already given, or the same content) refers back to it
instead of repeating it. `source` is the evidence's unit, `layout`, or `unknown` (C2). Every
iteration is over sorted data: the output is byte-identical across runs.

Here: the views, the callchain search and the integrity bookkeeping (C5); the cached index
look-ups and ref resolution are `lookups.py`, the assembly and linker-script layout content
`layout.py`, the reference graph `callgraph.py`.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from pagedctx.errors import UsageError
from pagedctx.host.code.chunk import Chunk, ChunkKind
from pagedctx.host.ingest.index import Index
from pagedctx.host.ingest.meta import FileMeta
from pagedctx.host.pces.callgraph import CallGraph
from pagedctx.host.pces.layout import asm_many, asm_parts, layout_section, script_summary, span_text
from pagedctx.host.pces.lookups import ASM, IndexLookups, norm_path
from pagedctx.protocol.code_evidence.pces import (
    Content,
    DefinitionKind,
    Evidence,
    PcesAnswer,
    SummaryValue,
    ambiguous_content,
    api_content,
    asm_content,
    call_hop,
    callchain_content,
    definition_content,
    evidence_for,
    exist_content,
    impl_content,
    missing_content,
    same_as_content,
    summary_content,
    unit_id,
)
from pagedctx.protocol.code_evidence.pces_text import render_pces
from pagedctx.protocol.code_evidence.pcr import Need, PcrRequest, parse_pcr
from pagedctx.protocol.code_evidence.refs import CallchainRef, FileRef, LayoutRef

__all__ = ["MAX_CHUNKS_VISITED", "MAX_DEFINITIONS_FOLLOWED", "MAX_HOPS", "answer", "answer_text"]

# Bounds of the callchain search: deterministic, and they keep a no-path answer fast on big indexes.
MAX_HOPS = 12
MAX_DEFINITIONS_FOLLOWED = 8
MAX_CHUNKS_VISITED = 20_000

_KINDS: dict[ChunkKind, DefinitionKind] = {
    ChunkKind.FUNCTION: "func",
    ChunkKind.METHOD: "func",
    ChunkKind.MACRO: "func",
    ChunkKind.CLASS: "class",
    ChunkKind.STRUCT: "class",
    ChunkKind.INTERFACE: "class",
    ChunkKind.TRAIT: "class",
    ChunkKind.IMPL: "class",
    ChunkKind.MODULE: "class",
    ChunkKind.NAMESPACE: "class",
    ChunkKind.ENUM: "type",
    ChunkKind.TYPE: "type",
    ChunkKind.CONSTANT: "var",
    ChunkKind.VARIABLE: "var",
    ChunkKind.LABEL: "label",
}
_CONTAINERS = frozenset(
    {
        ChunkKind.CLASS,
        ChunkKind.STRUCT,
        ChunkKind.INTERFACE,
        ChunkKind.TRAIT,
        ChunkKind.IMPL,
        ChunkKind.ENUM,
        ChunkKind.MODULE,
        ChunkKind.NAMESPACE,
    }
)
_NO = exist_content("no")

Key = tuple[str, ...]
Span = tuple[str, int, int]  # path, start byte, end byte


@dataclass(frozen=True)
class _Result:
    """What one need resolves to, before the repetition check (C5)."""

    source: str
    content: Content
    keys: tuple[Key, ...] = ()
    spans: tuple[Span, ...] = ()  # code bodies this content gives in full
    inside: tuple[Span, ...] = ()  # bodies that, if given earlier, make this content a repetition


def _unknown(content: Content) -> _Result:
    return _Result("unknown", content)


def _span(chunk: Chunk) -> Span:
    return (chunk.path, chunk.start_byte, chunk.end_byte)


class _Engine(IndexLookups):
    """One builder per kind of ref over the look-ups; `given` is what earlier blocks gave."""

    def __init__(self, index: Index) -> None:
        super().__init__(index)
        self.graph = CallGraph(self, MAX_DEFINITIONS_FOLLOWED)
        self.given_keys: dict[Key, int] = {}
        self.given_spans: list[tuple[Span, int]] = []

    # --- views of one chunk --------------------------------------------------------------------

    def chunk_view(self, view: str, chunk: Chunk) -> _Result:
        number = self.unit(chunk)
        if number < 0:
            raise UsageError(
                f"chunk {chunk.id} has no unit number: the index predates them; "
                "run `pagedctx index ROOT` once (or `pagedctx pcr --repo ROOT`) to number its chunks"
            )
        source = unit_id(number)
        if view == "exist":
            return _Result(source, exist_content("yes", span_text(chunk)), (("exist", source),))
        if view in ("definition", "impl"):
            content = (
                definition_content(_KINDS[chunk.kind], number, chunk.body)
                if view == "definition"
                else impl_content(chunk.body)
            )
            return _Result(source, content, (("body", source),), (_span(chunk),), (_span(chunk),))
        if view == "api":
            return _Result(source, api_content(self.signatures(chunk)), (("api", source),))
        if view == "asm":
            if chunk.language != ASM:
                reason = f"{source} {chunk.id} is {chunk.language} code, not an assembly label"
                return _unknown(missing_content(reason))
            labels, flow = asm_parts(chunk)
            return _Result(source, asm_content(labels, flow), (("asm", source),))
        return _Result(source, summary_content(self.summary(chunk)), (("summary", source),))

    def members(self, chunk: Chunk) -> list[Chunk]:
        return [c for c in self.file_chunks(chunk.path) if c.parent == chunk.qualname and c.id != chunk.id]

    def signatures(self, chunk: Chunk) -> list[str]:
        """A function's skeleton; a container's head (its text up to its first member) and members."""
        members = self.members(chunk) if chunk.kind in _CONTAINERS else []
        if not members:
            return [chunk.skeleton]
        head = chunk.skeleton
        data = chunk.body.encode()
        first = members[0].start_byte - chunk.start_byte
        if len(data) == chunk.end_byte - chunk.start_byte and 0 < first < len(data):
            head = data[:first].decode("utf-8", errors="replace").rstrip()
        return [head] + [member.skeleton for member in members]

    def summary(self, chunk: Chunk) -> dict[str, str]:
        pairs = {
            "id": chunk.id,
            "kind": chunk.kind.value,
            "language": chunk.language,
            "qualname": chunk.qualname,
            "path": chunk.path,
            "lines": f"{chunk.start_line}-{chunk.end_line}",
        }
        if chunk.parent is not None:
            pairs["parent"] = chunk.parent
        section = layout_section(chunk)
        if section is not None:
            pairs["section"] = section
        if chunk.symbols_defined:
            pairs["defines"] = ", ".join(chunk.symbols_defined)
        pairs["references"] = str(len(chunk.symbols_referenced))
        return pairs

    # --- files and layout ----------------------------------------------------------------------

    def file_view(self, view: str, ref: FileRef) -> _Result:
        path = norm_path(ref.path)
        meta = self.index.file(path)
        if meta is None:
            return _unknown(_NO if view == "exist" else missing_content(f"file {path} is not in the index"))
        chunks = self.file_chunks(path)
        top = [c for c in chunks if c.parent is None]
        source = unit_id(self.unit(top[0])) if top else "unknown"
        key = ("file", view, path)
        if view == "exist":
            where = f"{path}:1-{meta.lines}" if meta.lines else path
            return _Result(source, exist_content("yes", where), (key,))
        if view == "definition":
            reason = (
                f"{path} is a file, not one definition: ask for its api, impl, summary or exist, "
                f"or name a definition as {path}::<Name>"
            )
            return _Result(source, missing_content(reason), (key,))
        if view == "api":
            return _Result(source, api_content(c.skeleton for c in top), (key,))
        if view == "impl":
            return self.file_impl(source, key, top)
        if view == "asm":
            if meta.language != ASM:
                return _Result(
                    source, missing_content(f"{path} is {meta.language} code, not assembly"), (key,)
                )
            labels, flow = asm_many(chunks)
            return _Result(source, asm_content(labels, flow), (key,))
        return _Result(source, summary_content(_file_summary(meta, chunks, top)), (key,))

    def file_impl(self, source: str, key: Key, top: list[Chunk]) -> _Result:
        parts: list[str] = []
        spans: list[Span] = []
        for chunk in top:
            earlier = self.given_within(_span(chunk))
            if earlier is None:
                parts.append(chunk.body)
                spans.append(_span(chunk))
            else:
                parts.append(f"{unit_id(self.unit(chunk))} {chunk.id}: same_as evidence {earlier}")
        return _Result(source, impl_content(parts), (key,), tuple(spans))

    def layout_view(self, view: str, ref: LayoutRef) -> _Result:
        chunks = sorted(
            (c for c in self.asm_chunks() if layout_section(c) == ref.name),
            key=lambda c: (c.path, c.start_byte, c.id),
        )
        scripts = [c for c in self.script_chunks() if c.kind is ChunkKind.LABEL and c.name == ref.name]
        if not chunks and not scripts:
            reason = f"no linker-script section or assembly label in section {ref.name}"
            return _unknown(_NO if view == "exist" else missing_content(reason))
        key = ("layout", view, ref.name)
        if view == "exist":
            where = ", ".join(span_text(c) for c in [*scripts, *chunks])
            return _Result("layout", exist_content("yes", where), (key,))
        if view == "api":
            return _Result("layout", api_content(c.skeleton for c in [*scripts, *chunks]), (key,))
        if view == "asm" and chunks:
            labels, flow = asm_many(chunks)
            return _Result("layout", asm_content(labels, flow), (key,))
        if view == "summary":
            pairs: dict[str, SummaryValue] = {"section": ref.name}
            for script in scripts:
                pairs.update(script_summary(script, self.script_chunks()))
            if chunks:
                pairs["labels"] = str(len(chunks))
                pairs["units"] = {unit_id(self.unit(c)): f"{c.name} @ {span_text(c)}" for c in chunks}
            return _Result("layout", summary_content(pairs), (key,))
        reason = f"{ref.name} is a section: ask for its exist, api, asm or summary, or name one of its labels"
        return _Result("layout", missing_content(reason), (key,))

    # --- callchain -----------------------------------------------------------------------------

    def callchain(self, ref: CallchainRef) -> _Result:
        ends: list[Chunk] = []
        for end in (ref.start, ref.end):
            found = self.resolve(end)
            if isinstance(found, str):
                side = "start" if end is ref.start else "end"
                return _unknown(missing_content(f"{side} {end.raw}: {found}"))
            if len(found) > 1:
                return _unknown(ambiguous_content(self.candidates(found)))
            ends.append(found[0])
        start, goal = ends
        hops = self.shortest_path(start, goal)
        source = unit_id(self.unit(start))
        if hops is None:
            reason = (
                f"no call path from {unit_id(self.unit(start))} {start.id} to "
                f"{unit_id(self.unit(goal))} {goal.id} in the reference graph within {MAX_HOPS} hops "
                f"(a name left with more than {MAX_DEFINITIONS_FOLLOWED} candidate definitions after "
                "resolution is not followed)"
            )
            return _Result(source, missing_content(reason), (("callchain", start.id, goal.id),))
        path = [call_hop(self.unit(start), _hop_symbol(start, start.qualname))]
        for caller, symbol, callee in hops:
            path.append(
                call_hop(self.unit(callee), _hop_symbol(callee, symbol), self.call_site(caller, symbol))
            )
        return _Result(source, callchain_content(path), (("callchain", *path),))

    def shortest_path(self, start: Chunk, goal: Chunk) -> list[tuple[Chunk, str, Chunk]] | None:
        """A shortest path through calls, else through any reference (a callback, a type)."""
        if start.id == goal.id:
            return []
        found = self.search(start, goal, calls_only=True)
        return found if found is not None else self.search(start, goal, calls_only=False)

    def search(self, start: Chunk, goal: Chunk, *, calls_only: bool) -> list[tuple[Chunk, str, Chunk]] | None:
        """BFS over the reference graph; neighbours in unit order, so the first path found wins ties."""
        previous: dict[str, tuple[Chunk, str, Chunk]] = {}
        queue: deque[tuple[Chunk, int]] = deque([(start, 0)])
        seen = {start.id}
        while queue and len(seen) < MAX_CHUNKS_VISITED:
            chunk, depth = queue.popleft()
            if depth >= MAX_HOPS:
                continue
            for _, symbol, callee in self.graph.edges(chunk, calls_only=calls_only):
                if callee.id in seen:
                    continue
                seen.add(callee.id)
                previous[callee.id] = (chunk, symbol, callee)
                if callee.id == goal.id:
                    hops = [previous[goal.id]]
                    while hops[-1][0].id != start.id:
                        hops.append(previous[hops[-1][0].id])
                    return hops[::-1]
                queue.append((callee, depth + 1))
        return None

    def call_site(self, caller: Chunk, symbol: str) -> str:
        """`path:line` where `caller` mentions `symbol`: a call tag first, any reference, a word."""
        found = self.file_tags(caller.path)
        if found is not None:
            inside = [
                t
                for t in found
                if t.role == "reference"
                and t.name == symbol
                and caller.start_byte <= t.start_byte < caller.end_byte
            ]
            calls = [t for t in inside if t.kind == "call"] or inside
            if calls:
                return f"{caller.path}:{calls[0].line}"
        word = re.compile(rf"(?<![\w$]){re.escape(symbol)}(?![\w$])")
        for offset, line in enumerate(caller.body.split("\n")[1:], 1):
            if word.search(line):
                return f"{caller.path}:{caller.start_line + offset}"
        return f"{caller.path}:{caller.start_line}"

    # --- one need ------------------------------------------------------------------------------

    def evidence(self, need: Need) -> _Result:
        ref = need.ref
        if isinstance(ref, CallchainRef):
            return self.callchain(ref)
        if isinstance(ref, FileRef):
            return self.file_view(need.view, ref)
        if isinstance(ref, LayoutRef):
            return self.layout_view(need.view, ref)
        found = self.resolve(ref)
        if isinstance(found, str):
            return _unknown(_NO if need.view == "exist" else missing_content(found))
        if len(found) > 1:
            return _unknown(ambiguous_content(self.candidates(found)))
        return self.chunk_view(need.view, found[0])

    def given_within(self, span: Span) -> int | None:
        """The first evidence that gave a body containing `span` in full, or None."""
        path, start, end = span
        return next(
            (number for (p, s, e), number in self.given_spans if p == path and s <= start and end <= e),
            None,
        )

    def earlier(self, result: _Result, seen: dict[str, int]) -> int | None:
        for key in result.keys:
            if key in self.given_keys:
                return self.given_keys[key]
        for span in result.inside:
            number = self.given_within(span)
            if number is not None:
                return number
        if result.content == _NO:
            return None  # `status: no` says nothing more than itself
        return seen.get(result.content.model_dump_json())

    def record(self, result: _Result, number: int, seen: dict[str, int]) -> None:
        for key in result.keys:
            self.given_keys.setdefault(key, number)
        self.given_spans.extend((span, number) for span in result.spans)
        seen.setdefault(result.content.model_dump_json(), number)


def _hop_symbol(chunk: Chunk, preferred: str) -> str:
    """The hop's symbol: the qualified name, or the referenced name if that has whitespace."""
    if chunk.qualname and not any(ch.isspace() for ch in chunk.qualname):
        return chunk.qualname
    return preferred if not any(ch.isspace() for ch in preferred) else chunk.name.replace(" ", "_")


def _file_summary(meta: FileMeta, chunks: list[Chunk], top: list[Chunk]) -> dict[str, str]:
    pairs = {
        "path": meta.path,
        "language": meta.language,
        "lines": str(meta.lines),
        "definitions": str(len(chunks)),
    }
    if top:
        pairs["top_level"] = ", ".join(c.qualname for c in top)
    if meta.errors:
        pairs["syntax_errors"] = str(len(meta.errors))
    return pairs


def answer(index: Index, request: PcrRequest) -> PcesAnswer:
    """The PCES answer to `request` from `index`: one evidence per need, in order (C1-C5)."""
    engine = _Engine(index)
    seen: dict[str, int] = {}
    evidence: list[Evidence] = []
    for number, need in enumerate(request.needs, 1):
        result = engine.evidence(need)
        earlier = engine.earlier(result, seen)
        if earlier is None:
            engine.record(result, number, seen)
            content = result.content
        else:
            content = same_as_content(earlier)
        evidence.append(evidence_for(need, result.source, content))
    return PcesAnswer(evidence=tuple(evidence))


def answer_text(index: Index, text: str) -> str:
    """The `<pcir>` document answering the PCR request `text` (PcrSyntaxError if it is malformed)."""
    return render_pces(answer(index, parse_pcr(text)))
