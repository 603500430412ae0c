"""Assembly source -> chunks, line by line (S2, S3): language `asm`, suffixes `.s .S .asm`.

No tree-sitter grammar for assembly is available, so this is a small line-oriented chunker with the
same contract as `chunker.chunk_file`: one `Chunk` per definition, bodies equal to the source bytes
of their ranges, 1-based inclusive lines, never raising on content. The rules, in order:

1. Dialect, per file: Go/Plan 9 when a line is `TEXT sym(SB)...`; NASM for `.asm` files or when a
   line is a NASM directive (`section .text`, `global f`, `bits 64`, `%define`); Mach-O GAS when
   the file says `.subsections_via_symbols` or names a `__TEXT,` section; GAS otherwise.
2. Comments: `/* ... */` (across lines), `//` and `;` (NASM, Mach-O) to the end of the line; `#`
   and `@` to the end of the line when they start it or are followed by a blank (GAS x86 and
   RISC-V `# note`, ARM `@ note`; ARM immediates `#4`, `#:lo12:x` and `sym@PLT`, `@function` are
   code). NASM has `;` comments only. A line starting `#include`, `#define`, `#if`... (and its `\\`
   continuation lines) is a C preprocessor line, NASM `%...` lines likewise: code, not comment. In
   GAS and Plan 9 `;` separates statements.
3. Labels: `name:` at the start of a statement. Local labels belong to the chunk they appear in
   and are never chunks: GAS `.L...`, numeric `1:`, Mach-O `L...`/`l...`, NASM `.name` (also
   recorded as `outer.name`, NASM's own name for it), every plain label of a Plan 9 file. NASM
   `name db ...` / `name equ ...` (no colon) are labels too, and `EXT(f):` (a label spelled through
   a C preprocessor macro, as in glibc and Go's cgo) is the label `f`.
4. Chunks: a global (non-local) label starts a `label` chunk, as do Plan 9 `TEXT sym(SB)` (named
   `pkg.sym`: `·` is `.`, a leading one dropped), `ENTRY(f)` and `SYM_FUNC_START(f)`-style macro
   lines, and MASM-style `f PROC`. A chunk runs from its label line to the line before the next
   chunk, and ends earlier at a section change (`.section`, `.text`, `.data`, `.bss`,
   `.pushsection`, `.popsection`, `.previous`, NASM `section`/`segment`, Plan 9 `DATA`/`GLOBL`:
   that line is not in the chunk) or at `.size <its name>`, `.end`, `END(f)`,
   `SYM_FUNC_END(f)`, `f ENDP` (that line is). Its last line is its last line of code: trailing
   blank and comment-only lines are not in it. Above the label, the comment lines directly above
   it (no blank line between) belong to it, with the directives naming it there (`.globl f`,
   `.type f, @function`, `.size f, 8` before a data object, NASM `global f`) and alignment
   (`.p2align 4`, `align 16`).
   `.macro m` ... `.endm` (NASM `%macro` ... `%endmacro`) is a `macro` chunk, nothing inside it is
   a chunk. A symbol defined outside every chunk (`.equ N, 4`, `.set`, `N = 4`, NASM `N equ 4`,
   `#define N 4`, `%define`) starts a `constant` chunk that takes the definitions below it up to a
   blank line or other code; inside a chunk it is one of the chunk's symbols.
5. Names: qualname = name (assembly has no nesting); `symbols_defined` is the name, the other
   labels of the label line, the chunk's non-numeric local labels and the constants it defines.
   A label is global when `.globl`/`.global`/NASM `global` names it anywhere in the file (or it is
   an `ENTRY`, or a Plan 9 TEXT symbol without `<>`), weak for `.weak`.
6. Skeletons: a label chunk's first line is `; section <name>` (`.text` until a section directive
   says otherwise; Mach-O `__TEXT,__text`), then `, global` or `, weak` when it is; then the
   leading comment and directive lines; then the label and its count of instructions (statements
   that are neither labels nor directives) and of data directives (`.byte`, `.quad`, `.asciz`,
   NASM `db`, `resq`, ...): `memcpy:  ; 12 instructions`, `msg:  ; 2 data directives`. Plan 9
   and macro-style chunks show their `TEXT ...` / `ENTRY(f)` statement instead of `name:`. Macro
   chunks: leading lines + the `.macro` line + `  ; N lines`. Constant chunks: their text (at most
   `VALUE_SKELETON_LINES` lines).
7. `symbols_referenced`: identifiers in operands and directive arguments (call and jump targets,
   `$sym`, `sym@PLT`, `[rel sym]`, `=sym`, `:lo12:sym`), without mnemonics and directive names,
   registers (x86, ARM, AArch64, RISC-V, Plan 9 names), size and shift keywords, condition codes,
   numbers, strings, comments, section names, and `.cfi_*`/`.file`/`.loc`-style arguments.
8. Never raises on content. `errors`: invalid UTF-8 (decoded with U+FFFD replacements), an
   unterminated `/*` comment, a `.macro` without `.endm` (`line L, column C: ...`).

Here: the regions of rule 4 (`_Scanner`), the chunks and tags; reading the file into lines and
statements, and the vocabulary of its dialects, is `assembly_lines.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from pagedctx.host.code.assembly_lines import (
    ALIGN,
    ATTACHED,
    BLANK,
    CALL,
    CODE,
    COMMENT,
    GLOBALS,
    MACRO_ENDS,
    MACRO_OPS,
    MACRO_START,
    OPERAND,
    WEAKS,
    AssemblySource,
    Dialect,
    Line,
    Statement,
    clean,
    error_position,
    symbol_names,
    width,
)
from pagedctx.host.code.chunk import Chunk, ChunkKind, ParsedFile, chunk_id

__all__ = ["LANGUAGE", "VALUE_SKELETON_LINES", "chunk_file", "tags"]

LANGUAGE = "asm"
VALUE_SKELETON_LINES = 20
Role = Literal["definition", "reference"]


@dataclass(slots=True)
class _Contents:
    """What a chunk's statements define, mention and count as (rules 5-7)."""

    defined: set[str]
    referenced: set[str] = field(default_factory=set)
    instructions: int = 0
    data: int = 0


