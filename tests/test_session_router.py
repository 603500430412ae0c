"""Router addressing (P8): distinct pages, precision across wordings."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pages_factory import said
from pydantic import ValidationError
from system_needs import needs_wordnet

from pagedctx.host.models.factory import RoleSpec
from pagedctx.host.models.recorded import ScriptedBackend
from pagedctx.host.models.runner import ModelModuleRunner
from pagedctx.host.roles.model_backed import ModelRouter
from pagedctx.host.roles.router import RouterConfig, address
from pagedctx.host.roles.transport import LocalRouter, PlanRequest
from pagedctx.host.text.expanded_search import ExpandedSearch
from pagedctx.host.text.intent import Intent
from pagedctx.host.text.page_search import PageSearch
from pagedctx.pages import SessionState

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def turns(*texts: str) -> SessionState:
    return said(*enumerate(texts), start=T0)


def test_a_repeated_remark_is_addressed_once_as_its_latest_instance() -> None:
    """P8 precision: copies of a remark add tokens and no evidence; the latest (P7) stands for them."""
    state = turns(
        "The car needs new tyres before winter.",
        "I sold the old car and got a Volvo instead.",
        "The car needs new tyres before winter.",
        "Lunch at the ramen place on Friday?",
        "The car needs new tyres before winter.",
    )
    search = PageSearch()
    search.add_pages(state.pages.values())
    plan = address(
        state, intent=Intent.of("which car do I drive"), search=search, config=RouterConfig(max_hot=3)
    )
    addressed = [*plan.hot, *plan.indexed]
    tyres = [pid for pid in addressed if "tyres" in state.pages[pid].summary]
    assert tyres == ["00000005"]  # the latest of the three copies
    assert "00000002" in addressed
    assert len(addressed) == len(set(addressed)) and "00000004" not in addressed


@pytest.fixture
def expanded() -> ExpandedSearch:
    search = ExpandedSearch()
    if not search.lexicon.available:
        pytest.skip("WordNet (Debian wordnet-base) is not installed")
    return search


@needs_wordnet
def test_precision_counts_a_related_word_as_half_a_match(expanded: ExpandedSearch) -> None:
    """P8 precision against summaries, across wordings: "lives" answers "reside", "sister" "sibling"."""
    state = turns(
        "My sibling resides in Porto.",
        "My sister Ines lives in Porto now.",
        "The flight leaves at 9:05.",
    )
    expanded.add_pages(state.pages.values())
    expanded.set_query("Remind me, where does my sibling reside these days?")
    assert expanded.coverage("00000001") == 1.0
    assert expanded.coverage("00000002") == 0.5
    assert expanded.coverage("00000003") == 0.0
    plan = address(
        state,
        intent=Intent.of("where does my sibling reside"),
        search=expanded,
        config=RouterConfig(max_hot=2),
    )
    assert set(plan.hot) == {"00000001", "00000002"}


def router_answer(hot: list[str], indexed: list[str]) -> str:
    data = {
        "intent_focus": "which car the user drives now",
        "hot": hot,
        "indexed": indexed,
        "pblocks": [],
        "recall_keywords": ["car"],
        "rationale": "the latest car statement",
    }
    return json.dumps(
        {"ok": True, "meta": {"confidence": 0.8, "risk": "low", "explain": "chosen"}, "data": data}
    )


def test_a_router_model_decides_hot_and_indexed_among_what_was_recalled() -> None:
    """P8 on a model: stage one recalls, the `router` module decides; ids not offered are refused."""
    state = turns(
        "The car needs new tyres before winter.",
        "I sold the old car and got a Volvo instead.",
        "Lunch at the ramen place on Friday?",
    )
    backend = ScriptedBackend([router_answer(["00000002"], ["00000001"])])
    router = ModelRouter(ModelModuleRunner(backend), LocalRouter())
    router.sync([], list(state.pages.values()))
    plan = router.plan(
        state, PlanRequest(intent=Intent.of("which car do I drive"), config=RouterConfig(max_hot=2))
    )
    assert plan.hot == ("00000002",) and plan.indexed == ("00000001",) and plan.policy == "scripted:scripted"
    offered = [page["id"] for page in json.loads(backend.requests[0].user)["pages"]]
    assert set(offered) <= set(state.pages) and "00000002" in offered
    wrong = ScriptedBackend([router_answer(["deadbeef"], [])] * 2)
    stray = ModelRouter(ModelModuleRunner(wrong), router.local)
    refused = stray.plan(state, PlanRequest(intent=Intent.of("which car do I drive")))
    assert "not offered" in str(refused.fault) and refused.policy == "baseline (router fault)"
    assert wrong.requests[1].attempt == 2 and "deadbeef" in wrong.requests[1].user


def test_a_router_model_that_declines_leaves_the_baseline_plan_and_its_fault_never_a_crash() -> None:
    """Issue 32 (P8, M2): a valid failure envelope from the router model (a decline) gives stage
    one's own plan, named `baseline (router fault)`, with the fault the loop records as a step; it
    was a KeyError ('data') and a traceback, then a round that revealed nothing."""
    state = turns("The car needs new tyres before winter.", "I sold the old car and got a Volvo instead.")
    decline = json.dumps(
        {
            "ok": False,
            "meta": {"confidence": 0.2, "risk": "low", "explain": "unclear"},
            "error": {"code": "NEEDS_CLARIFICATION", "message": "which car?"},
        }
    )
    router = ModelRouter(ModelModuleRunner(ScriptedBackend([decline])), LocalRouter())
    router.sync([], list(state.pages.values()))
    asked = PlanRequest(intent=Intent.of("which car do I drive"))
    plan = router.plan(state, asked)
    assert plan.fault is not None and plan.fault.startswith("BACKEND_ERROR: ")
    assert "declined: NEEDS_CLARIFICATION: which car" in plan.fault
    base = router.local.plan(state, asked)
    assert plan.policy == f"{base.policy} (router fault)" and plan.policy == "baseline (router fault)"
    assert plan.model_copy(update={"policy": base.policy, "fault": None}) == base


def test_a_router_model_is_offered_only_as_many_pages_as_its_role_says() -> None:
    """Issue 32: `offered` in a role spec bounds the recalled pages a router model reads (a 135M
    model on one CPU thread reads a 4,000-token prompt for a minute); the best-recalled come first."""
    state = turns(
        "The car needs new tyres before winter.",
        "I sold the old car and got a Volvo instead.",
        "Lunch at the ramen place on Friday?",
    )
    backend = ScriptedBackend([router_answer(["00000002"], [])])
    router = ModelRouter(ModelModuleRunner(backend), LocalRouter(), offered=1)
    router.sync([], list(state.pages.values()))
    asked = PlanRequest(intent=Intent.of("which car do I drive now, the Volvo"))
    best = next(iter(router.local.plan(state, asked).relevance))
    router.plan(state, asked)
    offered = [page["id"] for page in json.loads(backend.requests[0].user)["pages"]]
    assert offered == [best]
    assert RoleSpec(backend="openai", model="m", offered=3).offered == 3
    with pytest.raises(ValidationError):
        RoleSpec(backend="openai", model="m", offered=0)
