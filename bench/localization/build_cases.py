"""Build the localization benchmark's cases from real commits of public repositories.

    python bench/localization/build_cases.py [--choose] [--mirrors DIR] [--out DIR] [--commits FILE]
                                              [--repos owner/name,...] [--per-repo N]

A case is one real commit: its message is the intent, the tree of its (first) parent is what a
selector indexes, and the definitions of the parent that the commit changed are the gold to find.

Repositories are bare git mirrors under `--mirrors`, one per `owner+name` folder (the folder itself
is the git dir, as `git clone --mirror` makes it, or holds one, as the `fetch` tool makes it).

Choosing (`--choose`; deterministic, writes `--commits`, then builds the cases):
1. walk the first-parent history of HEAD, newest to oldest, non-merge commits only;
2. keep a commit when it changes 1..4 source files in the repository's language (`.py`; `.go`;
   `.ts`/`.tsx`), not counting tests (a path containing `test`, `__tests__` or `spec`), docs
   (a `doc`/`docs` folder) nor zod's generated `deno/` copy and `play.ts` scratch file, none of
   them deleted, and when its message (trailers and Mercurial `--HG--` blocks stripped) has at
   least 4 words and is not a merge, release, version bump, formatting or typo commit (nor of
   conventional type docs, style, ci, build, release);
3. split the eligible commits into `--per-repo` equal strata of history and take, in each stratum,
   the newest commit with at least one gold definition whose change is not whitespace only.
Only the commit ids go to `commits.json`; nothing else from the repositories is kept in ours.

Building (with or without `--choose`): for each commit, `cases/<owner+name>/<sha[:12]>/` gets
`tree/`, the parent's tree (`git archive <parent> | tar -x`), and `case.json`: repo, commit,
parent, intent, gold_files, gold_definitions.

Gold: each changed non-test source file that exists in the parent (a renamed file under its old
path) is chunked before and after with `pagedctx.host.code.chunker.chunk_file`, both under the
parent path so ids compare. A parent chunk is gold when the child has no chunk with its id
(deleted or renamed) or has one with a different body. An enclosing chunk (class, struct,
function with nested functions) is dropped when a chunk nested in its lines is gold: the innermost
definitions are what changed. Gold files the index would not read (ignored by a `.gitignore` of
the tree, too large) are dropped. Commits without any gold definition are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from pagedctx.host.code.chunk import Chunk
from pagedctx.host.code.chunker import chunk_file
from pagedctx.host.ingest.file_role import FileRole, file_role
from pagedctx.host.ingest.walk import DEFAULT_MAX_FILE_BYTES, walk_roots

HERE = Path(__file__).resolve().parent
#: Cases live outside any git checkout: the index applies the .gitignore files of the repository a
#: tree sits in, and this repository's ignores generated cases.
DEFAULT_CASES = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pagedctx-bench" / "loc"
REPOS: dict[str, tuple[str, ...]] = {  # repository -> suffixes of its source files
    "pallets/werkzeug": (".py",),
    "encode/starlette": (".py",),
    "urfave/cli": (".go",),
    "go-chi/chi": (".go",),
    "colinhacks/zod": (".ts", ".tsx"),
    "gin-gonic/gin": (".go",),
    "pallets/flask": (".py",),
    "psf/requests": (".py",),
    "encode/httpx": (".py",),
    "google/gson": (".java",),
}
NOT_SOURCE: dict[str, tuple[str, ...]] = {  # path prefixes that are generated copies or scratch files
    "colinhacks/zod": ("deno/", "play.ts"),
}
#: Repositories chosen before names were measured: --choose keeps the newest good commit of each
#: stratum for them; the others prefer, in every other stratum, the newest one whose message names
#: no symbol (so that at least half of the whole set names none).
CHOSEN_WITHOUT_PREFERENCE = frozenset(
    {"pallets/werkzeug", "encode/starlette", "urfave/cli", "go-chi/chi", "colinhacks/zod"}
)
MAX_SOURCE_FILES = 4
MIN_WORDS = 4

_TRAILER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*(?:-by|-By|-Id)\s*:|^(?:Change-Id|Cc|Ref|Refs|See-also):", re.I)
_CONVENTIONAL = re.compile(r"^[a-z]+(?:\([^)]*\))?!?:\s*", re.I)  # `chore(deps): `, `fix!: `
_NOT_A_CHANGE = re.compile(
    r"^(?:merge\b|release[sd]?(?:\s+(?:v?\d|version|notes)|\s*$)|releasing\b"
    r"|prepare(?: for)?(?: the)? release|bump|version\b|v?\d+(?:\.\d+)+\b"
    r"|(?:start|begin|set)\s+(?:the\s+)?version"
    r"|(?:apply |run |re)?(?:format(?:ting)?|formatted|black|gofmt|go fmt|prettier|isort|ruff|lint(?:ing)?"
    r"|pre-commit|whitespace|style)\b|(?:fix(?:ed|es)?\s+)?(?:typos?|spelling)\b)"
    r"|\bbump(?:ed|s)? (?:the )?version|\brelease (?:v?\d|version)|\bversion \d+\.\d|\[pre-commit\.ci\]"
    r"|pre-commit autoupdate|\[maven-release-plugin\]|\blint(?:ers?|ing)?\b|\bwarnings\b",
    re.I,
)
_NOT_CODE_TYPE = re.compile(r"^(?:docs?|style|ci|build|release)(?:\([^)]*\))?!?:", re.I)  # conventional types
_WORD = re.compile(r"[A-Za-z][A-Za-z'_-]+")
_IDENTIFIER = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Change:
    """One changed file of a commit: git status letter, path in the parent and in the child."""

    status: str
    old: str
    new: str


@dataclass(frozen=True)
class Candidate:
    """A commit that passed the cheap filters (history, files, message)."""

    sha: str
    intent: str
    sources: tuple[Change, ...]


class GoldDefinition(TypedDict):
    path: str
    qualname: str
    id: str
    start_line: int
    end_line: int


class CaseData(TypedDict):
    """The content of case.json."""

    repo: str
    commit: str
    parent: str
    intent: str
    gold_files: list[str]
    gold_definitions: list[GoldDefinition]
    names_symbol: bool
    named_words: list[str]


class Repo:
    """A bare git mirror, read with plain git commands."""

    def __init__(self, name: str, git_dir: Path) -> None:
        self.name = name
        self.git_dir = git_dir
        self.suffixes = REPOS[name]
        self.not_source = NOT_SOURCE.get(name, ())
        self._names: dict[str, frozenset[str]] = {}  # blob sha -> definition names in it

    def git(self, *args: str) -> bytes:
        return subprocess.run(
            ["git", "--git-dir", str(self.git_dir), *args], check=True, capture_output=True
        ).stdout

    def show(self, sha: str, path: str) -> bytes:
        return self.git("show", f"{sha}:{path}")

    def parent(self, sha: str) -> str:
        return self.git("rev-parse", f"{sha}^").decode().strip()

    def is_source(self, path: str) -> bool:
        """A file in the repository's language whose role (`file_role`, by its path) is source."""
        if not path.lower().endswith(self.suffixes) or path.startswith(self.not_source):
            return False
        return file_role(path) is FileRole.SOURCE

    def definition_names(self, sha: str) -> frozenset[str]:
        """The names of every definition (chunk) of the source files of the tree of `sha`."""
        listing = self.git("ls-tree", "-r", "-z", sha).decode("utf-8", "surrogateescape")
        names: set[str] = set()
        for entry in listing.split("\0"):
            if not entry:
                continue
            meta, path = entry.split("\t", 1)
            _, kind, blob = meta.split()
            if kind != "blob" or not self.is_source(path):
                continue
            if blob not in self._names:
                content = self.git("cat-file", "blob", blob)
                self._names[blob] = frozenset(c.name for c in chunk_file(path, content).chunks)
            names |= self._names[blob]
        return frozenset(names)

    def changes(self, sha: str) -> list[Change]:
        out = self.git("diff-tree", "-r", "-M", "--no-commit-id", "--name-status", "-z", f"{sha}^", sha)
        return _parse_name_status(out.decode("utf-8", "surrogateescape"))

    def candidates(self) -> list[Candidate]:
        """First-parent, non-merge commits of HEAD, newest first, that pass the cheap filters."""
        log = self.git(
            "log", "--first-parent", "--no-merges", "-z", "--format=%x1e%H %P%x1f%B%x1f", "HEAD"
        ).decode("utf-8", "replace")
        found: list[Candidate] = []
        for record in log.split("\x1e")[1:]:
            shas, body, _ = record.split("\x1f", 2)
            sha, *parents = shas.split()
            intent = clean_message(body)
            if not parents or not is_change_message(intent):
                continue
            sources = tuple(c for c in self.changes(sha) if self.is_source(c.new) or self.is_source(c.old))
            if not 1 <= len(sources) <= MAX_SOURCE_FILES or any(c.status == "D" for c in sources):
                continue
            if any(c.status != "A" for c in sources):  # at least one file existed in the parent
                found.append(Candidate(sha, intent, sources))
        return found