@dataclass(slots=True)
class _Region:
    """A chunk on its way: its head line, where it may end, what it is."""

    kind: ChunkKind
    name: str
    head: int  # line index of the label / TEXT / .macro line
    column: int  # column of the name in the head line (tags)
    head_text: str  # `name:`, `TEXT ·f(SB), $0`, `.macro m a, b`
    section: str = ".text"
    limit: int = -1  # exclusive line index where the chunk stops at the latest
    hard_end: bool = False  # `.size`, `.end`, `.endm`, ...: the line before `limit` is in it
    extra: list[str] = field(default_factory=list)  # other labels of the head line
    start_line: int = 0  # first line (leading comments and directives)
    end_line: int = 0  # last line


def chunk_file(path: str, source: bytes) -> ParsedFile:
    """The chunks of one assembly file; never raises on content."""
    parsed = _Parsed(path, source)
    return ParsedFile(
        path=path, language=LANGUAGE, chunks=tuple(parsed.chunks()), errors=tuple(parsed.errors)
    )


def tags(path: str, source: bytes) -> list[tuple[Role, str, str, int, int]]:
    """Definitions (each chunk's name) and references (operand identifiers; kind `call` after a call
    or jump mnemonic, else `symbol`) as (role, kind, name, 1-based line, start byte), in source order."""
    parsed = _Parsed(path, source)
    out: list[tuple[Role, str, str, int, int]] = []
    definitions = set()
    for region in parsed.regions:
        line = parsed.lines[region.head]
        start = line.start + width(line.text[: region.column])
        definitions.add(start)
        out.append(("definition", str(region.kind), region.name, region.head + 1, start))
    for index, line in enumerate(parsed.lines):
        for stmt in line.stmts:
            if stmt.op in parsed.macros:
                start = line.start + width(line.text[: stmt.op_column])
                out.append(("reference", "macro", stmt.op, index + 1, start))
            kind = "call" if CALL.fullmatch(stmt.op) else "symbol"
            for column, name in parsed.operands(stmt):
                start = line.start + width(line.text[:column])
                if start not in definitions:
                    out.append(("reference", kind, name, index + 1, start))
    return sorted(out, key=lambda tag: (tag[4], tag[0], tag[1], tag[2]))


