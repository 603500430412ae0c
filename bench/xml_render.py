"""Render a 10,000-node <PagedContext> and compare with lxml serializing the same tree.

    python bench/xml_render.py [--nodes 10000] [--repeat 15]

Prints the median time of each stage and its ratio to the reference (lxml's own `tostring` of the
finished tree). The state mixes every view: containers Unpacked with Detail and Summary children,
Consolidated pages in Detail and Summary, Original pages with a few hundred bytes of content.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from lxml import etree

from pagedctx.pages import (
    ConsolidatedPage,
    Origin,
    OriginalPage,
    Page,
    SessionState,
    Transition,
    add_pages,
    consult,
)
from pagedctx.protocol.paged_context.parse import parse_document
from pagedctx.protocol.paged_context.render import build_state_tree, render_state, serialize
from pagedctx.protocol.tokens import token_counter

T0 = datetime(2026, 1, 1, 8, 0, 0)
NOW = datetime(2026, 3, 1, 12, 0, 0)
CHILDREN = 19


def make_state(total: int) -> SessionState:
    """`total` pages: containers of CHILDREN originals each, all shown."""
    pages: list[Page] = []
    containers = total // (CHILDREN + 1)
    n = 0
    for c in range(containers):
        kids = []
        for k in range(CHILDREN):
            n += 1
            kid_id = f"{n:08x}"
            kids.append(kid_id)
            pages.append(
                OriginalPage(
                    id=kid_id,
                    depth=2,
                    timestamp=T0 + timedelta(seconds=n),
                    keywords=(f"topic{c % 17}", f"sym_{k}"),
                    summary=f"step {k} of container {c}: calls handler_{k}() with retries={k % 4}",
                    content=f"def handler_{k}(request):\n    # container {c}\n"
                    + "    x = compute(x) + 1\n" * 8,
                    origin=Origin.STORAGE,
                )
            )
        n += 1
        pages.append(
            ConsolidatedPage(
                id=f"{n:08x}",
                depth=1,
                timestamp=T0 + timedelta(seconds=n),
                keywords=(f"topic{c % 17}",),
                summary=f"container {c}: handlers 0..{CHILDREN - 1}, retry policy, error paths",
                source_ids=tuple(kids),
            )
        )
    result = add_pages(SessionState(), pages)
    assert isinstance(result, Transition)
    state = result.state
    for page in pages:
        if isinstance(page, ConsolidatedPage):
            index = int(page.id, 16) // (CHILDREN + 1)
            # Every container Unpacked, so every page is a rendered <Node>; a third of the
            # leaves in Detail (content), the rest in Summary.
            state = _ok(consult(_ok(consult(state, page.id)), page.id))
            for kid in page.source_ids[index % 3 :: 3]:
                state = _ok(consult(state, kid))
    return state


def _ok(result: object) -> SessionState:
    assert isinstance(result, Transition), result
    return result.state


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    state = make_state(args.nodes)
    tree = build_state_tree(state, current_time=NOW, query="where do retries stop?")
    shown = len(tree.findall(".//Node"))
    text = render_state(state, current_time=NOW, query="where do retries stop?")
    tokens = token_counter().count(text)

    reference = median_seconds(
        lambda: etree.tostring(tree, encoding="unicode", pretty_print=True), args.repeat
    )
    rows = [
        ("lxml tostring of the finished tree (reference)", reference),
        (
            "build tree from state",
            median_seconds(lambda: build_state_tree(state, current_time=NOW, query="q"), args.repeat),
        ),
        (
            "schema validation",
            median_seconds(lambda: serialize(tree, validate=True), args.repeat) - reference,
        ),
        (
            "render_state, unvalidated",
            median_seconds(
                lambda: render_state(state, current_time=NOW, query="q", validate=False), args.repeat
            ),
        ),
        (
            "render_state, validated (what every turn does)",
            median_seconds(lambda: render_state(state, current_time=NOW, query="q"), args.repeat),
        ),
        (
            "parse_document (parse + validate + typed model)",
            median_seconds(lambda: parse_document(text), max(3, args.repeat // 3)),
        ),
    ]
    print(
        f"pages in state: {len(state.pages):,}; <Node> elements rendered: {shown:,}; "
        f"document: {len(text) / 1e6:.2f} MB, {tokens:,} cl100k tokens"
    )
    print(f"{'stage':<52} {'median ms':>10} {'x reference':>12}")
    for name, seconds in rows:
        print(f"{name:<52} {seconds * 1e3:>10.2f} {seconds / reference:>12.2f}")


if __name__ == "__main__":
    main()
