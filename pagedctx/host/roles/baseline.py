"""The `baseline` roles of a session (P9, P10): a greedy zoom Worker and an extractive Consolidator.

They are real algorithms, not models, and say so: the worker's envelope carries
`meta.model = "baseline"`, the consolidator's summaries are extractive.

Worker (reads the `<PagedContext>` it is given, nothing else): every node is scored by how much
of the intent focus its text covers, each focus term weighted by how rare it is among the nodes
shown (a speaker's name on half the turns counts little). It consults the best Summary nodes that
bear on the intent and unpacks relevant Consolidated nodes; it explores relevant blocks it has not
explored yet (P16); it shelves shown Originals that share nothing with the intent; when nothing
relevant is left to zoom into (or on the last round) it answers with the sentences of the shown
evidence that cover the intent best, citing page ids. A Summary turn the `<Query>` repeats (a
chat's latest message, shown once, in the Query) is read from the Query: not consulted, and its
statements are evidence cited with its id. In such a live chat it consults a Summary only when it
covers more of the intent than the evidence already shown whole (a request whose answer is in
view takes one round). Its output is a v2.2 envelope that the host
parses with the protocol grammar like any model's.

Consolidator: a summary of pages made of each source's lead sentence (an earlier answer's lead
with the page ids it cited, so the digest still marks it as no evidence) plus every identifier
the sources name (a summary that drops identifiers is a Payload Error, P10), keywords by
consensus.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from pagedctx.host.select.policy import BASELINE_POLICY
from pagedctx.host.text.expanded_search import query_words, widen_text
from pagedctx.host.text.keywords import code_identifiers, consensus_keywords, lead
from pagedctx.host.text.lexicon import Lexicon
from pagedctx.host.text.terms import identifiers, terms
from pagedctx.pages import Page, PageType, View
from pagedctx.protocol.paged_context.context import ContextNode
from pagedctx.protocol.paged_context.parse import parse_document

__all__ = ["baseline_worker", "consolidate"]
CONSULT_AT = 0.3
EXPLORE_AT = 0.15
MAX_CONSULTS = 3
MAX_SHELVES = 2
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
_LEADS = re.compile(r"\s+\|\s+")  # a digest joins its sources' leads, oldest first (`consolidate`)


def _flatten(nodes: Sequence[ContextNode], out: list[ContextNode]) -> list[ContextNode]:
    for node in nodes:
        out.append(node)
        _flatten(node.children, out)
    return out


def _text(node: ContextNode) -> str:
    return " ".join(filter(None, [node.summary, node.content, " ".join(node.keywords)]))


def _covered(text: str, focus: set[str]) -> set[str]:
    """The focus terms a text covers, in its own words or what they are (WordNet)."""
    if not focus:
        return set()
    lexicon = Lexicon.default()
    words = set(widen_text(lexicon, text)) if lexicon.available else set(terms(text))
    return words & focus


def _rarity(covered: Iterable[set[str]], focus: set[str]) -> dict[str, float]:
    """Each focus term's weight in this view: rarer among the nodes shown, worth more (a name half
    the turns carry, their speaker's, says little about which turn answers)."""
    held = list(covered)
    total = len(held)
    return {t: math.log(1 + (total + 1) / (1 + sum(t in h for h in held))) for t in focus}


def _coverage(text: str, focus: set[str]) -> float:
    """The share of the focus terms a text covers, in its own words or what they are (WordNet)."""
    if not focus:
        return 0.0
    lexicon = Lexicon.default()
    words = set(widen_text(lexicon, text)) if lexicon.available else set(terms(text))
    return len(words & focus) / len(focus)


_CITES = re.compile(r"\[[0-9a-f]{4,64}\](?=\s|$)")  # a page cited the way this worker's answers cite
_VALUE = re.compile(r"\b(?:[A-Z][\w-]*|\w*\d[\w:.-]*)")


def _names_a_value(sentence: str, intent: str) -> bool:
    """Whether a sentence names something the intent does not: a name or a number past its start."""
    asked = set(identifiers(intent.lower()))
    body = sentence.split(None, 1)[1] if " " in sentence else ""
    return any(v.lower() not in asked for v in _VALUE.findall(body))


