"""The HTML timeline of an evolve session (issue 16 item 5; S8, S9, D4): one self-contained page with
the header, score and token charts, the best attempt's lineage and every attempt's verdict and diff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lxml.html
import pytest
from browser_support import drawn_page, pixels_of

from pagedctx.evolve.records import Attempt, AttemptTokens, EvolveMeta, EvolveSettings, Stop, best_attempt
from pagedctx.evolve.task import EvolveTask
from pagedctx.evolve.timeline import MAX_DIFF_CHARS, STATUS_COLOURS, lineage, timeline_html

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
HOSTILE = "</pre></details><script>alert(1)</script>&<b onmouseover=alert(2)>"
SESSION = "evo-1"

DIFF_1 = """--- a/src/calc.py
+++ b/src/calc.py
@@ -1,3 +1,3 @@
 def add(a, b):
-    return a - b
+    return a + b + 0
"""
DIFF_3 = """--- a/src/calc.py
+++ b/src/calc.py
@@ -1,3 +1,3 @@
 def add(a, b):
-    return a - b
+    return a + b
"""


def meta(**extra: Any) -> EvolveMeta:
    task = EvolveTask.model_validate(
        {
            "task_id": "task-7",
            "goal": "make add() add",
            "pins": {"allowed_paths": ["src/**"], "forbidden_paths": ["tests/**"]},
            "acceptance": {
                "fail_to_pass": ["tests/test_calc.py::test_add"],
                "pass_to_pass": ["tests/test_calc.py::test_sub"],
            },
            "test_commands": ["python -m pytest -q tests"],
        }
    )
    fields: dict[str, Any] = {
        "session": SESSION,
        "repo": "/home/r/calc",
        "home": "/home/r/.pagedctx/evolve/evo-1",
        "task": task,
        "settings": EvolveSettings(rounds=3, budget=4000, until="pass", strategy="best"),
        "generator": "scripted-generator",
        "created": T0,
        "stops": (Stop(code="PASS", message="attempt 3 passed", at=T0 + timedelta(minutes=9), attempts=3),),
    }
    fields.update(extra)
    return EvolveMeta.model_validate(fields)


def attempt(number: int, status: str, *, parent: int | None = None, **extra: Any) -> Attempt:
    fields: dict[str, Any] = {
        "id": f"{SESSION}/{number:05d}",
        "session": SESSION,
        "number": number,
        "parent": f"{SESSION}/{parent:05d}" if parent is not None else None,
        "status": status,
        "verdict": {"pass": "PASS", "fail": "FAIL"}.get(status),
        "acceptance_total": 2,
        "tokens": AttemptTokens(code=900, history=300 * number, prompt=1500 + 100 * number, completion=200)
        if number
        else AttemptTokens(),
        "seconds": {"checkout": 0.01, "select": 0.2, "generate": 1.5, "test": 0.8, "total": 2.51},
        "started": T0 + timedelta(minutes=2 * number),
        "finished": T0 + timedelta(minutes=2 * number + 1),
        "policy": "original" if number == 0 else "scripted-generator",
    }
    fields.update(extra)
    return Attempt.model_validate(fields)


def story() -> list[Attempt]:
    """The issue's story: the original fails, a wrong fix fails, a syntax error is refused (a fault),
    the real fix passes; the wrong fix scores higher, yet PASS ranks first (S8)."""
    mod = {
        "file_path": "src/calc.py",
        "target_chunk_id": "src/calc.py::add",
        "action_type": "MODIFY",
        "new_content": "def add(a, b):\n    return a + b\n",
        "reasoning": "subtract is the bug",
    }
    return [
        attempt(0, "fail", reason_code="TESTS_FAILED", fail_codes=("TESTS_FAILED",), acceptance_passed=1,
                score=1.0, messages=("tests/test_calc.py::test_add failed",), metrics={"speed": 1.0}),
        attempt(1, "fail", parent=0, reason_code="TESTS_FAILED", fail_codes=("TESTS_FAILED",),
                acceptance_passed=1, score=9.0, metrics={"speed": 9.0, "size": 3}, diff=DIFF_1,
                files={"src/calc.py": "x"},
                modifications=({**mod, "new_content": "def add(a, b):\n    return a + b + 0\n"},),
                rationale="try the obvious"),
        attempt(2, "fault", parent=1, reason_code="PREFLIGHT_FAILED", fail_codes=("PREFLIGHT_FAILED",),
                messages=("src/calc.py: invalid syntax at line 2",), diff=DIFF_1,
                modifications=({**mod, "new_content": "def add(a, b) return"},), rationale="shorter"),
        attempt(3, "pass", parent=1, acceptance_passed=2, score=3.5, metrics={"speed": 3.5}, diff=DIFF_3,
                files={"src/calc.py": "y", "src/old.py": None}, modifications=(mod,),
                rationale="the real fix"),
    ]  # fmt: skip


def html_root(page: str) -> lxml.html.HtmlElement:
    root = lxml.html.document_fromstring(page)
    assert isinstance(root, lxml.html.HtmlElement)
    return root


def sections(root: lxml.html.HtmlElement) -> dict[int, lxml.html.HtmlElement]:
    return {int(d.get("data-number")): d for d in root.iter("details") if "attempt" in d.classes}


def test_header_lineage_and_every_attempt() -> None:
    """S8, S9, D4 (issue 16 item 5): the header names the session, the stops and the best attempt;
    the lineage runs from the original to the best by parent ids; each attempt has its section."""
    attempts = story()
    page = timeline_html(meta(), list(reversed(attempts)))  # any order in, round order out
    root = html_root(page)
    header = root.find_class("top")[0].text_content()
    for text in (SESSION, "/home/r/calc", "make add() add", "scripted-generator", "PASS", "attempt 3 passed"):
        assert text in header, text
    assert "strategy best" in header and "until pass" in header and "4,000" in header
    assert "4: 1 pass, 2 fail, 1 fault" in header and "#3" in header
    assert best_attempt(attempts) == attempts[3]  # PASS beats the higher score of #1

    links = root.find_class("lineage")[0].find_class("link")
    assert [link.get("data-attempt") for link in links] == ["0", "1", "3"]
    assert [s for link in links for s in ("pass", "fail", "fault") if f"status-{s}" in link.classes] == [
        "fail",
        "fail",
        "pass",
    ]
    assert "the original code" in links[0].text_content()

    found = sections(root)
    assert sorted(found) == [0, 1, 2, 3]
    assert [d.get("id") for d in root.iter("details") if "attempt" in d.classes] == [
        f"attempt-{n}" for n in range(4)
    ]
    assert {n: d.get("data-status") for n, d in found.items()} == {
        0: "fail",
        1: "fail",
        2: "fault",
        3: "pass",
    }
    assert found[3].get("open") is not None and "best" in found[3].classes
    assert all(found[n].get("open") is None for n in (0, 1, 2))

    fault = found[2].text_content()
    assert "FAULT" in fault and "PREFLIGHT_FAILED" in fault and "invalid syntax at line 2" in fault
    assert "refused before any test ran" in fault and "edits were refused" in fault
    assert "shorter" in fault and "def add(a, b) return" in fault
    assert found[2].xpath(".//a[@href='#attempt-1']")

    passed = found[3].text_content()
    for text in (
        f"{SESSION}/00003",  # the id `pagedctx evolve accept` takes
        "PASS",
        "2 / 2 passed",
        "3.5",
        "speed",
        "the real fix",
        "MODIFY",
        "src/calc.py::add",
        "subtract is the bug",
        "1,800",
        "2,000",
        "900",
        "generate",
        "1.500 s",
        "src/old.py",
        "removed",
    ):
        assert text in passed, text
    diff = found[3].find_class("diff")[0]
    kinds = {k: [s.text_content() for s in diff.find_class(k)] for k in ("add", "del", "hunk", "meta")}
    assert kinds == {
        "add": ["+    return a + b"],
        "del": ["-    return a - b"],
        "hunk": ["@@ -1,3 +1,3 @@"],
        "meta": ["--- a/src/calc.py", "+++ b/src/calc.py"],
    }
    assert "no change against the original code" in found[0].text_content()
    assert "TESTS_FAILED" in found[0].text_content() and "1 / 2 passed" in found[0].text_content()


def centre_y(mark: lxml.html.HtmlElement) -> float:
    """The vertical centre of a circle or square marker."""
    shape = mark[1]
    if shape.tag == "circle":
        return float(shape.get("cy"))
    return float(shape.get("y")) + float(shape.get("height")) / 2


def test_charts_mark_status_by_colour_and_shape_with_gaps() -> None:
    """S8 (issue 16 item 5): score and tokens per round; PASS / FAIL / fault are a circle, a square
    and a triangle (readable in greyscale), an attempt without a score breaks the line and sits on
    the "no score" strip; the lineage is ringed; tokens are stacked bars with the context budget."""
    attempts = story()
    attempts.append(attempt(4, "fail", parent=3, score=2.0, reason_code="TESTS_FAILED"))
    root = html_root(timeline_html(meta(), attempts))
    chart = root.find_class("score-chart")[0]
    marks = {int(g.get("data-attempt")): g for g in chart.find_class("mark")}
    assert sorted(marks) == [0, 1, 2, 3, 4]
    shapes = {n: [child.tag for child in g if child.tag != "title"] for n, g in marks.items()}
    assert shapes == {0: ["rect"], 1: ["rect"], 2: ["path"], 3: ["circle"], 4: ["rect"]}
    assert all(f"status-{a.status}" in marks[a.number].classes for a in attempts)
    assert all(g.getparent().get("href") == f"#attempt-{n}" for n, g in marks.items())
    # The fault has no score: it sits on the strip, and the line is broken there (0-1, then 3-4).
    strip = chart.find_class("strip")[0]
    strip_mid = float(strip.get("y")) + float(strip.get("height")) / 2
    assert float(marks[2].xpath("string(path/@d)").split(",")[1].split()[0]) < strip_mid  # apex above centre
    ys = {n: centre_y(g) for n, g in marks.items() if n != 2}
    assert ys[1] < ys[3] < ys[4] < ys[0]  # higher scores drawn higher
    series = chart.find_class("series")
    assert len(series) == 2 and [len(s.get("points").split()) for s in series] == [2, 2]
    assert chart.find_class("best-so-far")
    rings = chart.find_class("ring")
    assert len(rings) == 3  # 0 -> 1 -> 3
    assert "best #3" in chart.text_content()
    tokens = root.find_class("tokens-chart")[0]
    bars = tokens.find_class("bar")
    assert [b.get("data-attempt") for b in bars] == ["0", "1", "2", "3", "4"]
    assert not bars[0].find_class("tok-prompt") and bars[3].find_class("tok-prompt")
    assert bars[3].find_class("tok-completion")
    assert len(tokens.find_class("context")) == 1 and tokens.find_class("budget")
    assert "context budget 4,000 per round" in tokens.text_content()
    legend = root.find_class("legend")[0].text_content()
    assert "PASS (circle)" in legend and "FAIL (square)" in legend and "(triangle)" in legend
    badges = {b.text_content() for b in root.find_class("badge")}
    assert {"\u25cf PASS", "\u25a0 FAIL", "\u25b2 FAULT"} <= badges


def test_untrusted_text_stays_inert() -> None:
    """Issue 16 item 5 (E-side: model output and test output are untrusted): a `<script>` in a diff,
    a message, a rationale, a modification, metrics, the goal or a stop stays text; no script runs
    (the page has none, and its CSP allows none)."""
    hostile_diff = f"--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-{HOSTILE}\n+{HOSTILE}\n {HOSTILE}\n"
    bad = attempt(
        1, "fail", parent=0, reason_code=HOSTILE, fail_codes=(HOSTILE,), messages=(HOSTILE, "nul\x00 \ud800"),
        diff=hostile_diff, rationale=HOSTILE, metrics={HOSTILE: HOSTILE}, score_error=HOSTILE, policy=HOSTILE,
        files={HOSTILE: None},
        modifications=({"action_type": HOSTILE, "target_chunk_id": HOSTILE, "reasoning": HOSTILE,
                        "new_content": HOSTILE, HOSTILE: [HOSTILE]},),
    )  # fmt: skip
    stop = Stop(code="ROUNDS_DONE", message=HOSTILE, at=T0, attempts=1)
    task = meta().task.model_copy(update={"goal": HOSTILE})
    page = timeline_html(
        meta(session=HOSTILE, repo=HOSTILE, generator=HOSTILE, stops=(stop,), task=task), [story()[0], bad]
    )
    page.encode("utf-8")  # strict: no lone surrogate reaches the file
    assert "<script" not in page and "\x00" not in page
    root = html_root(page)
    assert not list(root.iter("script", "b"))
    assert not [el for el in root.iter() if any(str(name).startswith("on") for name in el.attrib)]
    section = sections(root)[1]
    diff = section.find_class("diff")[0]
    assert [s.text_content() for s in diff.find_class("add")] == [f"+{HOSTILE}"]
    assert [s.text_content() for s in diff.find_class("del")] == [f"-{HOSTILE}"]
    assert section.find_class("messages")[0].text_content() == HOSTILE + r"nul\u0000 \ud800"
    assert section.find_class("rationale")[0].text_content() == HOSTILE
    assert section.text_content().count(HOSTILE) >= 10
    title = root.find(".//title")
    assert title is not None and title.text == f"pagedctx evolve {HOSTILE}"
    assert HOSTILE in root.find_class("stops")[0].text_content()
    csp = root.xpath("//meta[@http-equiv='Content-Security-Policy']/@content")
    assert isinstance(csp, list) and "default-src 'none'" in str(csp[0]) and "script-src" not in str(csp[0])


def test_the_page_is_self_contained_and_deterministic() -> None:
    """Issue 16 item 5, as for `pagedctx view`: no network, no asset, links only inside the page;
    the same record gives the same bytes."""
    page = timeline_html(meta(), story())
    assert page == timeline_html(meta(), story())
    root = html_root(page)
    assert not [el for el in root.iter() if {"src", "srcset", "action"} & set(el.attrib)]
    assert all(str(el.get("href")).startswith("#attempt-") for el in root.iter() if "href" in el.attrib)
    assert not list(root.iter("link", "iframe", "img", "object", "embed", "script"))
    style = "".join(s.text or "" for s in root.iter("style"))
    assert "url(" not in style and "@import" not in style
    targets = {str(el.get("href"))[1:] for el in root.iter() if "href" in el.attrib}
    assert targets <= {str(el.get("id")) for el in root.iter() if el.get("id")}


def test_a_huge_diff_is_cut_with_a_visible_marker() -> None:
    """Issue 16 item 5: a diff past MAX_DIFF_CHARS is cut at a line end and says so; a long
    message is cut too; the record itself keeps everything (only the page is cut)."""
    line = "+" + "x" * 99 + "\n"
    big = "--- a/x.py\n+++ b/x.py\n@@ -0,0 +1,3000 @@\n" + line * 3000  # ~300 KB
    huge = attempt(1, "fail", parent=0, diff=big, messages=("m" * 50_000,))
    page = timeline_html(meta(), [story()[0], huge])
    assert len(page) < len(big)
    root = html_root(page)
    section = sections(root)[1]
    shown = section.find_class("diff")[0].text_content()
    assert len(shown) <= MAX_DIFF_CHARS and shown.endswith("x")
    cuts = section.find_class("cut")
    assert len(cuts) == 2
    marker = section.find_class("diff")[0].getnext()
    assert marker is not None and marker in cuts
    assert f"of {len(big):,} characters shown" in marker.text_content()
    shown_lines = len(section.find_class("diff")[0].find_class("l"))
    assert shown_lines < 3003 and f"(rest: {3003 - shown_lines:,} lines)" in marker.text_content()
    assert (
        "20,000 of 50,000 characters shown (rest: 1 line)" in section.find_class("messages")[0].text_content()
    )
    assert f"({len(big):,} characters)" in section.text_content()


def test_lineage_survives_a_missing_parent_and_a_cycle() -> None:
    """S8: a parent not in the record is shown as missing; a parent cycle ends the walk."""
    lone = attempt(5, "pass", parent=4, acceptance_passed=2)
    chain, missing = lineage(lone, {lone.id: lone})
    assert chain == [lone] and missing == f"{SESSION}/00004"
    root = html_root(timeline_html(meta(), [lone]))
    links = root.find_class("lineage")[0].find_class("link")
    assert "missing" in links[0].classes and "not in this record" in links[0].text_content()
    assert "not in this record" in sections(root)[5].text_content()
    a = attempt(1, "fail", parent=2)
    b = attempt(2, "pass", parent=1)
    chain, missing = lineage(b, {a.id: a, b.id: b})
    assert chain == [a, b] and missing is None
    assert len(sections(html_root(timeline_html(meta(), [a, b])))) == 2


def test_a_session_without_attempts_yet() -> None:
    """S9: a session whose original is not evaluated yet (killed at once) still renders."""
    root = html_root(timeline_html(meta(stops=()), []))
    assert "no attempt recorded yet" in root.text_content()
    assert "none yet" in root.find_class("top")[0].text_content()
    assert not sections(root) and not root.find_class("lineage")


def test_two_hundred_attempts_render() -> None:
    """Issue 16 "Done means" (a 200-round run): 200 attempts render, one section each, every one
    drawn in both charts; the lineage is the chain of parents back to the original."""
    attempts = [attempt(0, "fail", score=0.0, diff="")]
    for n in range(1, 200):
        status = ("fail", "fault", "fail", "pass")[n % 4]
        score = None if status == "fault" else float(n % 37)
        attempts.append(attempt(n, status, parent=n - 1 if n % 5 else 0, score=score, diff=DIFF_3 * 20,
                                acceptance_passed=2 if status == "pass" else 1))  # fmt: skip
    root = html_root(timeline_html(meta(), attempts))
    assert len(sections(root)) == 200
    assert len(root.find_class("score-chart")[0].find_class("mark")) == 200
    assert len(root.find_class("tokens-chart")[0].find_class("bar")) == 200
    best = best_attempt(attempts)
    assert best is not None and best.number == 147  # the PASS with the top score (147 % 37 == 36)
    links = root.find_class("lineage")[0].find_class("link")
    assert links[0].get("data-attempt") == "0" and links[-1].get("data-attempt") == str(best.number)


@pytest.mark.slow
@pytest.mark.integration
def test_headless_chromium_renders_the_timeline(tmp_path: Path) -> None:
    """Issue 16 item 5 "Done means" (S8, D4): a real browser draws the charts, the lineage and the
    sections in the status colours; hostile text from a diff and a message stays text."""
    attempts = story()
    attempts[1] = attempts[1].model_copy(
        update={"messages": (HOSTILE,), "diff": DIFF_1 + f"+{HOSTILE}\n", "rationale": HOSTILE}
    )
    page = tmp_path / "timeline.html"
    page.write_text(timeline_html(meta(), attempts), encoding="utf-8")
    pixels, dumped = drawn_page(page, tmp_path)
    for status, colour in STATUS_COLOURS.items():  # markers, badges, lineage and section borders
        assert pixels_of(pixels, colour) > 400, status
    dom = html_root(dumped)
    assert not list(dom.iter("script"))
    found = sections(dom)
    assert sorted(found) == [0, 1, 2, 3] and found[3].get("open") is not None
    assert found[1].find_class("rationale")[0].text_content() == HOSTILE
    assert found[1].find_class("messages")[0].text_content() == HOSTILE
    assert found[1].find_class("add")[-1].text_content() == f"+{HOSTILE}"
    assert [link.get("data-attempt") for link in dom.find_class("lineage")[0].find_class("link")] == [
        "0",
        "1",
        "3",
    ]
    assert len(dom.find_class("score-chart")[0].find_class("mark")) == 4