class _Parsed(AssemblySource):
    """One file read into lines (rules 1-3) and chunk regions (rule 4)."""

    def __init__(self, path: str, source: bytes) -> None:
        super().__init__(path, source)
        self.globals: set[str] = set()
        self.weak: set[str] = set()
        self.regions = self._regions()
        self.macros = {region.name for region in self.regions if region.kind is ChunkKind.MACRO}
        self.errors.sort(key=error_position)

    # ---- rule 4: regions

    def _regions(self) -> list[_Region]:
        """Rule 4: the chunks' head lines and the lines they stop at, then their extents."""
        scanner = _Scanner(self)
        for index, line in enumerate(self.lines):
            scanner.line(index, line)
        regions = scanner.finish()
        self._extents(regions)
        return regions

    def _attached(self, line: Line, name: str) -> bool:
        """A line of directives about `name` (`.globl name`, `.type name,@function`) or alignment."""
        if line.kind != CODE:
            return line.kind == COMMENT
        for stmt in line.stmts:
            op = stmt.op.lower()
            if stmt.labels or not (op in ALIGN or (op in ATTACHED and name in symbol_names(stmt.args))):
                return False
        return True

    def _extents(self, regions: list[_Region]) -> None:
        """Rule 4: each chunk's first line (leading comments and directives directly above its head,
        never lines of the chunk before) and last line (its last line of code before the next
        chunk's first line or its own limit)."""
        floor = 0
        for region in regions:
            top = region.head
            while top > floor and self._attached(self.lines[top - 1], region.name):
                top -= 1
            region.start_line = top
            floor = region.limit if region.hard_end else region.head + 1
        for number, region in enumerate(regions):
            limit = region.limit
            if number + 1 < len(regions):
                limit = min(limit, regions[number + 1].start_line)
            region.end_line = region.head
            for index in range(region.head + 1, limit):
                if self.lines[index].kind == CODE:
                    region.end_line = index

    # ---- rules 5-7: chunks

    def chunks(self) -> Iterator[Chunk]:
        """Rules 5-7."""
        seen: dict[str, int] = {}
        for region in self.regions:
            first, last = self.lines[region.start_line], self.lines[region.end_line]
            start, end = first.start, last.start + len(self.data[last.start : last.end].rstrip())
            if end <= start:
                continue
            name = region.name
            seen[name] = occurrence = seen.get(name, 0) + 1
            contents = _Contents({name, *region.extra})
            for index in range(region.start_line, region.end_line + 1):
                for stmt in self.lines[index].stmts:
                    self._account(contents, name, stmt)
            yield Chunk(
                id=chunk_id(self.path, name, occurrence),
                path=self.path,
                language=LANGUAGE,
                kind=region.kind,
                name=name,
                qualname=name,
                section=region.section,
                skeleton=self._skeleton(region, contents.instructions, contents.data),
                body=self.data[start:end].decode("utf-8", "replace"),
                start_byte=start,
                end_byte=end,
                start_line=region.start_line + 1,
                end_line=region.end_line + 1,
                symbols_defined=tuple(sorted(contents.defined)),
                symbols_referenced=tuple(sorted(contents.referenced)),
            )

    def _account(self, contents: _Contents, name: str, stmt: Statement) -> None:
        """What one statement of the chunk `name` defines, mentions and counts as."""
        for label, _ in stmt.labels:
            if self.local(label) and not label[:1].isdigit():
                contents.defined.add(label)
                if self.dialect is Dialect.NASM and label.startswith("."):
                    contents.defined.add(f"{name}{label}")  # NASM's own name for a local label
        if (constant := self.constant(stmt)) is not None:
            contents.defined.add(constant)
        contents.referenced.update(operand for _, operand in self.operands(stmt))
        if stmt.op in self.macros:
            contents.referenced.add(stmt.op)  # a use of a macro this file defines
        if not stmt.op or self._structural(stmt):
            return
        if self._data(stmt):
            contents.data += 1
        elif not self._directive(stmt) and constant is None:
            contents.instructions += 1

    def _skeleton(self, region: _Region, instructions: int, data: int) -> str:
        """Rule 6."""
        lines = [
            clean(self.lines[index].text.rstrip()) for index in range(region.start_line, region.end_line + 1)
        ]
        if region.kind is ChunkKind.CONSTANT:
            if len(lines) > VALUE_SKELETON_LINES:
                lines = [*lines[: VALUE_SKELETON_LINES - 1], "..."]
            return "\n".join(lines)
        leading = lines[: region.head - region.start_line]
        if region.kind is ChunkKind.MACRO:
            count = region.end_line - region.head + 1
            return "\n".join(
                [*leading, f"{clean(region.head_text)}  ; {count} line{'s' if count != 1 else ''}"]
            )
        header = f"; section {region.section}"
        if region.name in self.globals:
            header += ", global"
        elif region.name in self.weak:
            header += ", weak"
        counts = []
        if instructions or not data:
            counts.append(f"{instructions} instruction{'s' if instructions != 1 else ''}")
        if data:
            counts.append(f"{data} data directive{'s' if data != 1 else ''}")
        return "\n".join([header, *leading, f"{clean(region.head_text)}  ; {', '.join(counts)}"])


