"""chunk_file and tags on files made of long comment runs, against tree-sitter's raw parse and tags
query of the same files with their comments blanked (issue 13; S1, S2).

    python bench/chunk_comments.py [--lines 5000 20000] [--repeat 3] [--shape NAME ...]

Each shape is one language and one place for its comment lines (a function body, commented-out code
at column 0 inside a block, doc comments above many small functions, module level), generated at
each `--lines` count (20,000 lines are ~1 MB). Per shape and size it prints the file's size, the
reference (tree-sitter's parse + the tags query of the same file with every comment's characters
made spaces: same bytes, same code, no comments), `chunk_file`, `tags`, and (chunk_file + tags) /
reference, best of `--repeat`. The last column staying flat while the file grows is chunking
linear in the file's size; a quadratic step makes it grow with the file (x4 for 4x the lines).
"""

from __future__ import annotations

import argparse
import functools
import re
import time
from collections.abc import Callable

import tree_sitter as ts

from pagedctx.host.code.chunker import chunk_file, tags
from pagedctx.host.code.grammars import CompiledLanguage, compiled
from pagedctx.host.code.languages import language_for_path

TEXT = "commented-out: total = compute(total, step) + 1"
TAB = "\t"


def _lines(count: int, indent: str, opener: str, closer: str = "") -> str:
    return "".join(f"{indent}{opener} {i} {TEXT}{closer}\n" for i in range(count))


def _functions(count: int, make: Callable[[int], str]) -> str:
    return "".join(make(i) for i in range(count))


SHAPES: dict[str, tuple[str, Callable[[int], str]]] = {
    "python, function body": (
        "m.py",
        lambda n: f"def f(x):\n    y = x\n{_lines(n, '    ', '#')}    return y\n",
    ),
    "python, column 0 in a block": (
        "m.py",
        lambda n: f"class A:\n    def f(self):\n        y = 1\n{_lines(n, '', '#')}        return y\n",
    ),
    "python, module level": ("m.py", lambda n: f"{_lines(n, '', '#')}def f():\n    pass\n"),
    "python, doc comment per function": (
        "m.py",
        lambda n: _functions(n, lambda i: f"# f{i} {TEXT}\ndef f{i}(x):\n    return x + {i}\n\n"),
    ),
    "go, function body": (
        "m.go",
        lambda n: f"package p\n\nfunc F() int {{\n{_lines(n, TAB, '//')}\treturn 1\n}}\n",
    ),
    "go, doc comment per function": (
        "m.go",
        lambda n: (
            "package p\n\n"
            + _functions(n, lambda i: f"// F{i} {TEXT}\nfunc F{i}(x int) int {{ return x + {i} }}\n\n")
        ),
    ),
    "typescript, method body": (
        "m.ts",
        lambda n: f"class A {{\n  m(): number {{\n{_lines(n, '    ', '//')}    return 1;\n  }}\n}}\n",
    ),
    "typescript, JSDoc per function": (
        "m.ts",
        lambda n: _functions(
            n, lambda i: f"/** f{i} {TEXT} */\nexport function f{i}(x: number) {{ return x + {i}; }}\n\n"
        ),
    ),
    "c, function body": ("m.c", lambda n: f"int f(void) {{\n{_lines(n, '  ', '/*', ' */')}  return 1;\n}}\n"),
    "c, doc comment per function": (
        "m.c",
        lambda n: _functions(n, lambda i: f"/* f{i} {TEXT} */\nint f{i}(int x) {{ return x + {i}; }}\n\n"),
    ),
}
_COMMENT = re.compile(r"(?m)(?://|#|/\*).*$")


def blanked(source: str) -> str:
    """The source with each comment's characters made spaces (the generated files' comments end
    their lines; no string holds `#`, `//` or `/*`)."""
    return _COMMENT.sub(lambda match: " " * len(match.group(0)), source)


def parse_and_tags(lang: CompiledLanguage, data: bytes) -> None:
    """The reference: tree-sitter's parse and the tags query, nothing of ours."""
    ts.QueryCursor(lang.tags).matches(lang.parser().parse(data).root_node)


def best_of(fn: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[5000, 20000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shape", nargs="+", choices=sorted(SHAPES), default=list(SHAPES))
    args = parser.parse_args()
    print("| shape | lines | KB | reference ms | chunk_file ms | tags ms | x reference |")
    print("|---|---|---|---|---|---|---|")
    for name in args.shape:
        path, make = SHAPES[name]
        language = language_for_path(path)
        assert language is not None
        lang = compiled(language)
        warm = make(50).encode()  # compiles the queries, loads the grammar: not part of any figure
        parse_and_tags(lang, warm)
        chunk_file(path, warm)
        tags(path, warm)
        for lines in args.lines:
            text = make(lines)
            source, reference_source = text.encode(), blanked(text).encode()
            assert len(source) == len(reference_source)

            reference_s = best_of(functools.partial(parse_and_tags, lang, reference_source), args.repeat)
            chunk_s = best_of(lambda path=path, source=source: chunk_file(path, source), args.repeat)
            tags_s = best_of(lambda path=path, source=source: tags(path, source), args.repeat)
            print(
                f"| {name} | {lines:,} | {len(source) / 1000:,.0f} | {reference_s * 1000:.1f} "
                f"| {chunk_s * 1000:.1f} | {tags_s * 1000:.1f} | {(chunk_s + tags_s) / reference_s:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