def _statements(node: ContextNode) -> list[str]:
    """A Detail node's sentences that can be evidence, in the order they were said. An earlier
    answer (it cites pages) restates evidence and is none itself: a turn that cites, or in a
    Consolidated digest the lead of one (`consolidate` keeps its citations)."""
    content = node.content or ""
    if node.type is PageType.CONSOLIDATED:
        pieces = [piece for piece in _LEADS.split(content) if not _CITES.search(piece)]
    else:
        pieces = [] if _CITES.search(content) else [content]
    return [sentence for piece in pieces for sentence in _SENTENCE.split(piece)]


def _evidence(nodes: Sequence[ContextNode], focus: set[str], intent: str) -> tuple[str, list[str]]:
    """The three sentences of the shown evidence that answer best: most of the focus covered, then
    naming a value the intent does not (a name, a number), then the latest (P7: a fact stated
    again later wins), then page order. A page's sentences share its timestamp, so among them the
    later one is the later statement: a turn's text runs forward, and a Consolidated digest lists
    its sources oldest first (an update it folded in outranks the value it replaced). The
    question itself, other questions (while a statement is shown) and a sentence already picked
    are not evidence."""
    scored: list[tuple[float, bool, float, int, str, str]] = []
    for node in nodes:
        if node.view is not View.DETAIL or node.content is None:
            continue
        moment = node.timestamp.timestamp()
        for place, sentence in enumerate(_statements(node)):
            cover = _coverage(sentence, focus)
            if cover > 0:
                text = sentence.strip()
                scored.append((cover, _names_a_value(text, intent), moment, place, node.id, text))
    asked = " ".join(intent.split()).casefold()
    # not the question (a turn in Detail starts with its speaker: "user: <the question>")
    scored = [item for item in scored if not " ".join(item[5].split()).casefold().endswith(asked)]
    if any(
        not item[5].endswith("?") for item in scored
    ):  # a question answers nothing while a statement is shown
        scored = [item for item in scored if not item[5].endswith("?")]
    scored.sort(key=lambda item: (-item[0], not item[1], -item[2], item[4], -item[3], item[5]))
    picked: list[tuple[float, bool, float, int, str, str]] = []
    for item in scored:  # a sentence said twice (an echo, a repeat) is given once: its latest
        if all(item[5] != kept[5] for kept in picked):
            picked.append(item)
        if len(picked) == 3:
            break
    if not picked:
        return "", []
    return " ".join(f"{s} [{pid}]" for *_, pid, s in picked), sorted({item[4] for item in picked})


_MENTIONS = re.compile(r"\s*\[mentions [^\]]*\]$")


def _query_turn(nodes: Sequence[ContextNode], query: str) -> ContextNode | None:
    """The Summary turn whose lead the Query starts with, shown as Detail with the Query's text
    (the host shows such a turn once, in the Query); None when there is none."""
    asked = " ".join(query.split())
    for node in nodes:
        if node.view is not View.SUMMARY or node.type is not PageType.ORIGINAL or not node.summary:
            continue
        speaker, said, text = node.summary.partition(": ")
        head = " ".join(_MENTIONS.sub("", text if said else speaker).rstrip("…").split())
        if head and asked.startswith(head):
            prefix = f"{speaker}: " if said else ""
            return node.model_copy(update={"view": View.DETAIL, "summary": None, "content": prefix + query})
    return None


def _whole_turn(node: ContextNode) -> bool:
    """An Original page shown in Detail: evidence as it was said (a digest is not)."""
    return node.view is View.DETAIL and node.type is PageType.ORIGINAL


