"""The HTML report of a batch replay (issue 17 item 2 "Many bundles at once"; D3, P15): one
self-contained page with the counts, the distributions across sessions and a section per bundle
(status, token and pages-shown curves, the first divergence with its diff, the answers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lxml.html
import pytest
from browser_support import drawn_page, pixels_of

from pagedctx.replay.report_html import MAX_DIFF_CHARS, STATUS_COLOURS, report_html
from pagedctx.replay.verify import Divergence, ReplayOutcome, RoundComparison

HOSTILE = "</pre></details><script>alert(1)</script>&<b onmouseover=alert(2)>"
DIFF = (
    "--- recorded round 2\n+++ replayed round 2\n@@ -1,3 +1,3 @@\n <Context>\n"
    f"-<Page id='p1'>{HOSTILE}</Page>\n+<Page id='p1'>{HOSTILE} changed</Page>\n </Context>\n"
)


def rounds(tokens: list[tuple[int | None, int | None]], pages: int = 3) -> tuple[RoundComparison, ...]:
    return tuple(
        RoundComparison(
            round=k,
            tokens=pair,
            pages_shown=(pages if pair[0] is not None else None, pages + k if pair[1] is not None else None),
            actions=(
                ("zoom_in",) if pair[0] is not None else (),
                ("zoom_in",) if pair[1] is not None else (),
            ),
        )
        for k, pair in enumerate(tokens)
    )


def outcome(status: str, name: str, **extra: Any) -> dict[str, Any]:
    """An outcome dict as `pagedctx replay` collects it: a real `ReplayOutcome`, dumped to JSON."""
    fields: dict[str, Any] = {
        "bundle": f"/data/bundles/{name}",
        "session": f"s-{name}",
        "mode": "counterfactual" if status == "compared" else "verify",
        "status": status,
        "rounds_recorded": 4,
        "rounds_replayed": 4,
        "seconds": 0.75,
        "rounds": rounds([(1000, 1000), (1200, 1200), (1500, 1500), (1700, 1700)]),
        "answers": ("42", "42"),
    }
    fields.update(extra)
    return ReplayOutcome.model_validate(fields).model_dump(mode="json")


def failed(name: str, error: str = "not a bundle: manifest.json is missing") -> dict[str, Any]:
    return {"bundle": f"/data/bundles/{name}", "status": "failed", "error": error}


def diverged(name: str = "b-diverged", diff: str = DIFF, **extra: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "causes": (f"an input file changed since it was recorded: /repo/{HOSTILE}.py",),
        "divergence": Divergence(
            round=2, field="xml_sha256", recorded="ab12", replayed=f"cd34 {HOSTILE}",
            cause=f"an input file changed since it was recorded: /repo/{HOSTILE}.py", diff=diff,
        ),
        "rounds_replayed": 3,
        "rounds": rounds([(1000, 1000), (1200, 1200), (1500, 1650), (1700, None)]),
        "error": HOSTILE,
        "seconds": 1.5,
    }  # fmt: skip
    fields.update(extra)
    return outcome("diverged", name, **fields)


def compared(name: str = "b-half") -> dict[str, Any]:
    return outcome(
        "compared", name, rounds=rounds([(1000, 500), (1200, 600), (1500, 1500), (1700, 1800)]),
        answers=("the bug is in parse()", f"the bug is in lex() {HOSTILE}"), seconds=2.0,
    )  # fmt: skip


def tampered(name: str = "b-altered") -> dict[str, Any]:
    return outcome(
        "tampered", name, tampered=("the bundle's contexts.jsonl changed since the bundle was written",)
    )


def batch() -> list[dict[str, Any]]:
    """Input order: reproduced, compared, failed, diverged, tampered (the page reorders)."""
    return [outcome("reproduced", "b-ok"), compared(), failed("b-broken"), diverged(), tampered()]


def html_root(page: str) -> lxml.html.HtmlElement:
    root = lxml.html.document_fromstring(page)
    assert isinstance(root, lxml.html.HtmlElement)
    return root


def sessions(root: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    return [d for d in root.iter("details") if "session" in d.classes]


def points(line: lxml.html.HtmlElement) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",") for p in str(line.get("points")).split())]


def test_header_counts_and_sections_diverged_first() -> None:
    """Issue 17 item 2 (D3, P15): the header counts every status and sums the seconds; one section
    per bundle, the tampered (issue 34) and diverged ones first and open, then the failed (open),
    compared, reproduced; each status told by colour AND text."""
    root = html_root(report_html(batch()))
    header = root.find_class("top")[0].text_content()
    assert "pagedctx replay: 5 bundles" in header
    counts = root.find_class("counts")[0]
    badges = [b.text_content() for b in counts.find_class("badge")]
    assert badges == [
        "\u2620 TAMPERED",
        "\u2716 DIVERGED",
        "\u26a0 FAILED",
        "\u21c4 COMPARED",
        "\u2714 REPRODUCED",
    ]
    assert counts.text_content().split()[2::3] == ["1", "1", "1", "1", "1"]
    assert "5.00 s summed over the bundles" in header  # 0.75 + 2.0 + 1.5 + 0.75; the failed one has none
    assert "16 recorded, 15 replayed" in header
    assert "5,400 recorded \u2192 4,400 replayed (-18.5%)" in header  # the compared run's tokens
    statusbar = root.find_class("statusbar")[0]
    assert [r.get("class") for r in statusbar.iter("rect")] == [
        "status-tampered", "status-diverged", "status-failed", "status-compared", "status-reproduced",
    ]  # fmt: skip
    found = sessions(root)
    assert [d.get("data-status") for d in found] == [
        "tampered",
        "diverged",
        "failed",
        "compared",
        "reproduced",
    ]
    assert [d.get("id") for d in found] == [
        "bundle-4",
        "bundle-3",
        "bundle-2",
        "bundle-1",
        "bundle-0",
    ]  # input index
    assert [d.get("open") is not None for d in found] == [True, True, True, False, False]
    for section in found:
        status = str(section.get("data-status"))
        assert f"status-{status}" in section.classes
        assert section.find_class("badge")[0].text_content().endswith(status.upper())
    attention = root.find_class("attention")[0]
    assert [a.get("href") for a in attention.iter("a")] == ["#bundle-4", "#bundle-3", "#bundle-2"]
    assert "round 2" in attention.text_content()
    reproduced = found[4]
    assert "4 replayed / 4 recorded" in reproduced.text_content()
    assert not reproduced.find_class("divergence") and not reproduced.find_class("answers")


def test_a_divergence_shows_round_field_cause_and_a_coloured_diff_and_stays_inert() -> None:
    """Issue 17 item 2 (D3): a diverged session shows the round, the field, the cause and the diff,
    lines coloured +/-; a `<script>` in the diff, the cause, the causes, the error, the bundle name
    or an answer stays text (the page has no script, and its CSP allows none)."""
    hostile_name = diverged(name=HOSTILE.replace("/", "_"), session=HOSTILE)
    page = report_html([hostile_name, failed(HOSTILE, error=HOSTILE), compared()])
    page.encode("utf-8")
    assert "<script" not in page
    root = html_root(page)
    assert not list(root.iter("script", "b"))
    assert not [el for el in root.iter() if any(str(name).startswith("on") for name in el.attrib)]
    csp = root.xpath("//meta[@http-equiv='Content-Security-Policy']/@content")
    assert isinstance(csp, list) and "default-src 'none'" in str(csp[0]) and "script-src" not in str(csp[0])
    section = sessions(root)[0]
    divergence = section.find_class("divergence")[0]
    facts = dict(zip((dt.text_content() for dt in divergence.iter("dt")),
                     (dd.text_content() for dd in divergence.iter("dd")), strict=True))  # fmt: skip
    assert facts["round"] == "2" and facts["field"] == "xml_sha256"
    assert facts["cause"] == f"an input file changed since it was recorded: /repo/{HOSTILE}.py"
    assert facts["recorded"] == "ab12" and facts["replayed"] == f"cd34 {HOSTILE}"
    diff = divergence.find_class("diff")[0]
    assert [s.text_content() for s in diff.find_class("del")] == [f"-<Page id='p1'>{HOSTILE}</Page>"]
    assert [s.text_content() for s in diff.find_class("add")] == [f"+<Page id='p1'>{HOSTILE} changed</Page>"]
    assert [s.text_content() for s in diff.find_class("meta")] == [
        "--- recorded round 2",
        "+++ replayed round 2",
    ]
    assert len(diff.find_class("hunk")) == 1 and len(diff.find_class("ctx")) == 2
    assert section.find_class("causes")[0].text_content() == facts["cause"]
    assert section.find_class("error")[0].text_content() == HOSTILE
    assert "round 2: xml_sha256" in section.find("summary").text_content()
    assert sessions(root)[1].find_class("error")[0].text_content() == HOSTILE
    answers = sessions(root)[2].find_class("answers")[0]
    assert answers.find_class("replayed")[0].find("pre").text_content() == f"the bug is in lex() {HOSTILE}"
    title = root.find(".//title")
    assert title is not None and title.text == "pagedctx replay: 3 bundles"


def test_token_and_pages_curves_are_two_polylines_per_session() -> None:
    """Issue 17 item 2 (P15): the token curve per round, recorded and replayed as two polylines
    (higher tokens drawn higher), the replayed one broken where that run has no round; the pages
    shown per round likewise; the round of the first divergence marked; a table per round."""
    root = html_root(report_html([diverged(), compared()]))
    bad, half = sessions(root)
    curve = bad.find_class("tokens-curve")[0]
    recorded = [p for p in curve.iter("polyline") if p.get("class") == "recorded"]
    replayed = [p for p in curve.iter("polyline") if p.get("class") == "replayed"]
    assert len(recorded) == 1 and len(replayed) == 1
    rec, rep = points(recorded[0]), points(replayed[0])
    assert len(rec) == 4 and len(rep) == 3  # the replayed run stopped after round 2
    assert [x for x, _ in rep] == [x for x, _ in rec[:3]]
    assert rec[0][1] > rec[1][1] > rec[2][1] > rec[3][1]  # 1000 < 1200 < 1500 < 1700 tokens: higher up
    assert rep[2][1] < rec[2][1]  # 1650 replayed above 1500 recorded
    mark = curve.find_class("divergence-mark")[0]
    assert float(str(mark.get("x1"))) == rec[2][0]
    assert "first divergence (round 2)" in curve.text_content()
    assert len(curve.find_class("recorded")) == 5 and len(curve.find_class("replayed")) == 4  # lines + dots
    pages = bad.find_class("pages-curve")[0]
    assert len(points(pages.find_class("recorded")[0])) == 4
    table = bad.find_class("rounds")[0]
    rows = {int(str(tr.get("data-round"))): tr for tr in table.iter("tr") if tr.get("data-round")}
    assert sorted(rows) == [0, 1, 2, 3]
    assert "diverged-round" in rows[2].classes and "same" in rows[0].classes
    assert [td.text_content() for td in rows[2].iter("td")][:6] == ["2", "1,500", "1,650", "+150", "3", "5"]
    assert [td.text_content() for td in rows[3].iter("td")][:4] == ["3", "1,700", "\u2014", "\u2014"]
    half_rows = [tr for tr in half.find_class("rounds")[0].iter("tr") if tr.get("data-round")]
    assert [[td.text_content() for td in tr.iter("td")][3] for tr in half_rows] == [
        "-500",
        "-600",
        "0",
        "+100",
    ]


def test_counterfactual_answers_and_token_change_distribution() -> None:
    """Issue 17 item 2 (P15): a counterfactual session shows both answers; across sessions the
    token change per round (replayed minus recorded) is a histogram coloured by sign."""
    root = html_root(report_html([compared(), compared("b-other"), outcome("reproduced", "b-ok")]))
    half = sessions(root)[0]
    answers = half.find_class("answers")[0]
    assert answers.find_class("recorded")[0].text_content() == "recordedthe bug is in parse()"
    assert "the answers differ" in half.text_content()
    assert "5,400 recorded \u2192 4,400 replayed (-18.5%)" in half.text_content()
    histogram = root.find_class("token-change-histogram")[0]
    bins = histogram.find_class("bin")
    assert sum(int(str(b.get("data-count"))) for b in bins) == 8  # 4 rounds x 2 compared sessions
    signs = [str(r.get("class")) for b in bins for r in b.iter("rect")]
    assert {"sign-fewer", "sign-same", "sign-more"} == set(signs)
    heights = dict.fromkeys(signs, 0.0)
    for rect in (r for b in bins for r in b.iter("rect")):
        heights[str(rect.get("class"))] += float(str(rect.get("height")))
    assert heights["sign-fewer"] == pytest.approx(2 * heights["sign-same"])  # 4 fewer, 2 same, 2 more
    assert heights["sign-more"] == pytest.approx(heights["sign-same"])
    assert "8 rounds in both runs: 4 with fewer tokens, 2 with more, 2 the same." in root.text_content()
    assert list(histogram.find_class("zero"))  # zero lies inside the range
    assert not sessions(root)[2].find_class("answers")  # a reproduced session: same answers, not shown


def test_distributions_of_rounds_and_seconds_stacked_by_status() -> None:
    """Issue 17 item 2: across sessions, rounds per bundle and seconds per bundle as histograms
    stacked by status; a failed bundle (no rounds, no seconds) is left out and said so; no
    counterfactual run, no token-change chart."""
    outcomes = [outcome("reproduced", f"b{k}", rounds_recorded=k % 7 + 1, seconds=0.1 * k) for k in range(30)]
    outcomes += [diverged(f"d{k}") for k in range(3)] + [failed("x")]
    root = html_root(report_html(outcomes))
    for css, total in (("rounds-histogram", 33), ("seconds-histogram", 33)):
        bins = root.find_class(css)[0].find_class("bin")
        assert sum(int(str(b.get("data-count"))) for b in bins) == total, css
        classes = {str(r.get("class")) for b in bins for r in b.iter("rect")}
        assert classes == {"status-reproduced", "status-diverged"}, css
    rounds_bins = root.find_class("rounds-histogram")[0].find_class("bin")
    assert [b.get("data-low") for b in rounds_bins] == ["1", "2", "3", "4", "5", "6", "7"]
    assert [int(str(b.get("data-count"))) for b in rounds_bins] == [5, 5, 4, 7, 4, 4, 4]  # 3 diverged have 4
    assert "1 bundle without a count of rounds" in root.text_content()
    assert not root.find_class("token-change-histogram")


def test_a_failed_bundle_and_malformed_fields_render() -> None:
    """Issue 17 item 2: a bundle that could not run (only bundle, status, error) and fields of the
    wrong type (a hand-edited report.json) are shown as unknown, never a crash."""
    odd: dict[str, Any] = {
        "bundle": 7, "status": "exploded", "seconds": float("nan"), "rounds": "many",
        "causes": None, "divergence": [1, 2], "answers": "x", "rounds_recorded": True,
    }  # fmt: skip
    partial = outcome("reproduced", "b-p")
    partial["rounds"] = [{"round": None, "tokens": [5, "x"]}, "junk", {"tokens": [-3, 2], "pages_shown": [1]}]
    root = html_root(report_html([failed("b-broken"), odd, partial, {}]))
    found = sessions(root)
    assert [d.get("data-status") for d in found] == ["failed", "failed", "failed", "reproduced"]
    first = found[0]
    assert "not a bundle: manifest.json is missing" in first.find_class("error")[0].text_content()
    assert "\u2014 replayed / \u2014 recorded" in first.text_content()
    assert "no rounds in either run" not in first.text_content()
    assert found[2].find_class("name")[0].text_content() == "bundle 4"  # {}: named by its position
    table = found[3].find_class("rounds")[0]
    assert len([tr for tr in table.iter("tr") if tr.get("data-round")]) == 3
    assert report_html([]).count('class="empty"') == 1


def test_a_huge_diff_is_cut_with_a_visible_marker() -> None:
    """Issue 17 item 2: a diff past MAX_DIFF_CHARS (~200 KB) is cut at a line end and says so;
    report.json keeps it whole."""
    line = "+" + "x" * 99 + "\n"
    big = "--- recorded round 2\n+++ replayed round 2\n@@ -0,0 +1,3000 @@\n" + line * 3000  # ~300 KB
    page = report_html([diverged(diff=big)])
    assert len(page) < len(big)
    section = sessions(html_root(page))[0]
    diff = section.find_class("diff")[0]
    shown = diff.text_content()
    assert len(shown) <= MAX_DIFF_CHARS and shown.endswith("x")
    marker = diff.getnext()
    assert marker is not None and "cut" in marker.classes
    assert f"of {len(big):,} characters shown" in marker.text_content()
    shown_lines = len(diff.find_class("l"))
    assert shown_lines < 3003 and f"(rest: {3003 - shown_lines:,} lines)" in marker.text_content()
    assert "report.json keeps it whole" in marker.text_content()
    assert f"({len(big):,} characters)" in section.text_content()


def test_the_page_is_self_contained_and_deterministic() -> None:
    """Issue 17 item 2, as for `pagedctx view`: no network, no asset, links only inside the page;
    the same outcomes give the same bytes."""
    page = report_html(batch())
    assert page == report_html(batch())
    root = html_root(page)
    assert not [el for el in root.iter() if {"src", "srcset", "action"} & set(el.attrib)]
    assert not list(root.iter("link", "iframe", "img", "object", "embed", "script"))
    style = "".join(s.text or "" for s in root.iter("style"))
    assert "url(" not in style and "@import" not in style
    targets = {str(el.get("href"))[1:] for el in root.iter() if "href" in el.attrib}
    assert targets and targets <= {str(el.get("id")) for el in root.iter() if el.get("id")}


def many(count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(count):
        kind = k % 10
        if kind == 0:
            out.append(diverged(f"d{k}"))
        elif kind == 1:
            out.append(failed(f"f{k}"))
        elif kind < 5:
            out.append(compared(f"c{k}"))
        else:
            out.append(outcome("reproduced", f"r{k}", seconds=0.01 * k))
    return out


def test_five_hundred_bundles_render_in_linear_size() -> None:
    """Issue 17 item 2 (hundreds of recorded sessions, D3): 500 bundles render, one section each,
    every one counted in the distributions; the page grows linearly (5x the bundles, 5x the page)."""
    small, large = many(100), many(500)
    page = report_html(large)
    root = html_root(page)
    found = sessions(root)
    assert len(found) == 500
    assert [d.get("data-status") for d in found[:50]] == ["diverged"] * 50
    assert sum(d.get("open") is not None for d in found) == 100  # 50 diverged + 50 failed
    bins = root.find_class("seconds-histogram")[0].find_class("bin")
    assert sum(int(str(b.get("data-count"))) for b in bins) == 450
    assert "and 50 more below" in root.find_class("attention")[0].text_content()
    ratio = len(page) / len(report_html(small))
    assert 4.8 < ratio < 5.2, ratio


@pytest.mark.slow
@pytest.mark.integration
def test_headless_chromium_draws_the_report(tmp_path: Path) -> None:
    """Issue 17 item 2 (D3, P15): a real browser draws the report (not blank, the status colours of
    the badges, bars and borders on screen); the DOM it builds has the header, the distributions
    and every section, diverged first and open, the hostile diff as text."""
    page = tmp_path / "report.html"
    page.write_text(report_html(batch()), encoding="utf-8")
    pixels, dumped = drawn_page(page, tmp_path)
    for status, colour in STATUS_COLOURS.items():
        assert pixels_of(pixels, colour) > 400, status
    dom = html_root(dumped)
    assert not list(dom.iter("script"))
    assert "pagedctx replay: 5 bundles" in dom.find_class("top")[0].text_content()
    assert dom.find_class("rounds-histogram") and dom.find_class("token-change-histogram")
    found = sessions(dom)
    assert [d.get("data-status") for d in found] == [
        "tampered",
        "diverged",
        "failed",
        "compared",
        "reproduced",
    ]
    assert found[0].get("open") is not None and found[1].get("open") is not None
    assert found[1].find_class("add")[0].text_content() == f"+<Page id='p1'>{HOSTILE} changed</Page>"
    assert len(found[1].find_class("tokens-curve")[0].findall(".//polyline")) >= 2
