"""Diamond selection (S5): the smallest context that lets a model make the change, under a budget.

L0  the catalog: every chunk's skeleton, place and symbols (nothing read per chunk);
L1  core chunks: the baseline ranking (lexical + symbol graph) offers its best candidates and the
    policy picks the core;
L2  one-hop diffusion: every chunk defining a symbol a core chunk references, except symbols
    defined in more than `max_definitions` places (`get`, `run` cannot flood the context);
L2.5 negative selection: the policy decides which dependencies keep their body; the rest are shown
    as skeletons;
fit exact token counts (the index's tokenizer; stored with each chunk) in priority order: core
    bodies (up to the budget's `core` share), a skeleton for each next-ranked file not yet shown
    (`SelectOptions.spread_files`, rows over `spread_floor` of the best), dependencies, skeletons
    of the next-ranked candidates (up to its `skeleton` share), bodies for the best skeletons while
    they fit, then more skeletons; a definition inside a body already shown is never repeated;
evidence after the source's skeletons and bodies, when the intent did not ask for tests:
    bodies of test chunks that reference a symbol a selected body defines, most such symbols
    first, within `SelectOptions.evidence_share` of the budget (10%);
promote a file whose body-selected share passes `promote_density` to a full file when it fits.

Everything is deterministic: ties break on chunk ids, and the output is ordered by path and line.

One room: the levels above are one pipeline over one selection's picks and token count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pagedctx.errors import UsageError
from pagedctx.host.code.chunk import Chunk
from pagedctx.host.ingest.index import Index
from pagedctx.host.select.capped import capped_skeleton, direct_members
from pagedctx.host.select.catalog import ROLES, Catalog
from pagedctx.host.select.catalog_cache import load_catalog
from pagedctx.host.select.policy import TYPE_KINDS, BaselineSelectionPolicy, SelectionPolicy
from pagedctx.host.select.rank import Ranking, rank
from pagedctx.host.select.selection import (
    Candidate,
    CappedSkeleton,
    Mode,
    SelectedChunk,
    SelectedFile,
    Selection,
    SelectOptions,
    Why,
)
from pagedctx.host.text.intent import Intent
from pagedctx.protocol.budget import Budget

__all__ = ["select_context"]

_OFFERED = 60  # candidates shown to the L1 decider (a model reads their skeletons)
_CHEAP_BODY = 1.5  # an L2 body within this factor (+ 20 tokens) of its skeleton is taken at once
_UPGRADE_RATIO = 0.25  # of the best core score: a skeleton under it is upgraded after the last skeletons
_MEMBER_RATIO = 0.5  # a class too big to show whole: its members scoring this share of its score
FLOW_MIN_BUDGET = 8000  # tokens: `SelectOptions.flow=None` follows the request flow from this budget on
_EVIDENCE_SYMBOLS = 40  # a symbol used by more chunks than this says little about what a test checks


@dataclass
class _Pick:
    mode: Mode
    why: Why
    tokens: int
    capped: CappedSkeleton | None = None  # a class skeleton over its share, shown capped


def select_context(
    index: Index,
    asked: str | Intent,
    budget: Budget,
    *,
    policy: SelectionPolicy | None = None,
    options: SelectOptions | None = None,
    scope: Sequence[str] = (),
    catalog: Catalog | None = None,
) -> Selection:
    """Select the context for `intent` within `budget.total` tokens, split by its shares (see the
    module docstring).

    `scope`: index paths (`Index.scope_of(roots)`) the selection keeps to, when the store holds
    more than the repositories asked about; empty: the whole index. `catalog`: the index's
    catalog when the caller holds it (default: `load_catalog(index)`). `asked`: the door's
    `Intent`, or a text (taken as `Intent.asked(text)`); the policy reads its text as given.
    """
    made = Intent.asked(asked)
    intent = made.original
    if not intent.strip():
        raise UsageError("the intent is empty: say what change the context is for")
    if catalog is None:
        catalog, _ = load_catalog(index)
    chosen = policy or BaselineSelectionPolicy()
    options = options or SelectOptions()
    flow = options.flow if options.flow is not None else budget.total >= FLOW_MIN_BUDGET
    ranking = rank(catalog, made, scope, roles=options.file_roles, own_terms=options.own_terms, flow=flow)
    return _Pipeline(index, catalog, ranking, chosen, options).run(intent, budget)


class _Pipeline:
    def __init__(
        self,
        index: Index,
        catalog: Catalog,
        ranking: Ranking,
        policy: SelectionPolicy,
        options: SelectOptions,
    ) -> None:
        self.index = index
        self.catalog = catalog
        self.ranking = ranking
        self.policy = policy
        self.options = options
        self._chunks: dict[int, Chunk] = {}
        self._candidates: dict[int, Candidate] = {}
        self.picks: dict[int, _Pick] = {}
        self.used = 0
        self.budget = 0  # the total of the budget `run` was given

    # --- chunk access ---------------------------------------------------------------------------

    def _load(self, rows: Iterable[int]) -> None:
        missing = [r for r in rows if r not in self._chunks]
        if not missing:
            return
        found = {c.id: c for c in self.index.chunks(self.catalog.ids[r] for r in missing)}
        for row in missing:  # a chunk gone since the catalog was built is simply not offered
            chunk = found.get(self.catalog.ids[row])
            if chunk is not None:
                self._chunks[row] = chunk

    def candidate(self, row: int, referenced_by: int = 0) -> Candidate | None:
        self._load([row])
        chunk = self._chunks.get(row)
        if chunk is None:
            return None
        known = self._candidates.get(row)
        if known is None:
            body_tokens, skeleton_tokens = self.index.chunk_tokens(chunk)
            known = self._candidates[row] = Candidate(
                id=chunk.id,
                path=chunk.path,
                qualname=chunk.qualname,
                kind=chunk.kind.value,
                skeleton=chunk.skeleton,
                score=round(float(self.ranking.scores[row]), 6),
                body_tokens=body_tokens,
                skeleton_tokens=skeleton_tokens,
                mentioned=row in self.ranking.mentioned,
            )
        return known if referenced_by == 0 else known.model_copy(update={"referenced_by": referenced_by})

    # --- the pipeline ---------------------------------------------------------------------------

    def run(self, intent: str, budget: Budget) -> Selection:
        self.budget = budget.total
        ranked = self.ranking.top(self.options.max_candidates)
        self._load(ranked[:_OFFERED])
        offered = [c for r in ranked[:_OFFERED] if (c := self.candidate(r)) is not None]
        core_ids = self.policy.core(intent, offered, self.options.max_core)
        core = [r for cid in core_ids if (r := self.catalog.row(cid)) is not None and r in self._chunks]
        dependencies = self._diffuse(core)
        self._load(dependencies)
        dep_candidates = [c for r, n in dependencies.items() if (c := self.candidate(r, n)) is not None]
        core_candidates = [c for r in core if (c := self.candidate(r)) is not None]
        keep = self.policy.keep_bodies(intent, core_candidates, dep_candidates) if dep_candidates else set()
        self._fit_core(core, budget.core_tokens)
        compete = self.options.l2_compete
        if not compete:
            for row in dependencies:
                self._dependency(row, keep)
        self._load(ranked)
        first_limit = self.used + budget.skeleton_tokens
        if self.options.spread_files:
            self._spread(ranked, first_limit)
        queue = [(row, False) for row in ranked]
        if compete:  # dependencies take their place among the candidates by score
            queue += [(row, True) for row in dependencies]
            queue.sort(key=lambda item: (-self.ranking.scores[item[0]], item[0], not item[1]))
        for row, is_dependency in queue:  # skeletons of the next candidates, up to their share
            if is_dependency:
                self._dependency(row, keep, limit=first_limit)
            else:
                self._summary(row, "l1", limit=first_limit)
        floor = _UPGRADE_RATIO * max((self.ranking.scores[r] for r in core), default=0.0)
        self._upgrades(floor if self.options.l2_compete else 0.0, walls=False)
        self._evidence()
        for row in ranked:  # then whatever still fits
            self._add(row, "skeleton", "l1")
        self._upgrades(0.0, walls=True)
        full_files = self._promote()
        return self._selection(full_files)

    def _spread(self, ranked: list[int], limit: float) -> None:
        """Until `spread_files` files are shown: a skeleton of the best row that fits in each next-ranked
        file not yet shown, while rows score at least `spread_floor` of the best (within `limit`)."""
        shown = {int(self.catalog.path_of[r]) for r in self.picks}
        floor = self.options.spread_floor * float(self.ranking.scores[ranked[0]]) if ranked else 0.0
        for row in ranked:
            if len(shown) >= self.options.spread_files or self.ranking.scores[row] < floor:
                return
            path = int(self.catalog.path_of[row])
            if path not in shown and self._summary(row, "l1", limit):
                shown.add(path)

    def _diffuse(self, core: list[int]) -> dict[int, int]:
        """L2: rows defining what the core references (capped), with how many core rows need each."""
        core_set = set(core)
        needed: dict[int, int] = {}
        for row in core:
            for symbol in self.catalog.referenced(row).tolist():
                targets = self.catalog.defining(symbol)
                if not 0 < len(targets) <= self.options.max_definitions:
                    continue
                for target in targets.tolist():
                    if (
                        not self.ranking.in_scope(target)
                        or self.ranking.role(target) not in self.ranking.wanted
                    ):
                        continue
                    if target not in core_set and not self._related(row, target):
                        needed[target] = needed.get(target, 0) + 1
        order = sorted(needed, key=lambda r: (-needed[r], -self.ranking.scores[r], r))
        return {r: needed[r] for r in order[: self.options.max_dependencies]}

    def _evidence(self) -> None:
        """Tests exercising the selected bodies (see the module docstring); none when the ranking
        already admits tests, or the index recorded no roles."""
        roles = self.ranking.roles
        if roles is None or "test" in self.ranking.wanted or self.options.evidence_share <= 0:
            return
        test = ROLES.index("test")
        hits: dict[int, int] = {}
        for row in sorted(r for r, p in self.picks.items() if p.mode == "body"):
            for symbol in self.catalog.defined_by(row).tolist():
                users = self.catalog.users_of(symbol)
                if not 0 < len(users) <= _EVIDENCE_SYMBOLS:
                    continue
                for user in users.tolist():
                    if roles[user] == test and self.ranking.in_scope(user):
                        hits[user] = hits.get(user, 0) + 1
        if not hits:
            return
        limit = self.used + self.options.evidence_share * self.budget
        self._load(hits)
        lexical = self.ranking.lexical
        for row in sorted(hits, key=lambda r: (-hits[r], -lexical[r], r)):
            self._add(row, "body", "evidence", limit=limit)

    def _dependency(self, row: int, keep: set[str], limit: float | None = None) -> None:
        """An L2 row: its body when the policy keeps it and it is free (`_free`, its skeleton when the
        body does not fit), else its skeleton (`_summary`: capped, or nothing, when that is a wall)."""
        mode: Mode = "body" if self.catalog.ids[row] in keep else "skeleton"
        if mode == "body" and (self._wall(self._tokens(row, "body") or 0) or not self._free(row)):
            mode = "skeleton"  # its body competes with the others' in the upgrades
        if mode == "skeleton":
            self._summary(row, "l2", limit)
        elif not self._add(row, "body", "l2", limit):
            self._add(row, "skeleton", "l2", limit)

    def _free(self, row: int) -> bool:
        """Whether an L2 body is taken at once: a type's shape, or a body costing about its
        skeleton; other bodies compete with L1's on their score in the upgrades
        (`SelectOptions.l2_compete`)."""
        if not self.options.l2_compete:
            return True
        candidate = self.candidate(row)
        if candidate is None:
            return False
        cheap = candidate.body_tokens <= _CHEAP_BODY * candidate.skeleton_tokens + 20
        return cheap or candidate.kind in TYPE_KINDS

    def _summary(self, row: int, why: Why, limit: float | None = None) -> bool:
        """A row's skeleton; when that is a wall and the intent does not name the row, its capped
        skeleton (`_capped`) or nothing."""
        tokens = self._tokens(row, "skeleton")
        if tokens is None:
            return False
        if not self._skeleton_wall(tokens) or row in self.ranking.mentioned:
            return self._add(row, "skeleton", why, limit)
        return self.options.cap_skeletons and self._capped(row, why, limit)

    def _capped(self, row: int, why: Why, limit: float | None) -> bool:
        """A class skeleton within `skeleton_wall_share` of the budget: its members best-ranked
        first while the capped text (counted exactly) fits, the rest counted in one comment line
        (`pagedctx.host.select.capped`); nothing when not even one member fits."""
        if row in self.picks or self._covered(row):
            return False
        ranked = self._children(row)
        if not ranked:
            return False
        self._load(ranked)
        parent = self._chunks[row]
        members = direct_members(parent, [self._chunks[r] for r in ranked if r in self._chunks])
        ids = {m.id for m in members}
        cap = self.options.skeleton_wall_share * self.budget
        shown: list[str] = []
        best: tuple[str, int] | None = None
        for member in ranked:
            if self.ranking.scores[member] <= 0:
                break  # ranked: the rest are unrelated to the intent, counted
            if member in self.picks or (chunk := self._chunks.get(member)) is None or chunk.id not in ids:
                continue  # a member already shown on its own is not repeated
            text = capped_skeleton(parent, members, {*shown, chunk.id})
            if text is None:
                return False
            tokens = self.index.counter.count(text)
            if tokens <= cap:
                shown.append(chunk.id)
                best = (text, tokens)
        if best is None:
            return False
        listed = [m.id for m in members if m.id in shown]
        capped = CappedSkeleton(members=listed, more=len(members) - len(listed))
        return self._add(row, "skeleton", why, limit, tokens=best[1], capped=capped)

    def _skeleton_wall(self, tokens: int) -> bool:
        """Whether a skeleton (a summary) would take more than its share of the budget."""
        return tokens > self.options.skeleton_wall_share * self.budget

    def _wall(self, tokens: int) -> bool:
        """Whether one item of this size would take more than its share of the budget."""
        return tokens > self.options.wall_share * self.budget

    def _children(self, row: int) -> list[int]:
        """The chunks directly inside a row (a class's methods), best-ranked first."""
        rows = self.catalog.rows_in_file(int(self.catalog.path_of[row])).tolist()
        inside = [r for r in rows if int(self.catalog.parent_of[r]) == row]
        return sorted(inside, key=lambda r: (-self.ranking.scores[r], r))

    def _fit_core(self, core: list[int], cap: float) -> None:
        core_body = 0
        for position, row in enumerate(core):
            candidate = self.candidate(row)
            if candidate is None:
                continue
            children = self._children(row) if self._wall(candidate.body_tokens) else []
            if children:  # a wall of a class: its best members' bodies, then its skeleton
                self._load(children)
                for child in children:
                    tokens = self._tokens(child, "body")
                    relevant = self.ranking.scores[child] >= _MEMBER_RATIO * self.ranking.scores[row]
                    if tokens is None or self._wall(tokens) or not relevant:
                        continue
                    if core_body + tokens <= cap and self._add(child, "body", "l1"):
                        core_body += tokens
                self._summary(row, "l1")
                continue
            fits_share = core_body + candidate.body_tokens <= cap or position == 0
            if fits_share and self._add(row, "body", "l1"):
                core_body += candidate.body_tokens
            else:
                self._add(row, "skeleton", "l1")

    # --- bookkeeping ----------------------------------------------------------------------------

    def _ancestors(self, row: int) -> Iterable[int]:
        parent = int(self.catalog.parent_of[row])
        seen = 0
        while parent >= 0 and seen < 64:
            yield parent
            parent = int(self.catalog.parent_of[parent])
            seen += 1

    def _related(self, a: int, b: int) -> bool:
        return a in self._ancestors(b) or b in self._ancestors(a)

    def _descendants(self, row: int) -> list[int]:
        rows = self.catalog.rows_in_file(int(self.catalog.path_of[row])).tolist()
        return [r for r in rows if r != row and row in self._ancestors(r)]

    def _covered(self, row: int) -> bool:
        return any((p := self.picks.get(a)) is not None and p.mode == "body" for a in self._ancestors(row))

    def _tokens(self, row: int, mode: Mode) -> int | None:
        candidate = self.candidate(row)
        if candidate is None:
            return None
        return candidate.body_tokens if mode == "body" else candidate.skeleton_tokens

    def _add(
        self,
        row: int,
        mode: Mode,
        why: Why,
        limit: float | None = None,
        *,
        tokens: int | None = None,
        capped: CappedSkeleton | None = None,
    ) -> bool:
        """Pick a row in a mode if it is new, not inside a body already shown, and fits (`tokens`:
        the exact count of what is shown when it is not the stored one, a capped skeleton's)."""
        if row in self.picks or self._covered(row):
            return False
        tokens = self._tokens(row, mode) if tokens is None else tokens
        if tokens is None:
            return False
        inside = [r for r in self._descendants(row) if r in self.picks] if mode == "body" else []
        refund = sum(self.picks[r].tokens for r in inside)
        if self.used - refund + tokens > min(self.budget, self.budget if limit is None else limit):
            return False
        for r in inside:
            del self.picks[r]
        self.picks[row] = _Pick(mode, why, tokens, capped)
        self.used += tokens - refund
        return True

    def _upgrades(self, floor: float, *, walls: bool) -> None:
        """Bodies for the skeletons shown, best score first, while they fit; a skeleton scoring
        under `floor`, or whose body is a wall (unless `walls`), keeps its place until more
        skeletons had theirs."""
        for row in sorted(self.picks, key=lambda r: (-self.ranking.scores[r], r)):
            pick = self.picks.get(row)
            if pick is None or pick.mode != "skeleton" or self.ranking.scores[row] < floor:
                continue
            if walls or not self._wall(self._tokens(row, "body") or 0):
                self._upgrade(row)

    def _upgrade(self, row: int) -> None:
        if self._wall(self._tokens(row, "body") or 0) and self._children(row):
            return  # a class's wall: its members come in on their own
        pick = self.picks[row]
        del self.picks[row]
        self.used -= pick.tokens
        if not self._add(row, "body", pick.why):
            self.picks[row] = pick
            self.used += pick.tokens

    def _promote(self) -> list[SelectedFile]:
        """Include whole the files mostly shown in body mode, while they fit."""
        by_file: dict[int, list[int]] = {}
        for row in self.picks:
            by_file.setdefault(int(self.catalog.path_of[row]), []).append(row)
        order = sorted(by_file, key=lambda p: (-sum(self.ranking.scores[r] for r in by_file[p]), p))
        promoted: list[SelectedFile] = []
        for path_index in order:
            rows = self.catalog.rows_in_file(path_index).tolist()
            shown = sum(
                1 for r in rows if (self.picks.get(r) and self.picks[r].mode == "body") or self._covered(r)
            )
            if not rows or shown / len(rows) <= self.options.promote_density:
                continue
            if self.catalog.role_of_path(path_index) not in self.ranking.wanted:
                continue  # evidence stays within its share: a test file is not taken whole
            file_tokens = int(self.catalog.file_tokens[path_index])
            current = sum(self.picks[r].tokens for r in by_file[path_index])
            if self.used - current + file_tokens > self.budget:
                continue
            for r in by_file[path_index]:
                self.picks[r] = _Pick("body", "promoted", 0)
            self.used += file_tokens - current
            promoted.append(
                SelectedFile(
                    path=self.catalog.paths[path_index],
                    tokens=file_tokens,
                    role=self.catalog.role_of_path(path_index),
                )
            )
        return sorted(promoted, key=lambda f: f.path)

    def _selection(self, full_files: list[SelectedFile]) -> Selection:
        chunks: list[SelectedChunk] = []
        for row, pick in self.picks.items():
            chunk = self._chunks[row]
            chunks.append(
                SelectedChunk(
                    id=chunk.id,
                    path=chunk.path,
                    qualname=chunk.qualname,
                    kind=chunk.kind.value,
                    start_line=chunk.start_line,
                    end_line=chunk.end_line,
                    mode=pick.mode,
                    tokens=pick.tokens,
                    score=round(float(self.ranking.scores[row]), 4),
                    why=pick.why,
                    role=self.catalog.role_of_path(int(self.catalog.path_of[row])),
                    capped=pick.capped,
                )
            )
        chunks.sort(key=lambda c: (c.path, c.start_line, c.id))
        total = sum(f.tokens for f in full_files) + sum(c.tokens for c in chunks)
        if total != self.used or total > self.budget:  # pragma: no cover - an invariant, not an input
            raise AssertionError(f"selection accounting broke: {total} tokens vs used {self.used}")
        return Selection(
            budget=self.budget, tokens=total, policy=self.policy.name, full_files=full_files, chunks=chunks
        )
