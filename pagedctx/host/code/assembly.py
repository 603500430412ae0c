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

Long for a reason: assembly has no tree-sitter grammar; this is the whole line-oriented chunker
for its dialects (GNU as, NASM, MASM, Plan 9) in one place.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from pagedctx.host.code.chunk import Chunk, ChunkKind, ParsedFile, chunk_id

__all__ = ["LANGUAGE", "VALUE_SKELETON_LINES", "Dialect", "chunk_file", "dialect_of", "tags"]

LANGUAGE = "asm"
VALUE_SKELETON_LINES = 20
Role = Literal["definition", "reference"]


class Dialect(enum.Enum):
    """The assembler syntax a file is read with (rule 1)."""

    GAS = "gas"
    MACHO = "macho"
    NASM = "nasm"
    PLAN9 = "plan9"


_BLANK, _COMMENT, _CODE = 0, 1, 2
_PLAN9_TEXT = re.compile(rb"^[ \t]*TEXT[ \t]+[^\s,]*\(SB\)", re.M)
_NASM_LINE = re.compile(
    rb"^[ \t]*(?:\[?(?:section|segment)[ \t]+\.?\w|(?:global|extern|bits|default)[ \t]+\w"
    rb"|%(?:define|macro|include|assign)\b)",
    re.M | re.I,
)
_MACHO = re.compile(rb"\.subsections_via_symbols|__TEXT,")
_PREPROCESSOR = re.compile(
    r"#\s*(?:include|include_next|define|undef|if|ifdef|ifndef|elif|else|endif|error|warning|pragma|line)\b"
)
_NAME = r"[A-Za-z_.$?][\w.$?@]*"
_NAME_RE = re.compile(_NAME)
_LABEL = re.compile(rf"\s*({_NAME}|\d+\$?|[\w.$·∕<>]+)\s*:(?!:)")
#: `EXT(f):`, `C_SYMBOL_NAME(f):`: a label spelled through a C preprocessor macro names `f`.
_WRAPPED = re.compile(rf"\s*[A-Za-z_]\w*\s*\(\s*({_NAME})\s*\)")
_WRAPPED_LABEL = re.compile(rf"{_WRAPPED.pattern}\s*:(?!:)")
_TOKEN = re.compile(r"\S+")
_ASSIGN = re.compile(rf"\s*({_NAME})\s*=(?!=)")
_MACRO_START = re.compile(
    rf"\s*((?:ENTRY|ENTRY_P2ALIGN|LEAF|NESTED|SYM_FUNC_START\w*|SYM_CODE_START\w*)\s*\(\s*({_NAME})[^)]*\))"
)
_MACRO_END = re.compile(rf"\s*(?:END|SYM_FUNC_END\w*|SYM_CODE_END\w*)\s*\(\s*({_NAME})")
_DEFINE = re.compile(rf"\s*(?:#\s*define|%(?:i?define|i?assign|xi?define))\s+({_NAME})")
#: Where a comment or a string may start (rule 2).
_GAS_SPECIAL = re.compile(r'["/#@;]')
_NASM_SPECIAL = re.compile(r"[\"'`;]")
_MODIFIER = re.compile(r":[A-Za-z_]\w*:")
_OPERAND = re.compile(r"(?<![\w.%@\\·∕])([A-Za-z_.·][\w.$·∕]*)")
_REGISTER = re.compile(
    r"""(?:
        [re]?(?:ax|bx|cx|dx|si|di|sp|bp|ip)|[abcd][lh]|(?:si|di|sp|bp)l|r(?:[89]|1[0-5])[dwb]?
        |[xyz]mm\d{1,2}|k[0-7]|st\d?|mm[0-7]|[cdefgs]s|cr\d{1,2}|dr\d|[er]?flags
        |[xwbhsdqvzp]\d{1,2}|[xw]zr|w?sp|lr|fp|pc|za|r\d{1,2}|sb|sl|ip|[cf]\d{1,2}
        |(?:apsr|cpsr|spsr)(?:_\w+)?|fpscr|fpexc|nzcv|fpcr|fpsr
        |zero|ra|gp|tp|t[0-6]|s1[01]|a[0-7]|f[tsa]\d{1,2}|x\d{1,2}|y\d{1,2}|rsp|zr|ctr
    )(?:\.\w+)?""",
    re.I | re.X,
)
_KEYWORDS = frozenset(
    {
        "byte", "word", "dword", "qword", "tword", "oword", "yword", "zword", "xmmword", "ymmword",
        "zmmword", "ptr", "offset", "rel", "abs", "short", "near", "far", "wrt", "seg", "strict",
        "flat", "lsl", "lsr", "asr", "ror", "rrx", "msl", "uxtb", "uxth", "uxtw", "uxtx", "sxtb",
        "sxth", "sxtw", "sxtx", "mul", "vl", "eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs",
        "vc", "hi", "ls", "ge", "lt", "gt", "le", "al", "nv", "nosplit", "noframe", "noprof",
        "dupok", "wrapper", "needctxt", "topframe", "rodata", "noptr", "tlsbss", "abiinternal",
    }
)  # fmt: skip
_PREFIXES = frozenset(
    {"rep", "repe", "repz", "repne", "repnz", "lock", "notrack", "bnd", "data16", "addr32", "xacquire"}
)
_CALL = re.compile(
    r"(?:call[lqw]?|jmp[lqw]?|j[a-z]{1,4}|jalr?|tail|b|bl|blr|br|bx|blx|cbn?z|tbn?z|bsr|bra|jsr"
    r"|bl?\.?(?:eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le|al)|b(?:eq|ne|lt|ge)zu?)",
    re.I,
)
_SECTIONS = frozenset(
    {
        ".text", ".data", ".bss", ".rodata", ".cstring", ".const", ".const_data", ".literal4",
        ".literal8", ".literal16", ".tdata", ".tbss",
    }
)  # fmt: skip
_NASM_SECTIONS = frozenset({"section", "segment", "[section", "[segment"})
_SIZE_ENDS = frozenset({".end", ".endfunc"})
_MACRO_OPS = frozenset({".macro", "%macro", "%imacro"})
_MACRO_ENDS = frozenset({".endm", ".endmacro", "%endmacro"})
_GLOBALS = frozenset({".globl", ".global", "global", "[global"})
_WEAKS = frozenset({".weak", ".weak_definition"})
_ATTACHED = frozenset(
    {".globl", ".global", ".type", ".size", ".hidden", ".weak", ".protected", ".internal", ".local",
     ".ent", ".func", ".def", ".private_extern", ".weak_definition", "global", "[global"}
)  # fmt: skip
_ALIGN = frozenset({".align", ".p2align", ".balign", ".p2alignw", ".p2alignl", ".even", "align", "alignb"})
_EQUATES = frozenset({".equ", ".set", ".equiv", ".eqv"})
_NO_OPERANDS = frozenset(
    {
        ".section", ".pushsection", ".file", ".ident", ".loc", ".arch", ".cpu", ".fpu", ".syntax",
        ".code16", ".code32", ".code64", ".intel_syntax", ".att_syntax", ".arch_extension",
        ".eabi_attribute", ".build_version", ".macosx_version_min", ".addrsig", ".option",
        ".attribute", ".ascii", ".asciz", ".string", ".include", "section", "segment", "[section",
        "bits", "[bits", "default", "cpu", "%include", "#include",
    }
)  # fmt: skip
_GAS_DATA = frozenset(
    {
        ".byte", ".2byte", ".4byte", ".8byte", ".short", ".hword", ".word", ".int", ".long", ".quad",
        ".octa", ".ascii", ".asciz", ".string", ".string8", ".string16", ".zero", ".space", ".skip",
        ".fill", ".float", ".single", ".double", ".uleb128", ".sleb128", ".dc", ".dc.b", ".dc.w",
        ".dc.l", ".dc.a", ".ds", ".incbin",
    }
)  # fmt: skip
_NASM_DATA = frozenset(
    {
        "db", "dw", "dd", "dq", "dt", "do", "dy", "dz", "resb", "resw", "resd", "resq", "rest", "reso",
        "resy", "resz", "incbin", "times", "istruc",
    }
)  # fmt: skip
#: NASM words after which a colon-less first word is a label: `msg db "hi"`, `N equ 4`, `f proc`.
_NASM_NAMED = _NASM_DATA | {"equ", "proc", "endp"}
_PLAN9_DATA = frozenset({"BYTE", "WORD", "LONG", "QUAD"})
_PLAN9_DIRECTIVES = frozenset({"TEXT", "DATA", "GLOBL", "PCDATA", "FUNCDATA"})
_NASM_DIRECTIVES = frozenset(
    {
        "section", "segment", "global", "extern", "common", "bits", "default", "align", "alignb", "org",
        "cpu", "struc", "endstruc", "iend", "at", "absolute", "static", "[section", "[segment",
        "[bits", "[global", "[extern", "[default", "equ",
    }
)  # fmt: skip


