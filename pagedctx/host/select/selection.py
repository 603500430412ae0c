"""What diamond selection takes and gives (S5): options, candidates, and the selection contract.

`Selection.contract()` is the JSON form others depend on (kept exactly):
`{"budget", "tokens", "policy", "full_files": [{"path", "tokens", "role"}], "chunks": [{"id", "path",
"qualname", "kind", "start_line", "end_line", "mode", "tokens", "score", "why", "role"}]}`. Paths are
relative to the index base, lines 1-based and inclusive. `tokens` is the exact count of what the
selection shows: the sum of its full files and of its chunks' bodies or skeletons. A chunk whose
file was promoted to a full file stays listed with `why: "promoted"` and `tokens: 0`: its text is
inside the full file, counted once there. `role` is what the chunk's file is for, as the index
recorded it (source, test, example, docs, vendored, generated); `why: "evidence"` marks a
test taken after the source because it exercises a selected definition. A class skeleton shown
capped (over `skeleton_wall_share` of the budget) carries
`"capped": {"members": [ids shown, in source order], "more": N}`; the key is absent otherwise.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Candidate", "CappedSkeleton", "SelectOptions", "SelectedChunk", "SelectedFile", "Selection"]

Mode = Literal["body", "skeleton"]
Why = Literal["l1", "l2", "promoted", "evidence"]


class SelectOptions(BaseModel):
    """Knobs of the pipeline; the defaults are what `pagedctx select` uses (its shares of the budget
    are the budget's own: `pagedctx.protocol.budget.Budget`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_core: int = Field(default=8, ge=1, description="L1: at most this many core chunks")
    max_candidates: int = Field(default=300, ge=1, description="L0/L1: ranked chunks considered")
    max_dependencies: int = Field(default=40, ge=0, description="L2: at most this many pulled in")
    max_definitions: int = Field(
        default=4, ge=1, description="L2: a symbol defined in more places than this is not followed"
    )
    promote_density: float = Field(
        default=0.5, gt=0, le=1, description="a file whose selected share passes this is included whole"
    )
    wall_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="one item over this share of the budget is a wall: a class's members come in instead "
        "of its body, an L2 body becomes its skeleton, a skeleton this big is left out",
    )
    skeleton_wall_share: float = Field(
        default=0.1,
        gt=0,
        le=1,
        description="a skeleton (a summary) over this share of the budget is a wall: left out unless named",
    )
    evidence_share: float = Field(
        default=0.1, ge=0, le=1, description="of the budget: tests exercising the selected code, after it"
    )
    cap_skeletons: bool = Field(
        default=False,
        description="a class skeleton over `skeleton_wall_share` is shown capped (its members most related "
        "to the intent, the rest counted) instead of left out; off by default: on bench/localization it "
        "was level to 1 point lower (docs/select.md)",
    )
    own_terms: bool = Field(
        default=False,
        description="rank by a definition's own words: a term matched only through the enclosing class or "
        "the path counts half (rank.py); off by default: on bench/localization it was lower at 1k-2k "
        "(docs/select.md)",
    )
    flow: bool | None = Field(
        default=None,
        description="request flow: callees of an entry point the intent reaches x1.5 (rank.py); None (the "
        "default): on from `FLOW_MIN_BUDGET` tokens, where the budget has room beyond the lexical core (on "
        "bench/localization it put a repository below the reference at 2k, docs/select.md)",
    )
    spread_files: int = Field(
        default=16,
        ge=0,
        description="before the other skeletons, one skeleton (its best chunk that fits) for each next-"
        "ranked file not yet shown until this many files are, among rows scoring at least `spread_floor` "
        "of the best: the files the intent reaches are named; 0: off",
    )
    spread_floor: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="of the best score: a file whose best row scores under it gets no spread skeleton",
    )
    file_roles: bool = Field(default=True, description="spend on source; False ranks every role")
    l2_compete: bool = Field(
        default=True,
        description="L2 bodies the policy keeps (other than types and bodies about the size of their "
        "skeleton) start as skeletons and compete with L1's for an upgrade on their score",
    )


class Candidate(BaseModel):
    """A chunk as the L1 and L2.5 deciders see it: its skeleton, its sizes, the baseline's score."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    path: str
    qualname: str
    kind: str
    skeleton: str
    score: float
    body_tokens: int
    skeleton_tokens: int
    mentioned: bool = Field(default=False, description="the intent names this definition")
    referenced_by: int = Field(default=0, description="L2: how many core chunks reference it")


class SelectedFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    tokens: int
    role: str = "source"


class CappedSkeleton(BaseModel):
    """A class skeleton shown capped: the members it lists, in source order, and
    how many it leaves out (`pagedctx.host.select.capped`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    members: list[str]
    more: int = Field(ge=0)


class SelectedChunk(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    path: str
    qualname: str
    kind: str
    start_line: int
    end_line: int
    mode: Mode
    tokens: int
    score: float
    why: Why
    role: str = "source"
    capped: CappedSkeleton | None = None


class Selection(BaseModel):
    """The selected context: full files and chunks, within `budget` tokens (S5 output)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    budget: int
    tokens: int
    policy: str
    full_files: list[SelectedFile]
    chunks: list[SelectedChunk]

    def contract(self) -> dict[str, Any]:
        """The JSON contract (see the module docstring)."""
        data = self.model_dump(mode="json")
        for chunk in data["chunks"]:  # `capped` is said only of the skeletons shown capped
            if chunk["capped"] is None:
                del chunk["capped"]
        return data