def baseline_worker(
    xml: str, intent: str, *, explored: Sequence[str] = (), final: bool = False, max_actions: int = 6
) -> str:
    """One Worker step over the rendered context: a v2.2 envelope (see the module docstring)."""
    document = parse_document(xml)
    focus = set(terms(query_words(intent)))
    tried = {(step.action, step.target) for step in document.trace if step.status != "fault"}
    nodes = _flatten([*document.flow, *(document.background or ())], [])
    asked = _query_turn(nodes, document.query)
    if asked is not None:  # read from the Query, not consulted
        nodes = [asked if node.id == asked.id else node for node in nodes]
    covered = {node.id: _covered(_text(node), focus) for node in nodes}
    weights = _rarity(covered.values(), focus)
    whole = sum(weights.values())
    score = {pid: sum(weights[t] for t in held) / whole if whole else 0.0 for pid, held in covered.items()}
    actions: list[dict[str, Any]] = []
    if not final:
        # a live chat (the Query repeats its latest turn): a Summary is consulted only when it covers
        # more than the turns shown whole (not the question's own turn, not a digest)
        shown = max((score[n.id] for n in nodes if _whole_turn(n) and n is not asked), default=0.0)
        summaries = [
            n
            for n in nodes
            if n.view is View.SUMMARY
            and score[n.id] >= CONSULT_AT
            and (asked is None or score[n.id] > shown)
            and ("Consult", n.id) not in tried
        ]
        for node in sorted(summaries, key=lambda n: (-score[n.id], n.id))[:MAX_CONSULTS]:
            actions.append({"action": "Consult", "reason": f"covers {score[node.id]:.0%}", "id": node.id})
        unpack = [
            n
            for n in nodes
            if n.type is PageType.CONSOLIDATED
            and n.view is View.DETAIL
            and score[n.id] >= CONSULT_AT
            and ("Consult", n.id) not in tried
        ]
        for node in sorted(unpack, key=lambda n: (-score[n.id], n.id))[:MAX_CONSULTS]:
            actions.append({"action": "Consult", "reason": "its parts bear on it", "id": node.id})
        words = [w for w in dict.fromkeys(terms(intent))][:4]
        blocks = [
            n
            for n in nodes
            if n.handle
            and n.type is PageType.CONSOLIDATED
            and n.handle not in explored
            and score[n.id] >= EXPLORE_AT
        ]
        for node in sorted(blocks, key=lambda n: (-score[n.id], n.id))[:1]:
            if words:
                actions.append(
                    {
                        "action": "Explore",
                        "reason": "search the block for the intent",
                        "handle": node.handle,
                        "keywords": words,
                    }
                )
        if actions:
            stale = [
                n
                for n in nodes
                if n.view is View.DETAIL
                and n.type is PageType.ORIGINAL
                and score[n.id] == 0
                and n is not asked
            ]
            for node in sorted(stale, key=lambda n: n.id)[:MAX_SHELVES]:
                actions.append({"action": "Shelve", "reason": "off the intent", "id": node.id})
    actions = actions[:max_actions]
    answer: str | None = None
    rationale = "zooming: " + ", ".join(f"{a['action']} {a.get('id') or a.get('handle')}" for a in actions)
    if not actions:
        text, cited = _evidence(nodes, focus, intent)
        answer = text or "No evidence in view answers this (baseline policy)."
        rationale = f"answered from {', '.join(cited)}" if cited else "nothing in view bears on the intent"
    envelope = {
        "ok": True,
        "meta": {
            "confidence": round(max(score.values(), default=0.0), 2),
            "risk": "low",
            "explain": (rationale or "baseline step")[:280],
            "model": BASELINE_POLICY,
        },
        "data": {"actions": actions, "answer": answer, "rationale": rationale or "baseline step"},
    }
    return json.dumps(envelope, ensure_ascii=False)


def consolidate(pages: Sequence[Page]) -> tuple[str, tuple[str, ...]]:
    """An extractive summary keeping every identifier of the sources, and consensus keywords."""
    leads: list[str] = []
    names: dict[str, None] = {}
    for page in pages:
        text = getattr(page, "content", "") or page.summary
        # an earlier answer stays one in the digest (a digest's own lead is a statement it holds)
        answer = page.type is PageType.ORIGINAL
        cited = " ".join(dict.fromkeys(_CITES.findall(text))) if answer else ""
        leads.append(f"{lead(page.summary or text)} {cited}".strip())
        for name in code_identifiers(page.summary + "\n" + text):
            names.setdefault(name, None)
    summary = " | ".join(dict.fromkeys(x for x in leads if x))
    if names:
        summary += " [ids: " + ", ".join(names) + "]"
    return summary or "(empty)", consensus_keywords(pages)