@dataclass(slots=True)
class _Stmt:
    """One statement of a line: its labels, its operation and operands (columns in the line)."""

    labels: list[tuple[str, int]]
    op: str
    op_column: int
    args: str  # comments and strings blanked
    args_column: int
    raw: str  # the statement's own text, strings kept
    preprocessor: bool = False


@dataclass(slots=True)
class _Line:
    start: int  # byte offset of the line
    end: int  # byte offset of its line break (or of the end of the file)
    text: str
    kind: int = _BLANK
    stmts: list[_Stmt] = field(default_factory=list)


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


def dialect_of(path: str, source: bytes) -> Dialect:
    """Rule 1."""
    if _PLAN9_TEXT.search(source):
        return Dialect.PLAN9
    if path.lower().endswith(".asm") or _NASM_LINE.search(source):
        return Dialect.NASM
    if _MACHO.search(source):
        return Dialect.MACHO
    return Dialect.GAS


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
        start = line.start + _width(line.text[: region.column])
        definitions.add(start)
        out.append(("definition", str(region.kind), region.name, region.head + 1, start))
    for index, line in enumerate(parsed.lines):
        for stmt in line.stmts:
            if stmt.op in parsed.macros:
                start = line.start + _width(line.text[: stmt.op_column])
                out.append(("reference", "macro", stmt.op, index + 1, start))
            kind = "call" if _CALL.fullmatch(stmt.op) else "symbol"
            for column, name in parsed.operands(stmt):
                start = line.start + _width(line.text[:column])
                if start not in definitions:
                    out.append(("reference", kind, name, index + 1, start))
    return sorted(out, key=lambda tag: (tag[4], tag[0], tag[1], tag[2]))


