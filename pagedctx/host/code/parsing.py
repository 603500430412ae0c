"""A file's tree-sitter parse in time linear in its size (S1, S2).

tree-sitter-python's external scanner decides at each line break inside an indented block whether
a NEWLINE, INDENT or DEDENT comes next, and to know the indentation of the next line of code it
reads ahead past every comment line that follows. Comments are extras, so the parser calls the
scanner again at the end of each comment line, and it reads the rest of the run again: a run of k
comment lines costs k readings of the run (20,000 lines in a function body, 1.2 MB: 114 s). A
grammar with such a scanner names its line comment opener in `LanguageSpec.comment_runs`; `parse`
hands it every run of at least `RUN_LINES` comment lines, each indented like the first or more
(blank lines between allowed), as one comment: the parser's included ranges leave out the bytes
from the run's first line's end to its last line's opener, so the run is one comment token from
its first opener to its last line's end, read once. `Parsed.comments` gives back the run's
comments line by line.

Why the tree is otherwise the plain parse's: the bytes before and after a run are the same, and so
is what the scanner finds reading ahead from the line break before the run (the indentation of the
run's first line, then the next line of code). In the plain parse the scanner's calls at the line
breaks inside the run find the same next line of code, with the parser in the state it had when
the last call before the run gave nothing (a comment does not move the parser); only the comment
line's indentation differs, and it matters in one way: a DEDENT goes through only if the comment
is indented less than the block. A line indented at least as much as the first lets through none
that the first held back, so these calls give nothing either. What that needs is checked: a run's
first line neither starts the file nor follows a line ending with a backslash (the call before the
run starts at a line break; else the run starts at its second line), no line holds a NUL (which
stops the scanner's reading), and each run comes out of the parse as exactly one comment node (not
inside a string, say): runs that do not are parsed as they are, by another parse without them.

The argument also needs a parse without error recovery (which tries tokens in other parser
states): a file with syntax errors gets the plain parse unless that would cost more than `_BUDGET`
readings of each byte in its runs. Only then, in a broken file with long comment runs, can the
trees differ (in mutated real files with syntax errors, 4-9% of those with such runs differed
somewhere when parsed this way); its chunks still follow every chunker rule, and the parse stays
linear. Without errors, trees, chunks and tags equal a plain parse's on ~7,500 real and mutated
Python files (~4,900 with runs parsed this way, runs from 2 lines and from 16).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import tree_sitter as ts

from pagedctx.host.code.grammars import CompiledLanguage

__all__ = ["RUN_LINES", "Parsed", "parse"]

#: Runs shorter than this are parsed as they are: their cost stays under RUN_LINES readings of
#: each byte, and most files never take the other path.
RUN_LINES = 16
#: Rounds of re-parsing without the runs that did not come out as one comment, before giving up.
_ROUNDS = 3
#: A file with syntax errors gets the plain parse while the runs cost it at most this many readings
#: of each of the file's bytes (the sum of each run's lines times its bytes).
_BUDGET = 64
_Span = tuple[int, int]


class Parsed(NamedTuple):
    """A parse: the tree, and the runs of comment lines it holds as one comment each."""

    tree: ts.Tree
    runs: tuple[_Span, ...] = ()
    """The comment runs parsed as one comment each: (first line's opener, last line's end)."""
    lines: re.Pattern[bytes] | None = None
    """The comment of a run's line (group 1)."""
    source: bytes = b""

    def comments(self, nodes: list[ts.Node]) -> list[_Span]:
        """The (start, end) bytes of comment `nodes`, each run's one node split back into its
        lines' comments (what a plain parse gives)."""
        spans = [(node.start_byte, node.end_byte) for node in nodes]
        if not self.runs or self.lines is None:
            return spans
        runs, data = frozenset(self.runs), self.source
        out: list[_Span] = []
        for span in spans:
            if span in runs:
                line = data.rfind(b"\n", 0, span[0]) + 1
                out.extend(match.span(1) for match in self.lines.finditer(data, line, span[1]))
            else:
                out.append(span)
        return out


