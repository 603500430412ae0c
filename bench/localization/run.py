"""Run the localization benchmark: how much of a real commit's gold does a context selection hold?

    python bench/localization/run.py [--cases DIR] [--repos owner/name,...] [--limit N]
                                     [--selectors file-bm25,chunk-bm25,chunk-bm25-code,ours] [--out FILE]

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
import json
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

from pagedctx.host.code.chunk import Chunk
from pagedctx.host.ingest.index import Index
from pagedctx.host.store.url import open_store
from pagedctx.host.text.terms import terms
from pagedctx.protocol.budget import Budget
from pagedctx.protocol.tokens import CachedCounter, token_counter

HERE = Path(__file__).resolve().parent
BUDGETS = (1000, 2000, 4000, 8000, 32000)
SELECTORS = ("file-bm25", "chunk-bm25", "chunk-bm25-code", "ours")


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

    @classmethod
    def load(cls, folder: Path) -> Case:
        data = json.loads((folder / "case.json").read_text())
        gold = tuple(
            Gold(d["path"], d["id"], d["start_line"], d["end_line"]) for d in data["gold_definitions"]
        )
        return cls(
            data["repo"], data["commit"], data["intent"], tuple(data["gold_files"]), gold, folder / "tree"
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

    def __init__(self, index: Index, tree: Path, counter: CachedCounter) -> None:
        self.paths = index.paths()
        metas = [index.file(path) for path in self.paths]
        self.file_tokens = [meta.tokens if meta is not None else 0 for meta in metas]
        self.file_texts = [(tree / path).read_text("utf-8", "replace") for path in self.paths]
        self.chunks: list[Chunk] = [chunk for path in self.paths for chunk in index.chunks_in_file(path)]
        self.chunk_tokens = [counter.count(chunk.body) for chunk in self.chunks]


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


def load_ours() -> Callable[[Index, str, int], Any] | None:
    try:
        from pagedctx.host.select import select_context
    except ImportError as error:
        print(
            f"!! selector `ours` skipped: pagedctx.host.select is not importable ({error})", file=sys.stderr
        )
        return None
    return select_context


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


def run_case(case: Case, run: Run, counter: CachedCounter, ours: Callable[..., Any] | None) -> None:
    row: dict[str, Any] = {
        "repo": case.repo,
        "commit": case.commit,
        "gold_files": len(case.gold_files),
        "gold_definitions": len(case.gold),
        "results": {},
    }
    with tempfile.TemporaryDirectory(prefix="pagedctx-loc-") as tmp:
        started = time.perf_counter()
        index = Index(open_store(f"sqlite:///{tmp}/s.db"))
        index.update([case.tree])
        corpus = Corpus(index, case.tree, counter)
        run.timed("index", started)
        indexed = set(corpus.paths)
        ids = {chunk.id for chunk in corpus.chunks}
        for problem in [f"gold file {p} not indexed" for p in case.gold_files if p not in indexed] + [
            f"gold id {g.id} not in the index" for g in case.gold if g.id not in ids
        ]:
            run.warnings.append(f"{case.repo} {case.commit[:12]}: {problem}")
        if "file-bm25" in run.selectors:
            started = time.perf_counter()
            ranking = bm25_ranking(corpus.file_texts, case.intent)
            for budget in BUDGETS:
                run.record(case, "file-bm25", budget, fill_files(corpus, ranking, budget), row)
            run.timed("file-bm25", started)
        if "chunk-bm25" in run.selectors:
            started = time.perf_counter()
            ranking = bm25_ranking([chunk.body for chunk in corpus.chunks], case.intent)
            for budget in BUDGETS:
                run.record(case, "chunk-bm25", budget, fill_chunks(corpus, ranking, budget), row)
            run.timed("chunk-bm25", started)
        if "chunk-bm25-code" in run.selectors:
            started = time.perf_counter()
            ranking = bm25_ranking([chunk.body for chunk in corpus.chunks], case.intent, code_terms=True)
            for budget in BUDGETS:
                run.record(case, "chunk-bm25-code", budget, fill_chunks(corpus, ranking, budget), row)
            run.timed("chunk-bm25-code", started)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=HERE / "cases")
    parser.add_argument("--repos", default="", help="comma-separated owner/name filter (default: all)")
    parser.add_argument("--limit", type=int, default=0, help="at most N cases per repository (0: all)")
    parser.add_argument("--selectors", default=",".join(SELECTORS))
    parser.add_argument("--out", type=Path, default=None, help="results JSON (default: CASES/results.json)")
    args = parser.parse_args(argv)
    selectors = [s for s in args.selectors.split(",") if s]
    if unknown := set(selectors) - set(SELECTORS):
        parser.error(f"unknown selectors {sorted(unknown)}; known: {', '.join(SELECTORS)}")
    ours = load_ours() if "ours" in selectors else None
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
    for n, folder in enumerate(folders, 1):
        case = Case.load(folder)
        print(f"[{n}/{len(folders)}] {case.repo} {case.commit[:12]}", file=sys.stderr)
        run_case(case, run, counter, ours)
    total = time.perf_counter() - started

    repos = sorted({row["repo"] for row in run.cases})
    summary = {repo: summarize([r for r in run.cases if r["repo"] == repo], selectors) for repo in repos}
    summary["overall"] = summarize(run.cases, selectors)
    for repo in [*repos, "overall"]:
        count = len([r for r in run.cases if repo in ("overall", r["repo"])])
        print(markdown(repo, summary[repo], count), end="\n\n")
    counts = ", ".join(f"{r} {sum(c['repo'] == r for c in run.cases)}" for r in repos)
    print(f"cases: {counts}; total {len(run.cases)}")
    print(f"run time {total:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in run.seconds.items()) + ")")
    for warning in run.warnings:
        print(f"warning: {warning}")
    if run.errors:
        print(f"!! {len(run.errors)} selector errors (see results.json)")
    if run.violations:
        print(f"!!!!!! {len(run.violations)} BUDGET VIOLATIONS:\n" + "\n".join(run.violations))
    out = args.out or args.cases / "results.json"
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