class _Parsed:
    """One file read into lines (rules 1-3) and chunk regions (rule 4)."""

    def __init__(self, path: str, source: bytes) -> None:
        self.path = path
        self.data = source
        self.errors: list[str] = []
        try:
            source.decode("utf-8")
        except UnicodeDecodeError as exc:
            line, column = self.position(exc.start)
            self.errors.append(
                f"line {line}, column {column}: invalid UTF-8, decoded with U+FFFD replacements"
            )
        self.dialect = dialect_of(path, source)
        self.lines = list(self._lines())
        self.globals: set[str] = set()
        self.weak: set[str] = set()
        self.regions = self._regions()
        self.macros = {region.name for region in self.regions if region.kind is ChunkKind.MACRO}
        self.errors.sort(key=_position)

    def position(self, offset: int) -> tuple[int, int]:
        line_start = self.data.rfind(b"\n", 0, offset) + 1
        column = len(self.data[line_start:offset].decode("utf-8", "replace")) + 1
        return self.data.count(b"\n", 0, offset) + 1, column

    # ---- rules 1-3: lines and statements

    def _lines(self) -> Iterator[_Line]:
        data, nasm = self.data, self.dialect is Dialect.NASM
        in_block = continued = False
        block_start = 0
        start = 0
        while start <= len(data):
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            text = data[start:end].decode("utf-8", "surrogateescape").rstrip("\r")
            line = _Line(start, end, text)
            stripped = text.lstrip()
            if not in_block and (continued or (not nasm and _PREPROCESSOR.match(stripped))):
                line.kind = _CODE
                line.stmts.append(self._preprocessor(text))
                continued = text.endswith("\\")
            elif not in_block and stripped.startswith("%") and not _is_macro_line(stripped):
                line.kind = _CODE
                line.stmts.append(self._preprocessor(text))
            else:
                was_in_block = in_block
                code, in_block, opened = self._blank_comments(text, in_block)
                if in_block and not was_in_block:
                    block_start = start + _width(text[:opened])
                if code.strip():
                    line.kind = _CODE
                    line.stmts.extend(self._statements(code, text))
                elif stripped:
                    line.kind = _COMMENT
            yield line
            start = end + 1
        if in_block:
            line_no, column = self.position(block_start)
            self.errors.append(f"line {line_no}, column {column}: unterminated /* comment")

    def _preprocessor(self, text: str) -> _Stmt:
        column = len(text) - len(text.lstrip())
        op = _TOKEN.match(text, column)
        word = op.group(0) if op else ""
        return _Stmt([], word, column, " " * len(text), len(text), text.strip(), preprocessor=True)

    def _blank_comments(self, text: str, in_block: bool) -> tuple[str, bool, int]:
        """`text` with comments and string contents as spaces (same columns), whether a `/*`
        comment is still open at its end, and the column of the last `/*` (rule 2)."""
        out = list(text)
        n = len(text)
        first = n - len(text.lstrip())
        dialect = self.dialect
        nasm = dialect is Dialect.NASM
        i = opened = 0

        def blank(a: int, b: int) -> None:
            out[a:b] = " " * (b - a)

        special = _NASM_SPECIAL if nasm else _GAS_SPECIAL
        while i < n:
            if in_block:
                close = text.find("*/", i)
                if close < 0:
                    blank(i, n)
                    break
                blank(i, close + 2)
                i, in_block = close + 2, False
                continue
            found = special.search(text, i)
            if found is None:
                break
            i = found.start()
            char = text[i]
            if char == '"' or (nasm and char in "'`"):
                j = i + 1
                while j < n and text[j] != char:
                    j += 2 if text[j] == "\\" and char != "'" else 1
                blank(i + 1, min(j, n))
                i = j + 1
                continue
            if nasm:
                if char == ";":
                    blank(i, n)
                    break
            elif text.startswith("/*", i):
                in_block, opened = True, i
                blank(i, i + 2)
                i += 2
                continue
            elif (
                text.startswith("//", i)
                or (char == ";" and dialect is Dialect.MACHO)
                or (char in "#@" and (i == first or i + 1 == n or text[i + 1].isspace()))
            ):
                blank(i, n)
                break
            i += 1
        return "".join(out), in_block, opened

    def _statements(self, code: str, text: str) -> Iterator[_Stmt]:
        separated = self.dialect in (Dialect.GAS, Dialect.PLAN9)
        begin = 0
        while begin <= len(code):
            stop = code.find(";", begin) if separated else -1
            stop = len(code) if stop < 0 else stop
            if code[begin:stop].strip():
                yield self._statement(code, text, begin, stop)
            begin = stop + 1

    def _statement(self, code: str, text: str, begin: int, stop: int) -> _Stmt:
        labels = []
        at = begin
        while (label := _LABEL.match(code, at, stop) or _WRAPPED_LABEL.match(code, at, stop)) is not None:
            labels.append((label.group(1), label.start(1)))
            at = label.end()
        token = _TOKEN.search(code, at, stop)
        if token is None:
            return _Stmt(labels, "", stop, "", stop, text[begin:stop].strip())
        op, op_column = token.group(0), token.start()
        if self.dialect is Dialect.NASM and not labels:  # `msg db "hi"`, `N equ 4`, `f proc`
            following = _TOKEN.search(code, token.end(), stop)
            if following is not None and following.group(0).lower() in _NASM_NAMED and _NAME_RE.fullmatch(op):
                labels.append((op, op_column))
                op, op_column = following.group(0), following.start()
        args_column = op_column + len(op)
        return _Stmt(labels, op, op_column, code[args_column:stop], args_column, text[begin:stop].strip())

    # ---- rule 4: regions

    def _directive(self, stmt: _Stmt) -> bool:
        op = stmt.op
        if stmt.preprocessor or op.startswith((".", "%", "#")):
            return True
        if self.dialect is Dialect.NASM:
            return op.lower() in _NASM_DIRECTIVES
        return self.dialect is Dialect.PLAN9 and op in _PLAN9_DIRECTIVES

    def _data(self, stmt: _Stmt) -> bool:
        op = stmt.op
        return (
            op.lower() in _GAS_DATA
            or (self.dialect is Dialect.NASM and op.lower() in _NASM_DATA)
            or (self.dialect is Dialect.PLAN9 and op in _PLAN9_DATA)
        )

    def local(self, name: str) -> bool:
        if name[:1].isdigit() or self.dialect is Dialect.PLAN9:
            return True
        if self.dialect is Dialect.NASM:
            return name.startswith(".") and name != "..start"
        if self.dialect is Dialect.MACHO and name.startswith(("L", "l")):
            return True
        return name.startswith(".L")

    def _first_arg(self, stmt: _Stmt) -> str:
        return stmt.args.split(",", 1)[0].strip()

    def section_of(self, stmt: _Stmt, current: str) -> str | None:
        """The section a statement switches to, or None if it does not (`.popsection` and
        `.previous` are resolved by the caller)."""
        op = stmt.op.lower()
        if op in _SECTIONS:
            return op
        if op in (".section", ".pushsection") or (self.dialect is Dialect.NASM and op in _NASM_SECTIONS):
            args = stmt.raw[len(stmt.op) :] if stmt.raw.startswith(stmt.op) else stmt.args
            parts = [part.strip().strip('"') for part in args.strip().rstrip("]").split(",")]
            name = parts[0].split()[0] if parts[0].split() else current
            if name.startswith("__") and len(parts) > 1:  # Mach-O `__TEXT,__text`
                name = f"{name},{parts[1].split()[0] if parts[1].split() else ''}"
            return _clean(name)
        return None

    def _regions(self) -> list[_Region]:
        """Rule 4: the chunks' head lines and the lines they stop at, then their extents."""
        scanner = _Scanner(self)
        for index, line in enumerate(self.lines):
            scanner.line(index, line)
        regions = scanner.finish()
        self._extents(regions)
        return regions

    def ends(self, stmt: _Stmt, name: str) -> bool:
        """`.size name, ...`, `.end`, `END(name)`: the last line of the chunk `name`."""
        op = stmt.op.lower()
        if (op == ".size" and self._first_arg(stmt) == name) or op in _SIZE_ENDS:
            return True
        end = _MACRO_END.match(stmt.raw)
        return end is not None and end.group(1) == name

    def _structural(self, stmt: _Stmt) -> bool:
        """A statement that opens or closes a chunk without being code: `ENTRY(f)`, `END(f)`,
        `f PROC`, `f ENDP`."""
        return (
            stmt.op.lower() in ("proc", "endp")
            or _MACRO_START.match(stmt.raw) is not None
            or _MACRO_END.match(stmt.raw) is not None
        )

    def defines(self, line: _Line) -> bool:
        return all(self.constant(stmt) is not None for stmt in line.stmts)

    def constant(self, stmt: _Stmt) -> str | None:
        """The symbol a statement defines with `.equ`/`.set`/`=`/`equ`/`#define`, or None."""
        op = stmt.op.lower()
        if op in _EQUATES:
            name = self._first_arg(stmt)
            return name if _NAME_RE.fullmatch(name) else None
        if op == "equ" and stmt.labels:
            return stmt.labels[-1][0]
        if stmt.preprocessor or op.startswith("%"):
            define = _DEFINE.match(stmt.raw)
            return define.group(1) if define else None
        assign = _ASSIGN.match(stmt.raw)
        return assign.group(1) if assign is not None and not stmt.labels else None

    def _attached(self, line: _Line, name: str) -> bool:
        """A line of directives about `name` (`.globl name`, `.type name,@function`) or alignment."""
        if line.kind != _CODE:
            return line.kind == _COMMENT
        for stmt in line.stmts:
            op = stmt.op.lower()
            if stmt.labels or not (op in _ALIGN or (op in _ATTACHED and name in _names(stmt.args))):
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
                if self.lines[index].kind == _CODE:
                    region.end_line = index

    # ---- rules 5-7: chunks

    def operands(self, stmt: _Stmt) -> Iterator[tuple[int, str]]:
        """Rule 7: (column, name) of each identifier among a statement's operands."""
        op = stmt.op.lower()
        if stmt.preprocessor or op in _NO_OPERANDS or op.startswith(".cfi_"):
            return
        args = _MODIFIER.sub(lambda m: " " * len(m.group(0)), stmt.args)
        skip_first = op in _PREFIXES
        for match in _OPERAND.finditer(args):
            name = match.group(1)
            if skip_first:
                skip_first = False
                continue
            if (
                not name.strip(".")
                or name.startswith("..")
                or name.lower() in _KEYWORDS
                or _REGISTER.fullmatch(name)
            ):
                continue  # `..plt`, `..start`: NASM's special symbols; `.` alone: here
            if name == "g" and self.dialect is Dialect.PLAN9:
                continue  # Go's goroutine register
            if self.dialect is Dialect.PLAN9 and "·" in name:  # as TEXT names it: `runtime.memmove`
                name = name.lstrip("·").replace("·", ".") or name
            yield stmt.args_column + match.start(1), name

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

    def _account(self, contents: _Contents, name: str, stmt: _Stmt) -> None:
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
            _clean(self.lines[index].text.rstrip()) for index in range(region.start_line, region.end_line + 1)
        ]
        if region.kind is ChunkKind.CONSTANT:
            if len(lines) > VALUE_SKELETON_LINES:
                lines = [*lines[: VALUE_SKELETON_LINES - 1], "..."]
            return "\n".join(lines)
        leading = lines[: region.head - region.start_line]
        if region.kind is ChunkKind.MACRO:
            count = region.end_line - region.head + 1
            return "\n".join(
                [*leading, f"{_clean(region.head_text)}  ; {count} line{'s' if count != 1 else ''}"]
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
        return "\n".join([header, *leading, f"{_clean(region.head_text)}  ; {', '.join(counts)}"])


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

    def line(self, index: int, line: _Line) -> None:
        current, parsed = self.current, self.parsed
        if current is not None and current.kind is ChunkKind.MACRO:
            if any(stmt.op.lower() in _MACRO_ENDS for stmt in line.stmts):
                self.close(index + 1, hard=True)
            return
        if (
            current is not None
            and current.kind is ChunkKind.CONSTANT
            and (line.kind == _BLANK or (line.kind == _CODE and not parsed.defines(line)))
        ):
            self.close(self.last_constant + 1)
        for stmt in line.stmts:
            if self.statement(index, line, stmt):
                break

    def statement(self, index: int, line: _Line, stmt: _Stmt) -> bool:
        """One statement; True when the rest of the line is a macro's body."""
        op = stmt.op.lower()
        if op == "endp" and stmt.labels:  # MASM-style `f ENDP`
            if self.current is not None and self.current.name == stmt.labels[0][0]:
                self.close(index + 1, hard=True)
            return False
        if op != "equ":
            self.labels(index, stmt, op)
        if op in _MACRO_OPS:
            words = stmt.args.replace(",", " ").split()
            if words:
                column = stmt.args_column + stmt.args.find(words[0])
                self.start(_Region(ChunkKind.MACRO, _clean(words[0]), index, column, stmt.raw))
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

    def labels(self, index: int, stmt: _Stmt, op: str) -> None:
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

    def opens(self, index: int, line: _Line, stmt: _Stmt) -> bool:
        """`ENTRY(f)`-style macro lines, Plan 9 `TEXT` (a chunk) and `DATA`/`GLOBL` (an end)."""
        entry = _MACRO_START.match(stmt.raw) if not stmt.labels else None
        if entry is not None:
            column = line.text.find(entry.group(2), stmt.op_column)
            self.start(_Region(ChunkKind.LABEL, entry.group(2), index, column, entry.group(1)))
            self.parsed.globals.add(entry.group(2))
            return True
        if self.parsed.dialect is not Dialect.PLAN9 or stmt.op not in ("TEXT", "DATA", "GLOBL"):
            return False
        symbol = _OPERAND.search(stmt.args) if stmt.op == "TEXT" else None
        if symbol is None:
            self.close(index)  # DATA, GLOBL: data, not code
            return True
        raw = symbol.group(1)
        name = raw.lstrip("·").replace("·", ".") or raw
        if not stmt.args.startswith("<>", symbol.end()):
            self.parsed.globals.add(name)
        self.start(_Region(ChunkKind.LABEL, name, index, stmt.args_column + symbol.start(1), stmt.raw))
        return True

    def moves(self, index: int, stmt: _Stmt, op: str) -> bool:
        """A section change: the open chunk stops before this line. (`.globl`/`.weak` are noted.)"""
        if op in _GLOBALS:
            self.parsed.globals.update(_names(stmt.args))
            return False
        if op in _WEAKS:
            self.parsed.weak.update(_names(stmt.args))
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
                opener = _clean(current.head_text.split()[0])
                parsed.errors.append(f"line {line_no}, column {column}: {opener} without its end")
            constant = current.kind is ChunkKind.CONSTANT
            self.close(self.last_constant + 1 if constant else len(parsed.lines))
        return self.regions


def _position(error: str) -> tuple[int, int]:
    """Errors in file order (`line L, column C: ...`)."""
    found = re.match(r"line (\d+), column (\d+)", error)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def _width(text: str) -> int:
    """The byte length of line text (decoded with surrogateescape: one character per bad byte)."""
    return len(text.encode("utf-8", "surrogateescape"))


def _clean(text: str) -> str:
    """Line text for output: an undecodable byte is U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _is_macro_line(stripped: str) -> bool:
    word = stripped.split(None, 1)[0].lower() if stripped else ""
    return word in ("%macro", "%imacro", "%endmacro")


def _names(args: str) -> list[str]:
    """The symbol names of a `.globl a, b` / `global f:function` argument list."""
    out = []
    for part in args.replace("]", " ").split(","):
        wrapped = _WRAPPED.match(part)
        words = [wrapped.group(1)] if wrapped else part.split()
        if words:
            out.append(words[0].split(":", 1)[0])
    return out
