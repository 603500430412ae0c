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

Long on purpose (over 450 lines): the views share ref resolution and the integrity bookkeeping (C5)
that decides what an earlier block already gave.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pagedctx.errors import UsageError
from pagedctx.host.code.chunk import Chunk, ChunkKind, chunk_id
from pagedctx.host.code.chunker import Tag, tags
from pagedctx.host.ingest.index import Index
from pagedctx.host.ingest.meta import FileMeta, IndexMeta
from pagedctx.host.pces.callgraph import CallGraph
from pagedctx.host.store import keys
from pagedctx.protocol.pces import (
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
from pagedctx.protocol.pces_text import render_pces
from pagedctx.protocol.pcr import (
    CallchainRef,
    EndRef,
    FileRef,
    LayoutRef,
    Need,
    PcrRequest,
    QualifiedRef,
    SymbolRef,
    UnitRef,
    parse_pcr,
)

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
_ASM = "asm"
_ASM_LABEL = re.compile(r"\s*([A-Za-z_.$][\w.$@]*|[0-9]+)\s*:(?!:)\s*(.*)")
_ASM_COMMENT = ("//", ";", "/*", "*", "# ", "@ ")
_NO = exist_content("no")
_LD = "ld"
_LD_REGION = re.compile(r">\s*([A-Za-z_]\w*)")
_LD_SIZE = re.compile(r"\.\s*(?:=\s*\.\s*\+|\+=)\s*([^;]+);")

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


def _span_text(chunk: Chunk) -> str:
    return f"{chunk.path}:{chunk.start_line}-{chunk.end_line}"


def _span(chunk: Chunk) -> Span:
    return (chunk.path, chunk.start_byte, chunk.end_byte)


def _norm(path: str) -> str:
    """A ref's path as the index writes it: POSIX, relative, no `./`."""
    return posixpath.normpath(path).lstrip("/") if path not in ("", ".") else path


def _section(chunk: Chunk) -> str | None:
    """The layout section of an assembly label (`.text`), None for other chunks."""
    return chunk.section if chunk.language == _ASM else None


class _Engine:
    """Look-ups with caches, and one builder per kind of ref; `given` is what earlier blocks gave."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._units: dict[str, int | None] = {}
        self._defining: dict[str, list[Chunk]] = {}
        self._files: dict[str, list[Chunk]] = {}
        self._tags: dict[str, tuple[Tag, ...] | None] = {}
        self._asm: list[Chunk] | None = None
        self._scripts: list[Chunk] | None = None
        self._base: str | None = None
        self.graph = CallGraph(self, MAX_DEFINITIONS_FOLLOWED)
        self.given_keys: dict[Key, int] = {}
        self.given_spans: list[tuple[Span, int]] = []

    # --- look-ups ------------------------------------------------------------------------------

    def unit(self, chunk: Chunk) -> int:
        if chunk.id not in self._units:
            self._units[chunk.id] = self.index.unit_of(chunk.id)
        number = self._units[chunk.id]
        return -1 if number is None else number

    def defining(self, symbol: str) -> list[Chunk]:
        if symbol not in self._defining:
            self._defining[symbol] = [c for c in self.index.defining(symbol) if self.unit(c) >= 0]
        return self._defining[symbol]

    def file_chunks(self, path: str) -> list[Chunk]:
        if path not in self._files:
            found = self.index.chunks_in_file(path)
            self._files[path] = sorted(found, key=lambda c: (c.start_byte, c.end_byte, c.id))
        return self._files[path]

    def sorted_units(self, chunks: Sequence[Chunk]) -> list[Chunk]:
        return sorted({c.id: c for c in chunks}.values(), key=lambda c: (self.unit(c), c.id))

    def candidates(self, chunks: Sequence[Chunk]) -> list[str]:
        return [f"{unit_id(self.unit(c))} {c.id} @ {c.path}:{c.start_line}" for c in chunks]

    def resolve(self, ref: EndRef) -> list[Chunk] | str:
        """The chunks a unit, qualified or symbol ref names (sorted by unit), or why there are none."""
        if isinstance(ref, UnitRef):
            chunk = self.index.unit(ref.number)
            return [chunk] if chunk is not None else f"no unit {ref.raw} in the index"
        if isinstance(ref, QualifiedRef):
            path = _norm(ref.path)
            chunk = self.index.chunk(chunk_id(path, ref.qualname, ref.occurrence))
            if chunk is not None:
                return [chunk]
            if self.index.file(path) is None:
                return f"file {path} is not in the index"
            return f"no definition {chunk_id(path, ref.qualname, ref.occurrence)} in {path}"
        if isinstance(ref, SymbolRef):
            found = [
                c for c in self.defining(ref.name) if ref.name in c.symbols_defined or c.qualname == ref.name
            ]
            return self.sorted_units(found) or f"no definition of {ref.name} in the index"
        return f"{ref.raw} names no single definition"

    def script_chunks(self) -> list[Chunk]:
        """Chunks of the indexed linker scripts (sections, symbols, memory regions)."""
        if self._scripts is None:
            found: list[Chunk] = []
            for path in self.index.paths():
                meta = self.index.file(path)
                if meta is not None and meta.language == _LD:
                    found.extend(self.file_chunks(path))
            self._scripts = found
        return self._scripts

    def script_summary(self, section: Chunk) -> dict[str, SummaryValue]:
        """key: value pairs of a linker-script section: where, region, size, the symbols it sets."""
        pairs: dict[str, SummaryValue] = {"script": _span_text(section)}
        region = _LD_REGION.search(section.body.rsplit("}", 1)[-1])
        if region is not None:
            pairs["region"] = region.group(1)
        size = _LD_SIZE.search(section.body)
        if size is not None:
            pairs["size"] = size.group(1).strip()
        for child in self.script_chunks():
            if (
                child.parent == section.name
                and child.path == section.path
                and child.kind is ChunkKind.CONSTANT
            ):
                value = child.body.split("=", 1)[1].rstrip(";").rstrip(")").strip()
                pairs[child.name] = value
        return pairs

    def asm_chunks(self) -> list[Chunk]:
        if self._asm is None:
            found: list[Chunk] = []
            for path in self.index.paths():
                meta = self.index.file(path)
                if meta is not None and meta.language == _ASM:
                    found.extend(self.file_chunks(path))
            self._asm = found
        return self._asm

    def paths(self) -> list[str]:
        return self.index.paths()

    def source(self, path: str) -> tuple[str, bytes | None] | None:
        """(language, the file's bytes read from disk, or None when they changed since indexing),
        None for a file that is not indexed."""
        meta = self.index.file(path)
        if meta is None:
            return None
        base = self._index_base()
        if base is None:
            return meta.language, None
        try:
            data = (Path(base) / path).read_bytes()
        except OSError:
            return meta.language, None
        return meta.language, data if hashlib.sha256(data).hexdigest() == meta.sha256 else None

    def file_tags(self, path: str) -> tuple[Tag, ...] | None:
        """The tags of an indexed file read from disk, or None when it changed since indexing."""
        if path not in self._tags:
            found = self.source(path)
            self._tags[path] = tags(path, found[1], found[0]) if found and found[1] is not None else None
        return self._tags[path]

    def _index_base(self) -> str | None:
        if self._base is None:
            raw = self.index.store.get(keys.INDEX_META)
            self._base = (IndexMeta.model_validate_json(raw).base if raw else None) or ""
        return self._base or None

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
            return _Result(source, exist_content("yes", _span_text(chunk)), (("exist", source),))
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
            if chunk.language != _ASM:
                reason = f"{source} {chunk.id} is {chunk.language} code, not an assembly label"
                return _unknown(missing_content(reason))
            labels, flow = _asm_parts(chunk)
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
        section = _section(chunk)
        if section is not None:
            pairs["section"] = section
        if chunk.symbols_defined:
            pairs["defines"] = ", ".join(chunk.symbols_defined)
        pairs["references"] = str(len(chunk.symbols_referenced))
        return pairs

    # --- files and layout ----------------------------------------------------------------------

    def file_view(self, view: str, ref: FileRef) -> _Result:
        path = _norm(ref.path)
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
            if meta.language != _ASM:
                return _Result(
                    source, missing_content(f"{path} is {meta.language} code, not assembly"), (key,)
                )
            labels, flow = _asm_many(chunks)
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
            (c for c in self.asm_chunks() if _section(c) == ref.name),
            key=lambda c: (c.path, c.start_byte, c.id),
        )
        scripts = [c for c in self.script_chunks() if c.kind is ChunkKind.LABEL and c.name == ref.name]
        if not chunks and not scripts:
            reason = f"no linker-script section or assembly label in section {ref.name}"
            return _unknown(_NO if view == "exist" else missing_content(reason))
        key = ("layout", view, ref.name)
        if view == "exist":
            where = ", ".join(_span_text(c) for c in [*scripts, *chunks])
            return _Result("layout", exist_content("yes", where), (key,))
        if view == "api":
            return _Result("layout", api_content(c.skeleton for c in [*scripts, *chunks]), (key,))
        if view == "asm" and chunks:
            labels, flow = _asm_many(chunks)
            return _Result("layout", asm_content(labels, flow), (key,))
        if view == "summary":
            pairs: dict[str, SummaryValue] = {"section": ref.name}
            for script in scripts:
                pairs.update(self.script_summary(script))
            if chunks:
                pairs["labels"] = str(len(chunks))
                pairs["units"] = {unit_id(self.unit(c)): f"{c.name} @ {_span_text(c)}" for c in chunks}
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


def _asm_parts(chunk: Chunk) -> tuple[list[str], list[str]]:
    """Labels (`name @ path:line (section ...)`) and flow (`path:line: instruction`) of one chunk."""
    info = chunk.skeleton.split("\n", 1)[0]
    info = f" ({info[2:]})" if info.startswith("; section ") else ""
    labels: list[str] = []
    flow: list[str] = []
    own = False
    for offset, line in enumerate(chunk.body.split("\n")):
        number = chunk.start_line + offset
        text = line.strip()
        if not text or text.startswith(_ASM_COMMENT) or text == "#":
            continue
        match = _ASM_LABEL.fullmatch(line)
        if match is not None:
            name = match.group(1)
            is_own = name == chunk.name and not own
            own = own or is_own
            labels.append(f"{name} @ {chunk.path}:{number}{info if is_own else ''}")
            text = match.group(2).strip()
            if not text or text.startswith(_ASM_COMMENT):
                continue
        if text.startswith("."):
            continue  # a directive: layout, not flow
        flow.append(f"{chunk.path}:{number}: {text}")
    if not own:
        labels.insert(0, f"{chunk.name} @ {chunk.path}:{chunk.start_line}{info}")
    return labels, flow


def _asm_many(chunks: Sequence[Chunk]) -> tuple[list[str], list[str]]:
    labels: list[str] = []
    flow: list[str] = []
    for chunk in chunks:
        more_labels, more_flow = _asm_parts(chunk)
        labels += more_labels
        flow += more_flow
    return labels, flow


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
