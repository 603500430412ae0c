"""Assembly source read as the assembly chunker reads it (`assembly.py` rules 1-3 and 7).

The dialect of a file (`dialect_of`), the vocabulary of GNU as, NASM, Mach-O and Plan 9 syntax
(directives, data directives, section names, registers, keywords), and `AssemblySource`: a file's
lines, each with its kind (blank, comment, code) and statements (labels, operation, operands with
comments and strings blanked), and what a statement is: a directive, data, a section change, a
constant's definition, the end of a chunk, a local label, its operand identifiers.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = [
    "ALIGN", "ATTACHED", "BLANK", "CALL", "CODE", "COMMENT", "GLOBALS", "MACRO_ENDS", "MACRO_OPS",
    "MACRO_START", "OPERAND", "WEAKS", "AssemblySource", "Dialect", "Line", "Statement", "clean",
    "dialect_of", "error_position", "symbol_names", "width",
]  # fmt: skip


class Dialect(enum.Enum):
    """The assembler syntax a file is read with (rule 1)."""

    GAS = "gas"
    MACHO = "macho"
    NASM = "nasm"
    PLAN9 = "plan9"


BLANK, COMMENT, CODE = 0, 1, 2
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
MACRO_START = re.compile(
    rf"\s*((?:ENTRY|ENTRY_P2ALIGN|LEAF|NESTED|SYM_FUNC_START\w*|SYM_CODE_START\w*)\s*\(\s*({_NAME})[^)]*\))"
)
_MACRO_END = re.compile(rf"\s*(?:END|SYM_FUNC_END\w*|SYM_CODE_END\w*)\s*\(\s*({_NAME})")
_DEFINE = re.compile(rf"\s*(?:#\s*define|%(?:i?define|i?assign|xi?define))\s+({_NAME})")
#: Where a comment or a string may start (rule 2).
_GAS_SPECIAL = re.compile(r'["/#@;]')
_NASM_SPECIAL = re.compile(r"[\"'`;]")
_MODIFIER = re.compile(r":[A-Za-z_]\w*:")
OPERAND = re.compile(r"(?<![\w.%@\\·∕])([A-Za-z_.·][\w.$·∕]*)")
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
CALL = re.compile(
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
MACRO_OPS = frozenset({".macro", "%macro", "%imacro"})
MACRO_ENDS = frozenset({".endm", ".endmacro", "%endmacro"})
GLOBALS = frozenset({".globl", ".global", "global", "[global"})
WEAKS = frozenset({".weak", ".weak_definition"})
ATTACHED = frozenset(
    {".globl", ".global", ".type", ".size", ".hidden", ".weak", ".protected", ".internal", ".local",
     ".ent", ".func", ".def", ".private_extern", ".weak_definition", "global", "[global"}
)  # fmt: skip
ALIGN = frozenset({".align", ".p2align", ".balign", ".p2alignw", ".p2alignl", ".even", "align", "alignb"})
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
class Statement:
    """One statement of a line: its labels, its operation and operands (columns in the line)."""

    labels: list[tuple[str, int]]
    op: str
    op_column: int
    args: str  # comments and strings blanked
    args_column: int
    raw: str  # the statement's own text, strings kept
    preprocessor: bool = False


@dataclass(slots=True)
class Line:
    start: int  # byte offset of the line
    end: int  # byte offset of its line break (or of the end of the file)
    text: str
    kind: int = BLANK
    stmts: list[Statement] = field(default_factory=list)


def dialect_of(path: str, source: bytes) -> Dialect:
    """Rule 1."""
    if _PLAN9_TEXT.search(source):
        return Dialect.PLAN9
    if path.lower().endswith(".asm") or _NASM_LINE.search(source):
        return Dialect.NASM
    if _MACHO.search(source):
        return Dialect.MACHO
    return Dialect.GAS


class AssemblySource:
    """One file read into lines and statements (rules 1-3), and what each statement is."""

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

    def position(self, offset: int) -> tuple[int, int]:
        line_start = self.data.rfind(b"\n", 0, offset) + 1
        column = len(self.data[line_start:offset].decode("utf-8", "replace")) + 1
        return self.data.count(b"\n", 0, offset) + 1, column

    # ---- rules 1-3: lines and statements

    def _lines(self) -> Iterator[Line]:
        data, nasm = self.data, self.dialect is Dialect.NASM
        in_block = continued = False
        block_start = 0
        start = 0
        while start <= len(data):
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            text = data[start:end].decode("utf-8", "surrogateescape").rstrip("\r")
            line = Line(start, end, text)
            stripped = text.lstrip()
            if not in_block and (continued or (not nasm and _PREPROCESSOR.match(stripped))):
                line.kind = CODE
                line.stmts.append(self._preprocessor(text))
                continued = text.endswith("\\")
            elif not in_block and stripped.startswith("%") and not _is_macro_line(stripped):
                line.kind = CODE
                line.stmts.append(self._preprocessor(text))
            else:
                was_in_block = in_block
                code, in_block, opened = self._blank_comments(text, in_block)
                if in_block and not was_in_block:
                    block_start = start + width(text[:opened])
                if code.strip():
                    line.kind = CODE
                    line.stmts.extend(self._statements(code, text))
                elif stripped:
                    line.kind = COMMENT
            yield line
            start = end + 1
        if in_block:
            line_no, column = self.position(block_start)
            self.errors.append(f"line {line_no}, column {column}: unterminated /* comment")

    def _preprocessor(self, text: str) -> Statement:
        column = len(text) - len(text.lstrip())
        op = _TOKEN.match(text, column)
        word = op.group(0) if op else ""
        return Statement([], word, column, " " * len(text), len(text), text.strip(), preprocessor=True)

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

    def _statements(self, code: str, text: str) -> Iterator[Statement]:
        separated = self.dialect in (Dialect.GAS, Dialect.PLAN9)
        begin = 0
        while begin <= len(code):
            stop = code.find(";", begin) if separated else -1
            stop = len(code) if stop < 0 else stop
            if code[begin:stop].strip():
                yield self._statement(code, text, begin, stop)
            begin = stop + 1

    def _statement(self, code: str, text: str, begin: int, stop: int) -> Statement:
        labels = []
        at = begin
        while (label := _LABEL.match(code, at, stop) or _WRAPPED_LABEL.match(code, at, stop)) is not None:
            labels.append((label.group(1), label.start(1)))
            at = label.end()
        token = _TOKEN.search(code, at, stop)
        if token is None:
            return Statement(labels, "", stop, "", stop, text[begin:stop].strip())
        op, op_column = token.group(0), token.start()
        if self.dialect is Dialect.NASM and not labels:  # `msg db "hi"`, `N equ 4`, `f proc`
            following = _TOKEN.search(code, token.end(), stop)
            if following is not None and following.group(0).lower() in _NASM_NAMED and _NAME_RE.fullmatch(op):
                labels.append((op, op_column))
                op, op_column = following.group(0), following.start()
        args_column = op_column + len(op)
        return Statement(labels, op, op_column, code[args_column:stop], args_column, text[begin:stop].strip())

    def _directive(self, stmt: Statement) -> bool:
        op = stmt.op
        if stmt.preprocessor or op.startswith((".", "%", "#")):
            return True
        if self.dialect is Dialect.NASM:
            return op.lower() in _NASM_DIRECTIVES
        return self.dialect is Dialect.PLAN9 and op in _PLAN9_DIRECTIVES

    def _data(self, stmt: Statement) -> bool:
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

    def _first_arg(self, stmt: Statement) -> str:
        return stmt.args.split(",", 1)[0].strip()

    def section_of(self, stmt: Statement, current: str) -> str | None:
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
            return clean(name)
        return None

    def ends(self, stmt: Statement, name: str) -> bool:
        """`.size name, ...`, `.end`, `END(name)`: the last line of the chunk `name`."""
        op = stmt.op.lower()
        if (op == ".size" and self._first_arg(stmt) == name) or op in _SIZE_ENDS:
            return True
        end = _MACRO_END.match(stmt.raw)
        return end is not None and end.group(1) == name

    def _structural(self, stmt: Statement) -> bool:
        """A statement that opens or closes a chunk without being code: `ENTRY(f)`, `END(f)`,
        `f PROC`, `f ENDP`."""
        return (
            stmt.op.lower() in ("proc", "endp")
            or MACRO_START.match(stmt.raw) is not None
            or _MACRO_END.match(stmt.raw) is not None
        )

    def defines(self, line: Line) -> bool:
        return all(self.constant(stmt) is not None for stmt in line.stmts)

    def constant(self, stmt: Statement) -> str | None:
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

    def operands(self, stmt: Statement) -> Iterator[tuple[int, str]]:
        """Rule 7: (column, name) of each identifier among a statement's operands."""
        op = stmt.op.lower()
        if stmt.preprocessor or op in _NO_OPERANDS or op.startswith(".cfi_"):
            return
        args = _MODIFIER.sub(lambda m: " " * len(m.group(0)), stmt.args)
        skip_first = op in _PREFIXES
        for match in OPERAND.finditer(args):
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


def error_position(error: str) -> tuple[int, int]:
    """Errors in file order (`line L, column C: ...`)."""
    found = re.match(r"line (\d+), column (\d+)", error)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def width(text: str) -> int:
    """The byte length of line text (decoded with surrogateescape: one character per bad byte)."""
    return len(text.encode("utf-8", "surrogateescape"))


def clean(text: str) -> str:
    """Line text for output: an undecodable byte is U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _is_macro_line(stripped: str) -> bool:
    word = stripped.split(None, 1)[0].lower() if stripped else ""
    return word in ("%macro", "%imacro", "%endmacro")


def symbol_names(args: str) -> list[str]:
    """The symbol names of a `.globl a, b` / `global f:function` argument list."""
    out = []
    for part in args.replace("]", " ").split(","):
        wrapped = _WRAPPED.match(part)
        words = [wrapped.group(1)] if wrapped else part.split()
        if words:
            out.append(words[0].split(":", 1)[0])
    return out