def _parse_name_status(out: str) -> list[Change]:
    fields = out.split("\0")
    changes: list[Change] = []
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i][0]
        if status in "RC":
            changes.append(Change(status, fields[i + 1], fields[i + 2]))
            i += 3
        else:
            changes.append(Change(status, fields[i + 1], fields[i + 1]))
            i += 2
    return changes


def named_words(intent: str, names: frozenset[str]) -> list[str]:
    """The words of the message (maximal runs of `[A-Za-z0-9_]` starting with a letter or `_`) that
    are, case-sensitively, the name of a definition of the parent tree: the message names a symbol
    when there is one."""
    return sorted({word for word in _IDENTIFIER.findall(intent) if word in names})


def clean_message(message: str) -> str:
    """The commit message without its trailer lines (Signed-off-by, Co-authored-by, --HG-- ...)."""
    message = message.split("\n--HG--\n", 1)[0]  # Mercurial-era metadata (branch, rename)
    lines = [line.rstrip() for line in message.strip().splitlines()]
    kept = [line for line in lines if not _TRAILER.match(line.strip())]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def is_change_message(intent: str) -> bool:
    """At least MIN_WORDS words; not a merge, release, version bump, formatting, typo or docs commit."""
    first = intent.splitlines()[0].strip() if intent else ""
    if _NOT_CODE_TYPE.match(first):
        return False
    subject = _CONVENTIONAL.sub("", first)
    return len(_WORD.findall(intent)) >= MIN_WORDS and not _NOT_A_CHANGE.search(subject)


