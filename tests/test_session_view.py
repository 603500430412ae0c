"""`pagedctx view` (issue 6 item 8; P3, P6, P7): a session trace drawn as one self-contained HTML page."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lxml.html
import numpy as np
import pytest
from browser_support import drawn_page
from sample_repo import write_repo
from session_factory import DOC, session, write_dialogue
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.host.records.trace import PageLine, RoundEvent, read_trace, snapshots
from pagedctx.host.records.trace_html import MAX_DRAWN, render_html
from pagedctx.host.roles.baseline import baseline_worker
from pagedctx.host.session.setup import SessionInputs
from pagedctx.protocol.paged_context.context import TraceStep

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
HOSTILE = "</div><script>alert(1)</script>&"
VIEW_COLOURS = {"Summary": (0x9A, 0xA5, 0xB1), "Detail": (0xE0, 0xA0, 0x30), "Unpacked": (0x3A, 0x9D, 0x5D)}


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """A real trace: a small baseline session whose first worker output is malformed (a fault round).

    1,000 tokens: tight enough that the last view holds pages in all three views (the tokens a
    round leaves unused go to turns in Detail, issue 19)."""
    doc = tmp_path / "ops.md"
    doc.write_text(DOC)
    inputs = SessionInputs(
        repos=(write_repo(tmp_path / "repo"),),
        dialogues=(write_dialogue(tmp_path / "chat.jsonl"),),
        docs=(doc,),
    )
    outputs = iter(['Consult("unfinished'])

    def worker(xml: str, text: str, explored: Sequence[str], final: bool) -> str:
        return next(outputs, "") or baseline_worker(xml, text, explored=explored, final=final)

    _, result = session(inputs, tmp_path, "which port does staging listen on now", budget=1000, worker=worker)
    assert result.answer is not None
    return tmp_path / "trace.jsonl"


def line(
    page_id: str, place: str, *, parent: str | None = None, view: str = "Summary", **extra: object
) -> PageLine:
    fields: dict[str, object] = {
        "id": page_id,
        "type": "Original",
        "view": view,
        "depth": 0,
        "parent": parent,
        "place": place,
        "origin": "History",
        "timestamp": T0,
        "draft": False,
        "title": f"page {page_id}",
    }
    fields.update(extra)
    return PageLine.model_validate(fields)


def event(pages: list[PageLine], **extra: object) -> RoundEvent:
    fields: dict[str, object] = {
        "session": "s1",
        "round": 0,
        "time": T0 + timedelta(days=3),
        "policy": "baseline",
        "input": "go on",
        "intent": "go on",
        "xml_sha256": "0" * 64,
        "xml_tokens": 90,
        "budget": 100,
        "state_digest": "1" * 64,
        "pages": pages,
    }
    fields.update(extra)
    return RoundEvent.model_validate(fields)


def html_root(page: str) -> lxml.html.HtmlElement:
    """The parsed page (lxml-stubs type `document_fromstring` as a plain element)."""
    root = lxml.html.document_fromstring(page)
    assert isinstance(root, lxml.html.HtmlElement)
    return root


def rounds_of(page: str) -> list[lxml.html.HtmlElement]:
    root = html_root(page)
    return list(root.find_class("round"))


def node_ids(section: lxml.html.HtmlElement) -> list[str]:
    return [n.get("data-page-id") for n in section.find_class("node")]


def test_every_round_draws_every_page_once_in_its_tree(trace: Path) -> None:
    """P3, issue 6 item 8: one section per round, one `.node` per page, children nested in parents."""
    events = list(read_trace(trace))
    assert len(events) >= 2 and any(e.faults for e in events)
    page = render_html(events)
    sections = rounds_of(page)
    assert len(sections) == len(events)
    assert [s.get("hidden") is None for s in sections] == [False] * (len(events) - 1) + [True]
    assert [e.snapshot for e in events] == ["full"] + ["delta"] * (len(events) - 1)
    for section, (ev, pages) in zip(sections, snapshots(events), strict=True):
        ids = node_ids(section)
        assert sorted(ids) == sorted(p.id for p in pages) and len(set(ids)) == len(ids)
        nodes = {n.get("data-page-id"): n for n in section.find_class("node")}
        for p in pages:
            node = nodes[p.id]
            assert f"view-{p.view.lower()}" in node.classes and node.get("data-view") == p.view
            assert node.find_class("id")[0].text_content() == p.id
            assert node.find_class("title")[0].text_content() == (p.title or "(no summary)")
            if p.parent is not None:
                enclosing = next(a for a in node.iterancestors() if "node" in a.classes)
                assert enclosing.get("data-page-id") == p.parent
            elif p.place == "flow":
                band = next(a for a in node.iterancestors() if "band" in a.classes)
                assert "flow" in band.classes
        # The timeline (P7): a dot per page and CURRENT_TIME at the event's time.
        assert sorted(c.get("data-ref") for c in section.iter("circle")) == sorted(p.id for p in pages)
        stamp = ev.time.isoformat().replace("+00:00", "Z")
        assert f"CURRENT_TIME {stamp}" in section.text_content()
        # The header: intent, tokens against the budget, steps with their status, faults.
        text = section.text_content()
        assert ev.intent in text and f"{ev.xml_tokens} / {ev.budget} tokens" in text
        assert len(section.find_class("step")) == len(ev.steps)
        for f in ev.faults:
            assert f["message"] in text
    assert events[-1].answer is not None and events[-1].answer in sections[-1].text_content()
    faulted = next(s for s, e in zip(sections, events, strict=True) if e.faults)
    assert faulted.find_class("status-fault")


def test_places_background_hidden_drafts_and_orphans() -> None:
    """P3, P6: flow roots and children, a Background_Context band, hidden pages folded, each page once."""
    pages = [
        line("a001", "flow", view="Unpacked", type="Consolidated"),
        line("a002", "child", parent="a001", view="Detail"),
        line("a003", "child", parent="a002"),
        line("b001", "background", timestamp=T0 - timedelta(days=9)),
        line("c001", "hidden", draft=True, view="Detail"),
        line("d001", "child", parent="gone"),
        line("e001", "flow", origin=None),
    ]
    root = html_root(render_html([event(pages)]))
    nodes = {n.get("data-page-id"): n for n in root.find_class("node")}
    assert sorted(nodes) == sorted(p.id for p in pages)

    def band_of(page_id: str) -> set[str]:
        return set(next(a for a in nodes[page_id].iterancestors() if "band" in a.classes).classes)

    assert "flow" in band_of("a003") and "background" in band_of("b001")
    assert "hidden" in band_of("c001") and "hidden" in band_of("d001")
    assert next(a for a in nodes["a003"].iterancestors() if "node" in a.classes).get("data-page-id") == "a002"
    hidden = root.find_class("hidden")[0]
    assert (
        hidden.tag == "details" and hidden.get("open") is None and "Hidden pages (2)" in hidden.text_content()
    )
    assert "draft" in nodes["c001"].classes and "draft" in nodes["c001"].find_class("draft-mark")[0].text
    assert "no origin" in nodes["e001"].text_content()
    # Flow roots on the timeline order (timestamp, then id), as in <Linear_Flow> (P6).
    flow = root.find_class("flow")[0]
    assert [n.get("data-page-id") for n in flow.find_class("node")] == ["a001", "a002", "a003", "e001"]


def test_hostile_text_is_escaped_everywhere() -> None:
    """Issue 6 item 8: titles, intents, answers and faults are data; nothing in them becomes markup."""
    odd = "nul\x00 bell\x07 surrogate\ud800 end"
    pages = [
        line("a001", "flow", title=HOSTILE),
        line("a002", "child", parent="a001", title=f'" onmouseover="alert(2)" x=\'{HOSTILE}'),
        line("a003", "flow", title=odd, origin=HOSTILE, type=HOSTILE, view=HOSTILE),
    ]
    ev = event(
        pages,
        session=HOSTILE,
        intent=HOSTILE,
        input=HOSTILE + "!",
        policy=HOSTILE,
        answer=HOSTILE,
        worker_output=HOSTILE,
        actions=[{"action": HOSTILE, "reason": HOSTILE, "id": HOSTILE, HOSTILE: [HOSTILE]}],
        steps=[TraceStep(action="Fault", target=HOSTILE, reason=HOSTILE, status="fault")],
        faults=[{"message": HOSTILE}, {"code": HOSTILE}],
        plan={"intent_focus": HOSTILE},
    )
    page = render_html([ev], source=HOSTILE)
    page.encode("utf-8")  # strict: no lone surrogate reaches the file
    assert "<script>alert" not in page and "\x00" not in page
    root = html_root(page)
    scripts = list(root.iter("script"))
    assert len(scripts) == 1 and "alert" not in (scripts[0].text or "")
    assert not [el for el in root.iter() if any(str(name).startswith("on") for name in el.attrib)]
    nodes = {n.get("data-page-id"): n for n in root.find_class("node")}
    assert sorted(nodes) == ["a001", "a002", "a003"]
    assert nodes["a001"].find_class("title")[0].text_content() == HOSTILE
    assert nodes["a001"].get("title") == HOSTILE
    assert nodes["a002"].get("title") == f'" onmouseover="alert(2)" x=\'{HOSTILE}'
    assert nodes["a003"].find_class("title")[0].text_content() == r"nul\u0000 bell\u0007 surrogate\ud800 end"
    assert root.find_class("answer")[0].text_content() == HOSTILE
    title = root.find(".//title")
    assert title is not None and title.text == f"pagedctx session {HOSTILE}"


def test_the_page_is_self_contained_and_deterministic(trace: Path) -> None:
    """Issue 6 item 8: no network, no external asset; the same trace gives the same bytes."""
    page = render_html(read_trace(trace), source="trace.jsonl")
    assert page == render_html(read_trace(trace), source="trace.jsonl")
    root = html_root(page)
    assert not [el for el in root.iter() if {"src", "href", "srcset", "action"} & set(el.attrib)]
    assert not list(root.iter("link", "iframe", "img", "object", "embed"))
    style = "".join(s.text or "" for s in root.iter("style"))
    assert "url(" not in style and "@import" not in style
    csp = root.xpath("//meta[@http-equiv='Content-Security-Policy']/@content")
    assert isinstance(csp, list) and csp and "default-src 'none'" in str(csp[0])
    with pytest.raises(ValueError, match="at least one"):
        render_html([])


def test_cli_writes_next_to_the_trace_and_reports_bad_traces(trace: Path, tmp_path: Path) -> None:
    """Issue 6 item 8: `pagedctx view TRACE [-o FILE]` prints the path; a bad trace exits 2."""
    runner = CliRunner()
    result = runner.invoke(app, ["view", str(trace)])
    assert result.exit_code == 0, result.output
    default = trace.with_suffix(".html")
    assert result.stdout.strip() == str(default) and default.is_file()
    out = tmp_path / "out" / "session.html"
    out.parent.mkdir()
    result = runner.invoke(app, ["view", str(trace), "-o", str(out)])
    assert result.exit_code == 0 and result.stdout.strip() == str(out)
    assert out.read_bytes() == default.read_bytes()
    assert len(rounds_of(out.read_text())) == len(list(read_trace(trace)))

    missing = runner.invoke(app, ["view", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2 and "cannot read trace" in missing.stderr
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(trace.read_text().splitlines()[0] + "\n{not json\n")
    result = runner.invoke(app, ["view", str(damaged)])
    assert result.exit_code == 2 and f"{damaged}:2: not JSON" in result.stderr
    assert not damaged.with_suffix(".html").exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    result = runner.invoke(app, ["view", str(empty)])
    assert result.exit_code == 2 and "no round events" in result.stderr
    result = runner.invoke(app, ["view", str(trace), "-o", str(trace)])
    assert result.exit_code == 2 and "overwrite the trace" in result.stderr
    result = runner.invoke(app, ["view", str(trace), "-o", str(tmp_path / "no-dir" / "x.html")])
    assert result.exit_code == 2 and "cannot write" in result.stderr


@pytest.mark.slow
@pytest.mark.integration
def test_headless_chromium_renders_the_page(trace: Path, tmp_path: Path) -> None:
    """Issue 6 item 8 (P3, P7): a real browser draws the boxes in their view colours and runs the stepper."""
    events = list(read_trace(trace))
    hostile = event([line("a001", "flow", title=HOSTILE, view="Detail")])
    rounds = [hostile, *events]  # the last (real) round is the one shown first
    page = tmp_path / "session.html"
    page.write_text(render_html(rounds), encoding="utf-8")
    pixels, dumped = drawn_page(page, tmp_path)
    pages = [pages for _, pages in snapshots(rounds)]
    shown = {p.view for p in pages[-1]}
    assert shown == set(VIEW_COLOURS)
    for view in shown:  # the legend alone has 144 pixels of each; the boxes and dots add more
        assert (pixels == np.array(VIEW_COLOURS[view])).all(axis=2).sum() > 400, view
    dom = html_root(dumped)
    assert dom.body.get("data-js") == "ready"  # the inline script ran under the page's CSP
    sections = list(dom.find_class("round"))
    assert [s.get("hidden") is None for s in sections] == [False] * len(events) + [True]
    for section, listed in zip(sections, pages, strict=True):
        assert sorted(node_ids(section)) == sorted(p.id for p in listed)
    assert len(list(dom.iter("script"))) == 1
    assert sections[0].find_class("node")[0].find_class("title")[0].text_content() == HOSTILE


def test_a_huge_session_is_drawn_by_what_matters() -> None:
    """P3 at scale: past MAX_DRAWN pages a round draws the shown pages, their ancestors and the latest."""
    pages = [
        line(f"{n:08x}", "child", parent="0000000a", timestamp=T0 + timedelta(minutes=n))
        for n in range(16, 4000)
    ]
    pages += [line("0000000a", "flow", view="Unpacked", type="Consolidated")]
    pages += [line("0000000b", "child", parent="00000064", view="Detail")]  # under page 100
    page = render_html([event(pages)])
    section = rounds_of(page)[0]
    ids = node_ids(section)
    assert len(ids) == MAX_DRAWN and len(set(ids)) == len(ids)
    assert {"0000000a", "0000000b", "00000064", f"{3999:08x}"} <= set(ids)
    assert f"Logic tree ({len(pages)} pages; {len(pages) - MAX_DRAWN} not drawn" in page