def parse(lang: CompiledLanguage, source: bytes) -> Parsed:
    """The tree of `source`, long runs of comment lines given to the parser as one comment each
    (module doc)."""
    parser = lang.parser()
    opener = lang.spec.comment_runs.encode()
    runs = _runs(source, opener, RUN_LINES) if opener and opener in source else []
    for _ in range(_ROUNDS):
        if not runs:
            break
        parser.included_ranges = _ranges(source, runs)
        tree = parser.parse(source)
        root = tree.root_node
        whole = [run for run in runs if _one_comment(root, run.span)]
        if len(whole) < len(runs):
            runs = whole  # some run is not one comment (it lies in a string): parse it as it is
            continue
        if root.has_error and sum(run.cost for run in runs) <= _BUDGET * len(source):
            break  # error recovery may differ: the plain parse, while it costs little
        return Parsed(tree, tuple(run.span for run in runs), _patterns(opener, RUN_LINES)[1], source)
    parser.included_ranges = []
    return Parsed(parser.parse(source))


class _Run(NamedTuple):
    span: _Span  # first line's opener, last line's end
    first_end: int  # the first line's end
    last: int  # the last line's opener
    cost: int  # about what the run costs a plain parse: its lines times its bytes


@functools.cache
def _patterns(opener: bytes, lines: int) -> tuple[re.Pattern[bytes], re.Pattern[bytes], re.Pattern[bytes]]:
    """A run of at least `lines` comment lines (spaces and tabs, `opener`, no NUL up to the line's
    end), each indented like the first one (group 1) or more (its indentation and more spaces or
    tabs), only blank lines between; the comment of one line (group 1); and the run after a line
    break (the break included), which the regex engine finds by scanning for the break instead of
    trying every byte as a line start (the same runs, in half the time)."""
    comment = re.escape(opener) + rb"[^\n\x00]*"
    blank = rb"(?:[ \t\r\f]*\n)*"
    rest = comment + rb"(?:\n" + blank + rb"\1[ \t]*" + comment + rb"){%d,}$" % (lines - 1)
    return (
        re.compile(rb"^([ \t]*)" + rest, re.M),
        re.compile(rb"^[ \t]*(" + comment + rb")$", re.M),
        re.compile(rb"\n([ \t]*)" + rest, re.M),
    )


def _next_run(
    data: bytes, at: int, pattern: re.Pattern[bytes], after_break: re.Pattern[bytes]
) -> re.Match[bytes] | None:
    """The first run (`_patterns`) starting at a line start at or after `at`: at the file's start,
    else after a line break (group 1 is the run's indentation, `start(1)` its start)."""
    if at == 0 and (first := pattern.match(data)) is not None:
        return first
    return after_break.search(data, at)


def _runs(data: bytes, opener: bytes, lines: int) -> list[_Run]:
    """The runs of at least `lines` comment lines (`_patterns`); one whose first line starts the
    file or follows a line ending with a backslash (a continuation) starts at its second line."""
    pattern, line, after_break = _patterns(opener, lines)
    runs: list[_Run] = []
    at = 0
    while (match := _next_run(data, at, pattern, after_break)) is not None:
        start, end = match.start(1), match.end()
        indent = len(match.group(1))
        first_end = data.index(b"\n", start)
        if start == 0 or data[max(0, start - 3) : start].rstrip(b"\r\n").endswith(b"\\"):
            second = line.search(data, first_end + 1, end)
            if second is None or second.end() == end:
                at = end
                continue  # one line left
            start, first_end = second.start(), second.end()
        last = data.rfind(b"\n", start, end) + 1 + indent
        cost = (data.count(b"\n", start, end) + 1) * (end - start)  # lines (blank ones too) x bytes
        runs.append(_Run((start + indent, end), first_end, last, cost))
        at = end
    return runs


def _one_comment(root: ts.Node, span: _Span) -> bool:
    node = root.descendant_for_byte_range(*span)
    return node is not None and node.type == "comment" and (node.start_byte, node.end_byte) == span


def _ranges(data: bytes, runs: list[_Run]) -> list[ts.Range]:
    """Included ranges leaving out, in each run, the bytes from its first line's end to its last
    line's opener."""
    counted, row = 0, 0  # the rows (line breaks) before byte `counted`

    def point(offset: int) -> tuple[int, int]:
        nonlocal counted, row
        row += data.count(b"\n", counted, offset)
        counted = offset
        return row, offset - data.rfind(b"\n", 0, offset) - 1

    ranges = []
    start, start_point = 0, (0, 0)
    for run in runs:
        ranges.append(ts.Range(start_point, point(run.first_end), start, run.first_end))
        start, start_point = run.last, point(run.last)
    ranges.append(ts.Range(start_point, point(len(data)), start, len(data)))
    return ranges
