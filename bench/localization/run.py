"""Run the localization benchmark: how much of a real commit's gold does a context selection hold?

    python bench/localization/run.py [--cases DIR] [--repos owner/name,...] [--limit N]
                                     [--selectors file-bm25,chunk-bm25,chunk-bm25-code,def-bm25,ours]
                                     [--out FILE]

Each case (made by `build_cases.py`) is a commit: its message is the intent, the parent's tree is
indexed into a fresh temporary SQLite store with pagedctx's own index, and each selector picks
context for the intent under budgets of 1k, 2k, 4k, 8k and 32k cl100k tokens. Selectors:
- `file-bm25` (reference): BM25 (bm25s, English stopwords) over the texts of all indexed files,
  query = intent; files with a positive score are taken whole, best first, skipping a file that
  does not fit the budget left and trying the next. Token counts are the index's exact ones.
- `chunk-bm25` (reference): the same over chunk bodies (every chunk of every indexed file); a chunk
  whose lines lie inside a chunk already taken is skipped for free, as its text is already there.
- `chunk-bm25-code` (a stronger reference, not asked for): chunk-bm25 with pagedctx's code terms
  (identifiers split on camelCase/snake_case, light stemming) instead of bm25s's word tokenizer,
  to show how much of `ours` is tokenization alone.
- `def-bm25` (the strong reference, issue 18): BM25 over every function, method and class (and
  struct, interface, trait, impl, enum, type) of the source files: files whose role
  (`pagedctx.host.ingest.file_role`, from the path, the head of the file and the tree's
  .gitattributes, plus `EXTRA_ATTRIBUTES`) is source, so tests, examples, docs, vendored and
  generated code are out. Each definition's text is split into identifier words (runs of letters
  and digits split at `_` and camelCase humps, lowercased, English stopwords dropped), the query
  too; bodies are added in rank order while they fit, as chunk-bm25 does.
- `ours`: `pagedctx.host.select.select_context(index, intent, Budget(total=budget))`: whole files and chunks
  (bodies or skeletons; both count here, `def_recall_body` in results.json counts bodies only).
Metrics, per case, then macro-averaged over cases (per repository and overall):
- file recall: the fraction of gold files with something selected (the whole file or a chunk);
- definition recall: the fraction of gold definitions covered: the whole file is selected, or a
  selected chunk has the gold id, or a chunk selected with its body lies in the same file with
  lines covering the gold's lines (a skeleton shows only its own signature, so it counts for
  itself, never for the definitions it encloses).
Every selection's total tokens must be <= its budget; a violation is reported loudly.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

import bm25s  # type: ignore[import-untyped, unused-ignore]
import numpy as np
from bm25s.stopwords import STOPWORDS_EN  # type: ignore[import-untyped, unused-ignore]

from pagedctx.host.code.chunk import Chunk, ChunkKind
from pagedctx.host.ingest.file_role import (
    HEAD_BYTES,
    FileRole,
    GitAttributes,
    file_role,
    parse_gitattributes,
    read_gitattributes,
)
from pagedctx.host.ingest.index import Index
from pagedctx.host.store.url import open_store
from pagedctx.host.text.terms import terms
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.tokens import CachedCounter, token_counter

HERE = Path(__file__).resolve().parent
#: Cases live outside any git checkout: the index applies the .gitignore files of the repository a
#: tree sits in, and this repository's ignores generated cases.
DEFAULT_CASES = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pagedctx-bench" / "loc"
#: Indexed stores of case trees, one per case, in a folder named for the code that made them.
INDEX_CACHE = DEFAULT_CASES.parent / "loc-index"
#: The code an indexed store depends on (its fingerprint names the cache folder).
INDEX_CODE = (  # under pagedctx.host
    "ingest", "code", "store", "text",
    "select/catalog.py", "select/catalog_delta.py", "select/catalog_cache.py", "select/file_parts.py",
)  # fmt: skip
BUDGETS = (1000, 2000, 4000, 8000, 32000)
SELECTORS = ("file-bm25", "chunk-bm25", "chunk-bm25-code", "def-bm25", "ours")
#: What `def-bm25` ranks: functions, methods and classes (and the class-like kinds of Go, Rust, TS
#: and Java: structs, interfaces, traits, impls, enums, type declarations).
DEFINITION_KINDS = frozenset(
    {ChunkKind.FUNCTION, ChunkKind.METHOD, ChunkKind.CLASS, ChunkKind.STRUCT, ChunkKind.INTERFACE}
    | {ChunkKind.TRAIT, ChunkKind.IMPL, ChunkKind.ENUM, ChunkKind.TYPE}
)
#: Attributes the benchmark adds to a case tree's own .gitattributes (as a user of the reference
#: would): zod's `deno/` folder is a generated copy of its sources.
EXTRA_ATTRIBUTES = {"colinhacks/zod": "deno/** linguist-generated\n"}
_ALNUM = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOPWORDS = frozenset(STOPWORDS_EN)


@dataclass(frozen=True)
class Gold:
    path: str
    id: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Case:
    repo: str
    commit: str
    intent: str
    gold_files: tuple[str, ...]
    gold: tuple[Gold, ...]
    tree: Path
    names_symbol: bool | None  # None: a case built before names were measured (rebuild it)

    @classmethod
    def load(cls, folder: Path) -> Case:
        data = json.loads((folder / "case.json").read_text())
        gold = tuple(
            Gold(d["path"], d["id"], d["start_line"], d["end_line"]) for d in data["gold_definitions"]
        )
        return cls(
            data["repo"],
            data["commit"],
            data["intent"],
            tuple(data["gold_files"]),
            gold,
            folder / "tree",
            data.get("names_symbol"),
        )


@dataclass(frozen=True)
class Span:
    """A selected chunk: where it is, and whether its body (not only its skeleton) was shown."""

    path: str
    id: str
    start_line: int
    end_line: int
    body: bool = True

    def covers(self, gold: Gold) -> bool:
        # A skeleton shows only its own signature: it counts for itself, never for what it encloses.
        return self.id == gold.id or (
            self.body
            and self.path == gold.path
            and self.start_line <= gold.start_line
            and self.end_line >= gold.end_line
        )


@dataclass
class Picked:
    """What one selector chose for one case at one budget."""

    files: set[str] = field(default_factory=set)
    spans: list[Span] = field(default_factory=list)
    tokens: int = 0

    def scores(self, case: Case) -> dict[str, float]:
        touched = self.files | {span.path for span in self.spans}
        file_recall = sum(path in touched for path in case.gold_files) / len(case.gold_files)
        found = [g.path in self.files or any(s.covers(g) for s in self.spans) for g in case.gold]
        found_body = [
            g.path in self.files or any(s.body and s.covers(g) for s in self.spans) for g in case.gold
        ]
        return {
            "file_recall": file_recall,
            "def_recall": sum(found) / len(case.gold),
            "def_recall_body": sum(found_body) / len(case.gold),
            "tokens": self.tokens,
        }


class Corpus:
    """The indexed tree of one case, as the references see it: file texts and chunk bodies."""

    def __init__(self, index: Index, tree: Path, counter: CachedCounter, extra_attributes: str = "") -> None:
        self.paths = index.paths()
        metas = [index.file(path) for path in self.paths]
        self.file_tokens = [meta.tokens if meta is not None else 0 for meta in metas]
        self.file_texts = [(tree / path).read_text("utf-8", "replace") for path in self.paths]
        attributes = read_gitattributes(tree)
        attributes = GitAttributes(rules=(*attributes.rules, *parse_gitattributes(extra_attributes)))
        self.roles = {
            path: file_role(path, text[:HEAD_BYTES], attributes)
            for path, text in zip(self.paths, self.file_texts, strict=True)
        }
        self.chunks: list[Chunk] = [chunk for path in self.paths for chunk in index.chunks_in_file(path)]
        self.chunk_tokens = [counter.count(chunk.body) for chunk in self.chunks]
        #: The chunks `def-bm25` ranks: definitions of source files.
        self.source_definitions = [
            i
            for i, chunk in enumerate(self.chunks)
            if chunk.kind in DEFINITION_KINDS and self.roles[chunk.path] is FileRole.SOURCE
        ]


def identifier_words(text: str) -> list[str]:
    """The words of a text as a code search splits identifiers: runs of letters and digits, split
    at underscores and camelCase humps (`getHTTPResponse_code` -> get, http, response, code),
    lowercased, English stopwords dropped."""
    words = (part.lower() for token in _ALNUM.findall(text) for part in _CAMEL.findall(token))
    return [word for word in words if word not in _STOPWORDS]


def definition_ranking(corpus: Corpus, query: str) -> list[int]:
    """`def-bm25`: BM25 (bm25s) over the identifier words of the source definitions' texts; the
    corpus indexes of those with a positive score, best first (ties: corpus order)."""
    chosen = corpus.source_definitions
    words = identifier_words(query)
    if not chosen or not words:
        return []
    retriever = bm25s.BM25()
    retriever.index(
        [identifier_words(corpus.chunks[i].body) or ["\x00"] for i in chosen], show_progress=False
    )
    scores = np.asarray(retriever.get_scores(words))
    order = np.lexsort((np.arange(len(scores)), -scores))
    return [chosen[int(i)] for i in order if scores[i] > 0]


def bm25_ranking(texts: Sequence[str], query: str, *, code_terms: bool = False) -> list[int]:
    """Indexes of the texts with a positive BM25 score for the query, best first (ties: text order)."""
    if not texts:
        return []
    if code_terms:
        corpus: Any = [terms(text) or ["\x00"] for text in texts]
    else:
        corpus = bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    if code_terms:
        words = terms(query)
    else:
        words = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
    if not words:
        return []
    scores = np.asarray(retriever.get_scores(list(words)))
    order = np.lexsort((np.arange(len(scores)), -scores))
    return [int(i) for i in order if scores[i] > 0]


#: The references: selector -> its ranking of the corpus (files for file-bm25, chunks otherwise).
REFERENCES: dict[str, Callable[[Corpus, str], list[int]]] = {
    "file-bm25": lambda corpus, intent: bm25_ranking(corpus.file_texts, intent),
    "chunk-bm25": lambda corpus, intent: bm25_ranking([c.body for c in corpus.chunks], intent),
    "chunk-bm25-code": lambda corpus, intent: bm25_ranking(
        [c.body for c in corpus.chunks], intent, code_terms=True
    ),
    "def-bm25": definition_ranking,
}


def fill_files(corpus: Corpus, ranking: list[int], budget: int) -> Picked:
    picked = Picked()
    for i in ranking:
        if picked.tokens + corpus.file_tokens[i] <= budget:
            picked.files.add(corpus.paths[i])
            picked.tokens += corpus.file_tokens[i]
    return picked


def fill_chunks(corpus: Corpus, ranking: list[int], budget: int) -> Picked:
    picked = Picked()
    for i in ranking:
        chunk = corpus.chunks[i]
        span = Span(chunk.path, chunk.id, chunk.start_line, chunk.end_line)
        if any(
            s.path == span.path and s.start_line <= span.start_line and s.end_line >= span.end_line
            for s in picked.spans
        ):
            continue  # its text is already in a taken chunk
        if picked.tokens + corpus.chunk_tokens[i] <= budget:
            picked.spans.append(span)
            picked.tokens += corpus.chunk_tokens[i]
    return picked


def load_ours(options: str = "") -> Callable[[Index, str, Budget], Any] | None:
    """`select_context`, with `SelectOptions` from a JSON object when given (ablations)."""
    try:
        from pagedctx.host.select import SelectOptions, select_context
    except ImportError as error:
        print(
            f"!! selector `ours` skipped: pagedctx.host.select is not importable ({error})", file=sys.stderr
        )
        return None
    if not options:
        return select_context
    chosen = SelectOptions(**json.loads(options))
    return lambda index, intent, budget: select_context(index, intent, budget, options=chosen)


def pick_ours(select: Callable[[Index, str, Budget], Any], index: Index, intent: str, budget: int) -> Picked:
    selection = select(index, intent, Budget(total=budget))
    picked = Picked()
    for full in selection.full_files:
        picked.files.add(full.path)
        picked.tokens += full.tokens
    for chunk in selection.chunks:
        body = chunk.mode == "body"
        picked.spans.append(Span(chunk.path, chunk.id, chunk.start_line, chunk.end_line, body))
        picked.tokens += chunk.tokens
    return picked


@dataclass
class Run:
    """Results of the whole run: per case, selector and budget; problems; time per selector."""

    selectors: list[str]
    cases: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def timed(self, name: str, started: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def record(self, case: Case, selector: str, budget: int, picked: Picked, row: dict[str, Any]) -> None:
        if picked.tokens > budget:
            message = f"{case.repo} {case.commit[:12]} {selector}@{budget}: {picked.tokens} tokens > budget"
            print(f"!!!!!! BUDGET VIOLATION: {message}", file=sys.stderr)
            self.violations.append(message)
        row["results"].setdefault(selector, {})[str(budget)] = picked.scores(case)


def index_fingerprint() -> str:
    """A digest of the sources of `INDEX_CODE` (pagedctx's index, chunker, store, terms, catalog)."""
    import pagedctx.host

    root = Path(pagedctx.host.__file__).resolve().parent
    digest = hashlib.sha256()
    for part in INDEX_CODE:
        base = root / part
        for path in sorted([base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]):
            if "__pycache__" not in path.parts:
                digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def open_index(case: Case, tmp: Path, cache: Path | None) -> Index:
    """The case tree indexed into `tmp/s.db`, warm-started from the cache when it holds this case
    (then `Index.update` brings it to the tree as it is, at one stat per unchanged file), and saved
    there otherwise (SQLite's backup API: a consistent copy of a WAL database)."""
    db = tmp / "s.db"
    extra = EXTRA_ATTRIBUTES.get(case.repo, "")
    attributes = case.tree / ".gitattributes"
    own = attributes.read_text("utf-8", "replace") if attributes.is_file() else ""
    if extra and extra not in own:  # the same roles for `ours` (its index reads the tree's file)
        attributes.write_text(own + ("" if not own or own.endswith("\n") else "\n") + extra, "utf-8")
    cached = cache / f"{case.repo.replace('/', '+')}+{case.commit[:12]}.db" if cache is not None else None
    if cached is not None and cached.is_file():
        shutil.copyfile(cached, db)
    index = Index(open_store(f"sqlite:///{db}"))
    index.update([case.tree])
    if cached is not None and not cached.is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        part = cached.with_suffix(".part")
        with sqlite3.connect(db) as source, sqlite3.connect(part) as target:
            source.backup(target)
        source.close()
        target.close()
        part.replace(cached)
    return index


def run_case(
    case: Case, run: Run, counter: CachedCounter, ours: Callable[..., Any] | None, cache: Path | None
) -> None:
    row: dict[str, Any] = {
        "repo": case.repo,
        "commit": case.commit,
        "gold_files": len(case.gold_files),
        "gold_definitions": len(case.gold),
        "names_symbol": case.names_symbol,
        "results": {},
    }
    with tempfile.TemporaryDirectory(prefix="pagedctx-loc-") as tmp:
        started = time.perf_counter()
        index = open_index(case, Path(tmp), cache)
        corpus = Corpus(index, case.tree, counter, EXTRA_ATTRIBUTES.get(case.repo, ""))
        run.timed("index", started)
        indexed = set(corpus.paths)
        ids = {chunk.id for chunk in corpus.chunks}
        for problem in [f"gold file {p} not indexed" for p in case.gold_files if p not in indexed] + [
            f"gold id {g.id} not in the index" for g in case.gold if g.id not in ids
        ]:
            run.warnings.append(f"{case.repo} {case.commit[:12]}: {problem}")
        for name, rank in REFERENCES.items():
            if name in run.selectors:
                started = time.perf_counter()
                ranking = rank(corpus, case.intent)
                fill = fill_files if name == "file-bm25" else fill_chunks
                for budget in BUDGETS:
                    run.record(case, name, budget, fill(corpus, ranking, budget), row)
                run.timed(name, started)
        if ours is not None:
            for budget in BUDGETS:
                started = time.perf_counter()
                try:
                    picked = pick_ours(ours, index, case.intent, budget)
                except Exception as error:  # an unfinished selector must not stop the references
                    message = f"{case.repo} {case.commit[:12]} ours@{budget}: {type(error).__name__}: {error}"
                    print(f"!! {message}", file=sys.stderr)
                    run.errors.append(message)
                    picked = Picked()
                run.timed("ours", started)
                run.record(case, "ours", budget, picked, row)
    run.cases.append(row)


def summarize(rows: list[dict[str, Any]], selectors: list[str]) -> dict[str, dict[str, dict[str, float]]]:
    """Macro averages over the rows: selector -> `file_recall@B` / `def_recall@B` / ... -> value."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for selector in selectors:
        table[selector] = {
            str(budget): {
                metric: round(mean(row["results"][selector][str(budget)][metric] for row in rows), 4)
                for metric in ("file_recall", "def_recall", "def_recall_body", "tokens")
            }
            for budget in BUDGETS
        }
    return table


def markdown(title: str, summary: dict[str, dict[str, dict[str, float]]], count: int) -> str:
    short = [f"{b // 1000}k" for b in BUDGETS]
    head = ["selector", *[f"file@{s}" for s in short], *[f"def@{s}" for s in short]]
    lines = [f"### {title} ({count} cases)", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for selector, by_budget in summary.items():
        cells = [f"{by_budget[str(b)][m]:.2f}" for m in ("file_recall", "def_recall") for b in BUDGETS]
        lines.append(f"| {selector} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def patch_constant(spec: str) -> None:
    """`module.NAME=number`: replace a numeric module constant (ablations of `ours`)."""
    import importlib

    target, _, value = spec.partition("=")
    module_name, _, name = target.rpartition(".")
    module = importlib.import_module(module_name)
    if not isinstance(getattr(module, name, None), int | float):
        raise SystemExit(f"--patch {spec}: {module_name} has no numeric constant {name}")
    setattr(module, name, type(getattr(module, name))(float(value)))
    print(f"patched {target} = {getattr(module, name)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--repos", default="", help="comma-separated owner/name filter (default: all)")
    parser.add_argument("--limit", type=int, default=0, help="at most N cases per repository (0: all)")
    parser.add_argument("--selectors", default=",".join(SELECTORS))
    parser.add_argument("--out", type=Path, default=None, help="results JSON (default: CASES/results.json)")
    parser.add_argument(
        "--index-cache",
        type=Path,
        default=INDEX_CACHE,
        help="folder of indexed case stores, reused while the index code is unchanged",
    )
    parser.add_argument("--no-index-cache", action="store_true", help="index every case from scratch")
    parser.add_argument(
        "--ours-options",
        default="",
        help="SelectOptions of `ours` as JSON, for ablations (e.g. '{\"wall_share\": 1.0}')",
    )
    parser.add_argument(
        "--patch",
        action="append",
        default=[],
        help="set a constant of pagedctx for an ablation: module.NAME=number "
        "(e.g. pagedctx.host.select.rank.ENTRY=0); repeatable",
    )
    args = parser.parse_args(argv)
    for patch in args.patch:
        patch_constant(patch)
    selectors = [s for s in args.selectors.split(",") if s]
    if unknown := set(selectors) - set(SELECTORS):
        parser.error(f"unknown selectors {sorted(unknown)}; known: {', '.join(SELECTORS)}")
    ours = load_ours(args.ours_options) if "ours" in selectors else None
    if ours is None:
        selectors = [s for s in selectors if s != "ours"]
    wanted = {r.replace("/", "+") for r in args.repos.split(",") if r}
    folders: list[Path] = []
    for repo_dir in sorted(p for p in args.cases.iterdir() if p.is_dir()):
        if wanted and repo_dir.name not in wanted:
            continue
        found = sorted(p for p in repo_dir.iterdir() if (p / "case.json").is_file())
        folders += found[: args.limit] if args.limit else found
    if not folders:
        parser.error(f"no cases under {args.cases} (run build_cases.py first)")

    started = time.perf_counter()
    counter = token_counter(None)
    run = Run(selectors)
    cache = None if args.no_index_cache else args.index_cache / index_fingerprint()
    if cache is not None and args.index_cache.is_dir():
        for stale in args.index_cache.iterdir():  # stores made by other versions of the index code
            if stale.is_dir() and stale != cache:
                shutil.rmtree(stale, ignore_errors=True)
    for n, folder in enumerate(folders, 1):
        case = Case.load(folder)
        print(f"[{n}/{len(folders)}] {case.repo} {case.commit[:12]}", file=sys.stderr)
        run_case(case, run, counter, ours, cache)
    total = time.perf_counter() - started
    return report(run, selectors, total, args.out or args.cases / "results.json")


def report(run: Run, selectors: list[str], total: float, out: Path) -> int:
    """Print the tables (per repository, overall, naming a symbol or not) and write results.json."""
    repos = sorted({row["repo"] for row in run.cases})
    groups: dict[str, list[dict[str, Any]]] = {
        repo: [r for r in run.cases if r["repo"] == repo] for repo in repos
    }
    groups["overall"] = run.cases
    groups["messages naming a symbol"] = [r for r in run.cases if r["names_symbol"] is True]
    groups["messages naming no symbol"] = [r for r in run.cases if r["names_symbol"] is False]
    summary = {name: summarize(rows, selectors) for name, rows in groups.items() if rows}
    for name, rows in groups.items():
        if rows:
            print(markdown(name, summary[name], len(rows)), end="\n\n")
    counts = ", ".join(
        f"{r} {len(groups[r])} ({sum(c['names_symbol'] is False for c in groups[r])} naming no symbol)"
        for r in repos
    )
    print(f"cases: {counts}; total {len(run.cases)}")
    if unknown_names := sum(c["names_symbol"] is None for c in run.cases):
        print(f"!! {unknown_names} cases have no names_symbol (built before it was measured: rebuild them)")
    print(f"run time {total:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in run.seconds.items()) + ")")
    for warning in run.warnings:
        print(f"warning: {warning}")
    if run.errors:
        print(f"!! {len(run.errors)} selector errors (see results.json)")
    if run.violations:
        print(f"!!!!!! {len(run.violations)} BUDGET VIOLATIONS:\n" + "\n".join(run.violations))
    out.write_text(
        json.dumps(
            {
                "budgets": list(BUDGETS),
                "selectors": selectors,
                "seconds": {"total": round(total, 2), **{k: round(v, 2) for k, v in run.seconds.items()}},
                "summary": summary,
                "violations": run.violations,
                "errors": run.errors,
                "warnings": run.warnings,
                "cases": run.cases,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"results written to {out}")
    return 1 if run.violations else 0


if __name__ == "__main__":
    sys.exit(main())