class _Scanner:
    """Rule 4 in one pass over the lines: where chunks start and stop, the sections, the global and
    weak names."""

    def __init__(self, parsed: _Parsed) -> None:
        self.parsed = parsed
        self.regions: list[_Region] = []
        self.current: _Region | None = None
        self.section, self.stack, self.previous = ".text", [".text"], ".text"
        self.last_constant = -1  # line of the last definition of an open constant group

    def close(self, limit: int, hard: bool = False) -> None:
        if self.current is not None:
            self.current.limit, self.current.hard_end = limit, hard
            self.current = None

    def start(self, region: _Region) -> None:
        self.close(region.head)
        region.section = self.section
        self.regions.append(region)
        self.current = region

    def line(self, index: int, line: Line) -> None:
        current, parsed = self.current, self.parsed
        if current is not None and current.kind is ChunkKind.MACRO:
            if any(stmt.op.lower() in MACRO_ENDS for stmt in line.stmts):
                self.close(index + 1, hard=True)
            return
        if (
            current is not None
            and current.kind is ChunkKind.CONSTANT
            and (line.kind == BLANK or (line.kind == CODE and not parsed.defines(line)))
        ):
            self.close(self.last_constant + 1)
        for stmt in line.stmts:
            if self.statement(index, line, stmt):
                break

    def statement(self, index: int, line: Line, stmt: Statement) -> bool:
        """One statement; True when the rest of the line is a macro's body."""
        op = stmt.op.lower()
        if op == "endp" and stmt.labels:  # MASM-style `f ENDP`
            if self.current is not None and self.current.name == stmt.labels[0][0]:
                self.close(index + 1, hard=True)
            return False
        if op != "equ":
            self.labels(index, stmt, op)
        if op in MACRO_OPS:
            words = stmt.args.replace(",", " ").split()
            if words:
                column = stmt.args_column + stmt.args.find(words[0])
                self.start(_Region(ChunkKind.MACRO, clean(words[0]), index, column, stmt.raw))
            return bool(words)
        if self.opens(index, line, stmt) or self.moves(index, stmt, op):
            return False
        current = self.current
        if current is not None and current.kind is ChunkKind.LABEL and self.parsed.ends(stmt, current.name):
            self.close(index + 1, hard=True)
            return False
        defined = self.parsed.constant(stmt)
        if defined is not None and (current is None or current.kind is ChunkKind.CONSTANT):
            if current is None:
                column = line.text.find(defined, stmt.op_column if stmt.preprocessor else 0)
                self.start(_Region(ChunkKind.CONSTANT, defined, index, max(column, 0), stmt.raw))
            self.last_constant = index
        return False

    def labels(self, index: int, stmt: Statement, op: str) -> None:
        """A global label starts a chunk; more global labels on its line are its symbols."""
        for name, column in stmt.labels:
            if self.parsed.local(name):
                continue
            current = self.current
            if current is not None and current.head == index and current.kind is ChunkKind.LABEL:
                current.extra.append(name)
            else:
                head = stmt.raw if op == "proc" else f"{name}:"
                self.start(_Region(ChunkKind.LABEL, name, index, column, head))

    def opens(self, index: int, line: Line, stmt: Statement) -> bool:
        """`ENTRY(f)`-style macro lines, Plan 9 `TEXT` (a chunk) and `DATA`/`GLOBL` (an end)."""
        entry = MACRO_START.match(stmt.raw) if not stmt.labels else None
        if entry is not None:
            column = line.text.find(entry.group(2), stmt.op_column)
            self.start(_Region(ChunkKind.LABEL, entry.group(2), index, column, entry.group(1)))
            self.parsed.globals.add(entry.group(2))
            return True
        if self.parsed.dialect is not Dialect.PLAN9 or stmt.op not in ("TEXT", "DATA", "GLOBL"):
            return False
        symbol = OPERAND.search(stmt.args) if stmt.op == "TEXT" else None
        if symbol is None:
            self.close(index)  # DATA, GLOBL: data, not code
            return True
        raw = symbol.group(1)
        name = raw.lstrip("·").replace("·", ".") or raw
        if not stmt.args.startswith("<>", symbol.end()):
            self.parsed.globals.add(name)
        self.start(_Region(ChunkKind.LABEL, name, index, stmt.args_column + symbol.start(1), stmt.raw))
        return True

    def moves(self, index: int, stmt: Statement, op: str) -> bool:
        """A section change: the open chunk stops before this line. (`.globl`/`.weak` are noted.)"""
        if op in GLOBALS:
            self.parsed.globals.update(symbol_names(stmt.args))
            return False
        if op in WEAKS:
            self.parsed.weak.update(symbol_names(stmt.args))
            return False
        moved = self.parsed.section_of(stmt, self.section)
        if op == ".popsection":
            self.stack = self.stack[:-1] or [".text"]
            moved = self.stack[-1]
        elif op == ".previous":
            moved = self.previous
        elif op == ".pushsection" and moved is not None:
            self.stack.append(moved)
        if moved is None:
            return False
        self.close(index)
        if moved != self.section:
            self.previous, self.section = self.section, moved
        self.stack[-1] = self.section
        return True

    def finish(self) -> list[_Region]:
        current, parsed = self.current, self.parsed
        if current is not None:
            if current.kind is ChunkKind.MACRO:
                line_no, column = parsed.position(parsed.lines[current.head].start)
                opener = clean(current.head_text.split()[0])
                parsed.errors.append(f"line {line_no}, column {column}: {opener} without its end")
            constant = current.kind is ChunkKind.CONSTANT
            self.close(self.last_constant + 1 if constant else len(parsed.lines))
        return self.regions