def find_git_dir(mirrors: Path, repo: str) -> Path:
    """`mirrors/owner+name` if it is a git dir, else the git dir one level below it."""
    folder = mirrors / repo.replace("/", "+")
    for candidate in [folder, *sorted(p for p in folder.iterdir() if p.is_dir())] if folder.is_dir() else []:
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    raise SystemExit(f"no git dir for {repo} under {folder} (fetch it or `git clone --mirror` it there)")


def _contains(outer: Chunk, inner: Chunk) -> bool:
    return (
        outer.start_line <= inner.start_line
        and inner.end_line <= outer.end_line
        and (outer.start_line, outer.end_line) != (inner.start_line, inner.end_line)
    )


def gold_definitions(path: str, before: bytes, after: bytes) -> tuple[list[Chunk], bool]:
    """The innermost parent chunks the change deleted or edited, and whether any edit is more than
    whitespace."""
    old = chunk_file(path, before).chunks
    new = {c.id: c.body for c in chunk_file(path, after).chunks}
    changed = [c for c in old if new.get(c.id) != c.body]
    gold = [c for c in changed if not any(_contains(c, other) for other in changed)]
    substantive = any(c.id not in new or "".join(c.body.split()) != "".join(new[c.id].split()) for c in gold)
    return gold, substantive


def build_case(repo: Repo, sha: str, intent: str | None = None) -> CaseData | None:
    """The case.json content of a commit, or None when it has no (non-whitespace) gold definition."""
    parent = repo.parent(sha)
    if intent is None:
        intent = clean_message(repo.git("log", "-1", "--format=%B", sha).decode("utf-8", "replace"))
    files: list[str] = []
    definitions: list[GoldDefinition] = []
    substantive = False
    for change in repo.changes(sha):
        if change.status in "AD" or not repo.is_source(change.old):
            continue
        gold, real = gold_definitions(change.old, repo.show(parent, change.old), repo.show(sha, change.new))
        files.append(change.old)
        substantive |= real
        definitions += [
            GoldDefinition(
                path=c.path, qualname=c.qualname, id=c.id, start_line=c.start_line, end_line=c.end_line
            )
            for c in gold
        ]
    if not definitions or not substantive:
        return None
    named = named_words(intent, repo.definition_names(parent))
    return CaseData(
        repo=repo.name,
        commit=sha,
        parent=parent,
        intent=intent,
        gold_files=files,
        gold_definitions=definitions,
        names_symbol=bool(named),
        named_words=named,
    )


