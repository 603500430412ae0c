"""Untrusted text in the three HTML pages (`pagedctx view`, the replay report, the evolve timeline;
P3, D3, D4): whatever a page title, model output, file path or error message holds (`</script>`,
an `onerror` attribute, template syntax, quotes, control characters) comes out as text. The page
has the same elements and attributes as with plain text in its place, shows the text as written
(characters HTML cannot carry in backslash form), runs no script but the view's own, and its
Content-Security-Policy is unchanged."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import lxml.html
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedctx.evolve.records import Attempt, AttemptTokens, EvolveMeta, EvolveSettings, Stop
from pagedctx.evolve.task import EvolveTask
from pagedctx.evolve.timeline import timeline_html
from pagedctx.host.records.html_text import visible
from pagedctx.host.records.replay_outcome import AskComparison, Divergence, ReplayOutcome, RoundComparison
from pagedctx.host.records.trace import PageLine, RoundEvent
from pagedctx.host.records.trace_html import render_html
from pagedctx.protocol.paged_context.context import TraceStep
from pagedctx.replay.report_html import report_html

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
HOSTILE = (
    "</script><script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "{{ 7 * 7 }}",
    "{% if true %}x{% endif %}{# c #}",
    '" onmouseover="alert(2)" x=\'',
    "</style></title></textarea>]]><!--",
    "nul\x00 bell\x07 esc\x1b del\x7f c1\x85 surrogate\ud800 nonchar\uffff",
    "&amp; &lt; &#60; &#x3c;",
)
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # where str.splitlines cuts a line


def plain(text: str) -> str:
    """`text` with every character but the line breaks turned into `x` (same lines, same lengths)."""
    return "".join(c if c in _BREAKS else "x" for c in text)


def shown(text: str) -> str:
    """`text` as a parser reads it back from the page (HTML reads CR and CR LF as LF)."""
    return str(visible(text)).replace("\r\n", "\n").replace("\r", "\n")


def view_page(text: str) -> str:
    pages = [
        PageLine(id="a001", type="Original", view="Detail", depth=0, parent=None, place="flow",
                 origin=text, timestamp=T0, draft=False, title=text),
        PageLine(id="a002", type=text, view=text, depth=1, parent="a001", place="child", origin=None,
                 timestamp=T0 + timedelta(hours=1), draft=True, title=f"child {text}"),
    ]  # fmt: skip
    event = RoundEvent(
        session=text, round=0, time=T0 + timedelta(days=1), policy=text, input=text + "!", intent=text,
        plan={"intent_focus": text}, xml_sha256="0" * 64, xml_tokens=90, budget=100, state_digest="1" * 64,
        worker_output=text, actions=[{"action": text, "reason": text, "id": text, text: [text]}],
        steps=[TraceStep(action="Consult", target=text, reason=text, status="fault", keywords=("port",))],
        faults=[{"message": text}, {"code": text}], answer=text, pages=pages,
    )  # fmt: skip
    return render_html([event], source=text)


def replay_page(text: str) -> str:
    rounds = tuple(
        RoundComparison(round=k, tokens=(100, 120), pages_shown=(3, 4), actions=((text,), ("zoom_in",)))
        for k in range(3)
    )
    diverged = ReplayOutcome(
        bundle=f"/data/{text}", session=text, mode="counterfactual", status="compared", rounds_recorded=3,
        rounds_replayed=3, seconds=0.5, causes=(f"changed: /repo/{text}.py",), error=text, rounds=rounds,
        divergence=Divergence(round=1, field=text, recorded=text, replayed=text, cause=text,
                              diff=f"--- a\n+++ b\n@@ -1 +1 @@\n-{text}\n+{text}\n {text}\n"),
        answers=(text, "42"),
        asks=(AskComparison(ask=0, intent=text, answers=(text, "42"), tokens=(9, 9), needs=(text,)),),
    )  # fmt: skip
    return report_html(
        [diverged.model_dump(mode="json"), {"bundle": text, "status": "failed", "error": text}]
    )


def evolve_page(text: str) -> str:
    task = EvolveTask.model_validate(
        {"task_id": "t", "goal": text, "pins": {"allowed_paths": ["src/**"]},
         "acceptance": {"fail_to_pass": ["tests/test_a.py::test_a"]}, "test_commands": ["pytest"]}
    )  # fmt: skip
    meta = EvolveMeta(
        session=text, repo=text, home="/h", task=task, settings=EvolveSettings(rounds=2), generator=text,
        created=T0, stops=(Stop(code="ROUNDS_DONE", message=text, at=T0, attempts=2),), accepted=(text,),
    )  # fmt: skip

    mod = {"action_type": text, "target_chunk_id": text, "file_path": text, "reasoning": text,
           "new_content": text, text: [text]}  # fmt: skip

    def attempt(number: int, status: str) -> Attempt:
        return Attempt(
            id=f"{text}/{number}", session=text, number=number, parent=f"{text}/0" if number else None,
            status=status, verdict="FAIL" if status == "fail" else None, reason_code=text, fail_codes=(text,),
            fail_class=(text,), messages=(text,), modifications=(mod,), rationale=text,
            diff=f"--- a/{text}\n+++ b/{text}\n@@ -1 +1 @@\n-{text}\n+{text}\n", files={text: None},
            metrics={text: text}, score=1.0 if status == "fail" else None, score_error=text,
            tokens=AttemptTokens(code=10, prompt=20, completion=5), seconds={text: 0.1},
            started=T0, finished=T0, evidence_dir=text, policy=text,
        )  # fmt: skip

    return timeline_html(meta, [attempt(0, "fail"), attempt(1, "fault")])


PAGES: dict[str, Callable[[str], str]] = {"view": view_page, "replay": replay_page, "evolve": evolve_page}


def html_root(page: str) -> lxml.html.HtmlElement:
    root = lxml.html.document_fromstring(page)
    assert isinstance(root, lxml.html.HtmlElement)
    return root


def skeleton(page: str) -> list[tuple[str, tuple[str, ...]]]:
    """Every element of the page in order, by tag and attribute names."""
    return [(str(el.tag), tuple(sorted(str(a) for a in el.attrib))) for el in html_root(page).iter()]


def texts(root: lxml.html.HtmlElement, css: str) -> list[str]:
    return [el.text_content() for el in root.find_class(css)]


def check_inert(name: str, text: str) -> None:
    """The page with `text` has the skeleton of the page with plain text, no script of its own, the
    same CSP, and shows `text` where it was put."""
    page = PAGES[name](text)
    page.encode("utf-8")  # strict: no lone surrogate reaches the file
    baseline = PAGES[name](plain(text))
    assert skeleton(page) == skeleton(baseline)
    root = html_root(page)
    assert not [el for el in root.iter() if any(str(a).lower().startswith("on") for a in el.attrib)]
    scripts = [el.text for el in root.iter("script")]
    assert scripts == [el.text for el in lxml.html.document_fromstring(baseline).iter("script")]
    csp = root.xpath("//meta[@http-equiv='Content-Security-Policy']/@content")
    assert csp == lxml.html.document_fromstring(baseline).xpath(
        "//meta[@http-equiv='Content-Security-Policy']/@content"
    )
    expected = shown(text)
    if name != "replay":  # the replay report's title counts bundles
        assert str(root.findtext(".//title")).endswith(expected)
    if name == "view":
        node = root.find_class("node")[0]
        assert node.find_class("title")[0].text_content() == expected and node.get("title") == expected
        assert texts(root, "answer") == [expected]
    elif name == "replay":
        assert texts(root, "error") == [expected, expected]
        assert texts(root, "value") == [expected, expected]
        lines = f"--- a\n+++ b\n@@ -1 +1 @@\n-{text}\n+{text}\n {text}\n".splitlines()
        assert texts(root, "diff") == ["".join(shown(line) or " " for line in lines)]
    else:
        assert texts(root, "rationale") == [expected, expected]
        assert texts(root, "messages") == [expected, expected]
        assert texts(root, "mono")[:2] == [expected, expected]  # session, repository


@pytest.mark.parametrize("name", PAGES)
@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_strings_stay_text(name: str, text: str) -> None:
    """P3, D3, D4 (issue 33): each hostile string, in every untrusted field of each page, is text:
    no element, attribute or script of its own, template syntax not evaluated, shown as written."""
    check_inert(name, text)
    page = PAGES[name](text)
    if "{{" in text:
        assert "{{ 7 * 7 }}" in html_root(page).text_content()


_FRAGMENTS = st.sampled_from(
    [*HOSTILE, "<", ">", "&", '"', "'", "{{", "}}", "{%", "%}", "\n", "\r\n", "-", "+"]
)
_TEXT = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=6)), min_size=1, max_size=4).map("".join).filter(bool)


@pytest.mark.parametrize("name", PAGES)
@settings(max_examples=40)
@given(text=_TEXT)
def test_any_text_stays_text(name: str, text: str) -> None:
    """P3, D3, D4 (issue 33): a property over texts mixing hostile fragments with any characters:
    the page keeps the skeleton it has with plain text and shows the text as written."""
    check_inert(name, text)