def choose(repo: Repo, out: Path, per_repo: int) -> list[CaseData]:
    """Up to `per_repo` cases spread over history: the newest good commit of each stratum; in the
    even strata (0, 2, ...) the newest good one whose message names no symbol, if there is one
    (not for the repositories of CHOSEN_WITHOUT_PREFERENCE)."""
    candidates = repo.candidates()
    chosen: list[CaseData] = []
    for i in range(per_repo):
        prefer_unnamed = repo.name not in CHOSEN_WITHOUT_PREFERENCE and i % 2 == 0
        stratum = candidates[i * len(candidates) // per_repo : (i + 1) * len(candidates) // per_repo]
        named: list[CaseData] = []  # good commits whose message names a symbol, newest first
        taken: CaseData | None = None
        for candidate in stratum:
            case = build_case(repo, candidate.sha, candidate.intent)
            if case is None:
                continue
            if prefer_unnamed and case["names_symbol"]:
                named.append(case)
                continue
            if (taken := write_case(repo, out, case)) is not None:
                break
        for case in named if taken is None else []:
            if (taken := write_case(repo, out, case)) is not None:
                break
        if taken is not None:
            chosen.append(taken)
    print(f"{repo.name}: {len(candidates)} eligible commits, {len(chosen)} chosen", file=sys.stderr)
    return chosen


def write_case(repo: Repo, out: Path, case: CaseData) -> CaseData | None:
    """Extract the parent's tree and write case.json; gold files the index would not read (ignored
    by a .gitignore of the tree, too large) are dropped, and the case too when no gold is left."""
    sha = case["commit"]
    folder = out / repo.name.replace("/", "+") / sha[:12]
    if folder.exists():
        shutil.rmtree(folder)
    tree = folder / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "--git-dir", str(repo.git_dir), "archive", "--format=tar", case["parent"]],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    walked = walk_roots([tree.resolve()], tree.resolve(), max_file_bytes=DEFAULT_MAX_FILE_BYTES)
    indexable = {found.rel for found in walked.files}
    files = [path for path in case["gold_files"] if path in indexable]
    definitions = [d for d in case["gold_definitions"] if d["path"] in indexable]
    if len(files) < len(case["gold_files"]):
        print(f"{repo.name} {sha[:12]}: gold files the index skips dropped", file=sys.stderr)
    if not definitions:
        shutil.rmtree(folder)
        return None
    case = CaseData({**case, "gold_files": files, "gold_definitions": definitions})
    (folder / "case.json").write_text(json.dumps(case, indent=2, ensure_ascii=False) + "\n")
    return case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--out", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--commits", type=Path, default=HERE / "commits.json")
    parser.add_argument("--choose", action="store_true", help="(re)choose the commits and write --commits")
    parser.add_argument("--repos", default=",".join(REPOS), help="comma-separated owner/name filter")
    parser.add_argument("--per-repo", type=int, default=20, help="commits to choose per repository")
    args = parser.parse_args(argv)
    names = [name for name in args.repos.split(",") if name]
    unknown = set(names) - set(REPOS)
    if unknown:
        parser.error(f"unknown repositories {sorted(unknown)}; known: {', '.join(REPOS)}")
    started = time.perf_counter()
    commits: dict[str, list[str]] = json.loads(args.commits.read_text()) if args.commits.exists() else {}
    for name in names:
        repo = Repo(name, find_git_dir(args.mirrors, name))
        repo_out = args.out / name.replace("/", "+")
        if args.choose:
            cases = choose(repo, args.out, args.per_repo)
            commits[name] = [case["commit"] for case in cases]
        else:
            cases = []
            for sha in commits.get(name, []):
                case = build_case(repo, sha)
                if case is not None:
                    case = write_case(repo, args.out, case)
                if case is None:
                    print(f"warning: {name} {sha[:12]} has no gold definition any more", file=sys.stderr)
                else:
                    cases.append(case)
        keep = {case["commit"][:12] for case in cases}
        if repo_out.is_dir():
            for stale in repo_out.iterdir():
                if stale.is_dir() and stale.name not in keep:
                    shutil.rmtree(stale)
        print(f"{name}: {len(cases)} cases written to {repo_out}", file=sys.stderr)
    if args.choose:
        ordered = {name: commits[name] for name in REPOS if name in commits}
        args.commits.write_text(json.dumps(ordered, indent=2) + "\n")
    print(f"done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
