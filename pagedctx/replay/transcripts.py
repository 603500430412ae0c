"""Transcripts not made here, run through the paging policy (D3, P13, P15).

Readers (each message keeps its role and text; a tool result knows the call it answers, and a
transcript knows its task statement):
- `openai`: a JSONL file, each line one conversation in the OpenAI chat format: `{"messages":
  [...]}` or the bare list; roles system, user, assistant, tool; `content` a string, a list of
  text parts, or null; assistant `tool_calls` (function name and arguments, in the text as
  `call name(arguments)`); a tool message answers the latest earlier call with its `tool_call_id`.
- `tau-bench`: tau-bench's results files (`*.json`, a list of runs `{"task_id", "trial", "traj"}`,
  as its `run.py` writes them and its `historical_trajectories/` hold them): each run's `traj` is
  one conversation in the OpenAI chat format, read as above.
- `swe-agent`: SWE-agent trajectory files (`*.traj`, JSON): their `history`, the same roles, with
  the assistant's `action` when its content is empty; a tool message answers the call named by its
  `tool_call_ids`, and without ids the observation right after an assistant message answers it
  (SWE-agent runs the action and replies with what it printed). Demonstrations (`is_demo`) are read
  as messages but are not the task.
The task statement is the first user message (SWE-agent: the first that is not a demonstration).

Measure (`measure_transcript`): for every assistant step, the messages before it become a PCP
session's turns (incrementally, one session per transcript, as a live agent's context grows),
asked with the latest user or tool message at the budget. What the step went on to use is the set
of earlier messages it *needs*:
- it quotes them: a run of QUOTE_WORDS consecutive words of the message appears in the step;
- it names what only they hold: an identifier, path or `call()` of the step that appears in at
  most DISTINCT earlier messages.
In view: pagedctx's final context shows the message in full (the JSON contract's `shows`, and
`query_shows`: the question, the latest message, is shown once, in the Query). What the step
used is in view (`*_parts`): every run of words it quotes from the message and every name it uses
that the message holds are in the context's text (a Summary keeps names, an excerpt keeps lines;
for the references, in the texts they keep). Two
references, in the same run, counting message texts alone against the budget; for both, a tool
call and the results that answer it are one unit, kept whole or not at all (a call without its
result, or a result without its call, is not what an agent keeps):
- `recent` (`keep_latest`): the newest units that fit, newest first, stopping at the first that
  does not;
- `task_recent` (`keep_latest(..., task=...)`): the task statement first when it fits, then the
  newest units that fit the rest the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pagedctx.errors import UsageError
from pagedctx.records import scratch_dir

__all__ = [
    "Message",
    "StepMeasure",
    "Transcript",
    "keep_latest",
    "measure_transcript",
    "needed",
    "read_transcripts",
    "recall_table",
    "units",
]

QUOTE_WORDS = 8
DISTINCT = 3
Source = Literal["openai", "swe-agent", "tau-bench"]
SOURCES: tuple[Source, ...] = ("openai", "swe-agent", "tau-bench")


@dataclass(frozen=True)
class Message:
    role: str
    text: str
    answers: int | None = None  # the index of the earlier message whose tool call this one answers


@dataclass(frozen=True)
class Transcript:
    name: str
    messages: tuple[Message, ...]
    task: int | None = None  # the index of the task statement


def _content(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in value]
        return "\n".join(p for p in parts if p)
    return str(value)


def _message(raw: Any, where: str, answers: int | None) -> Message:
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
        raise UsageError(f"{where}: a message must be an object with a string `role`")
    text = _content(raw.get("content"))
    for call in _calls(raw):
        function = call.get("function", {})
        text += f"\ncall {function.get('name', '?')}({function.get('arguments', '')})"
    if not text.strip() and isinstance(raw.get("action"), str):  # SWE-agent: the command it ran
        text = raw["action"]
    role = (
        raw["role"] if raw["role"] != "tool" else f"tool:{raw.get('name') or raw.get('tool_call_id') or ''}"
    )
    return Message(role=role, text=text.strip(), answers=answers)


def _calls(raw: dict[str, Any]) -> list[dict[str, Any]]:
    calls = raw.get("tool_calls") or []
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _answered(raw: dict[str, Any]) -> list[str]:
    """The tool-call ids a message answers (`tool_call_id`; SWE-agent: `tool_call_ids`)."""
    one = raw.get("tool_call_id")
    many = raw.get("tool_call_ids")
    ids = [one] if isinstance(one, str) else many if isinstance(many, list) else []
    return [i for i in ids if isinstance(i, str)]


def _conversation(name: str, raws: list[Any], where: str, *, observations: bool = False) -> Transcript:
    """One transcript: every message, the call each tool result answers, the task statement.

    A tool result answers the latest earlier call with its id (ids are reused across a run).
    `observations`: a non-assistant message right after an assistant message answers it (SWE-agent
    without tool-call ids)."""
    messages: list[Message] = []
    caller: dict[str, int] = {}
    task: int | None = None
    for index, raw in enumerate(raws):
        answers = None
        if isinstance(raw, dict):
            ids = [caller[i] for i in _answered(raw) if i in caller]
            if ids:
                answers = max(ids)
            elif (
                observations
                and raw.get("role") not in ("assistant", "system")
                and index > 0
                and messages[-1].role == "assistant"
            ):
                answers = index - 1
        message = _message(raw, where, answers)
        for call in _calls(raw):
            if isinstance(call.get("id"), str):
                caller[call["id"]] = index
        if task is None and message.role == "user" and not raw.get("is_demo"):
            task = index
        messages.append(message)
    return Transcript(name=name, messages=tuple(messages), task=task)


def _openai(path: Path) -> Iterator[Transcript]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read transcripts {path}: {exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not JSON ({exc.msg})") from None
        messages = value.get("messages") if isinstance(value, dict) else value
        if not isinstance(messages, list):
            raise UsageError(f"{path}:{number}: expected {{'messages': [...]}} or a list of messages")
        yield _conversation(f"{path.name}:{number}", messages, f"{path}:{number}")


def _json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {what} {path}: {exc}") from None


def _tau_bench(path: Path) -> Iterator[Transcript]:
    runs = _json(path, "tau-bench results")
    if not isinstance(runs, list):
        raise UsageError(f"{path}: tau-bench results are a list of runs")
    for number, run in enumerate(runs):
        traj = run.get("traj") if isinstance(run, dict) else None
        if not isinstance(traj, list):
            raise UsageError(f"{path}[{number}]: a tau-bench run has a `traj` list of messages")
        name = f"{path.name}:task {run.get('task_id', number)}:trial {run.get('trial', 0)}"
        yield _conversation(name, traj, f"{path}[{number}]")


def _swe_agent(path: Path) -> Transcript:
    value = _json(path, "SWE-agent trajectory")
    history = value.get("history") if isinstance(value, dict) else None
    if not isinstance(history, list):
        raise UsageError(f"{path}: a SWE-agent trajectory has a `history` list")
    return _conversation(path.name, history, str(path), observations=True)


def read_transcripts(paths: Sequence[Path], source: Source) -> list[Transcript]:
    """Every transcript of the files (folders: their `*.jsonl` / `*.traj` / `*.json` files, sorted)."""
    out: list[Transcript] = []
    pattern = {"openai": "*.jsonl", "swe-agent": "*.traj", "tau-bench": "*.json"}[source]
    for path in paths:
        files = sorted(path.rglob(pattern)) if path.is_dir() else [path]
        for file in files:
            if source == "openai":
                out.extend(_openai(file))
            elif source == "tau-bench":
                out.extend(_tau_bench(file))
            else:
                out.append(_swe_agent(file))
    return out


_WORD = re.compile(r"\S+")


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = [w.lower() for w in _WORD.findall(text)]
    return {tuple(words[i : i + QUOTE_WORDS]) for i in range(len(words) - QUOTE_WORDS + 1)}


@dataclass(frozen=True)
class Evidence:
    """What a step uses of one earlier message: the runs of words it quotes, the names it uses
    that the message is one of the few to hold."""

    quotes: frozenset[tuple[str, ...]] = frozenset()
    names: frozenset[str] = frozenset()

    def seen_in(self, shingles: set[tuple[str, ...]], text: str) -> bool:
        """Whether all of it is visible in a text (`shingles`: that text's `_shingles`)."""
        return self.quotes <= shingles and all(name in text for name in self.names)


def evidence(step: str, earlier: Sequence[str]) -> dict[int, Evidence]:
    """Per earlier message the step uses (quoted, or the only holder of a name it uses), what of
    it the step uses."""
    from pagedctx.text import code_identifiers

    quoted = _shingles(step)
    quotes = {i: frozenset(quoted & _shingles(text)) for i, text in enumerate(earlier)}
    names: dict[int, set[str]] = {}
    for name in code_identifiers(step):
        holders = [i for i, text in enumerate(earlier) if name in text]
        if 0 < len(holders) <= DISTINCT:
            for i in holders:
                names.setdefault(i, set()).add(name)
    return {
        i: Evidence(quotes=quotes[i], names=frozenset(names.get(i, ())))
        for i in range(len(earlier))
        if quotes[i] or i in names
    }


def needed(step: str, earlier: Sequence[str]) -> set[int]:
    """The earlier messages a step uses: quoted, or the only holders of a name it uses."""
    return set(evidence(step, earlier))


def visible(used: dict[int, Evidence], text: str) -> set[int]:
    """The messages whose used parts (`evidence`) are all in a context's `text`."""
    shingles = _shingles(text)
    return {i for i, part in used.items() if part.seen_in(shingles, text)}


def context_text(xml: str) -> str:
    """The text a reader of a `<PagedContext>` sees: its elements' text, unescaped, one element
    a line."""
    from lxml import etree

    root = etree.fromstring(xml.encode())
    return "\n".join(str(text) for text in root.itertext())


@dataclass
class StepMeasure:
    step: int  # the assistant message's index
    needed: set[int]
    pagedctx: set[int] = field(default_factory=set)
    recent: set[int] = field(default_factory=set)
    task_recent: set[int] = field(default_factory=set)
    tokens: int = 0  # pagedctx's whole rendered context
    # the needed messages whose used parts (quotes, names) are visible somewhere in the context
    pagedctx_parts: set[int] = field(default_factory=set)
    recent_parts: set[int] = field(default_factory=set)
    task_recent_parts: set[int] = field(default_factory=set)


def units(messages: Sequence[Message]) -> list[list[int]]:
    """The messages grouped as an agent keeps them: a tool call with the results answering it,
    every other message alone; per message index, the indices of its unit (ascending)."""
    root: list[int] = []
    for index, message in enumerate(messages):
        answers = message.answers
        root.append(root[answers] if answers is not None and answers < index else index)
    members: dict[int, list[int]] = {}
    for index, head in enumerate(root):
        members.setdefault(head, []).append(index)
    return [members[head] for head in root]


def keep_latest(
    messages: Sequence[Message], costs: Sequence[int], budget: int, task: int | None = None
) -> set[int]:
    """The reference contexts: the newest units whose texts fit the budget together, newest first,
    stopping at the first that does not (what most agents keep); with `task`, that message's unit
    first when it fits, then the newest units in what is left. `costs`: tokens per message."""
    grouped = units(messages)
    kept: set[int] = set()
    used = 0
    if task is not None and task < len(messages):
        cost = sum(costs[i] for i in grouped[task])
        if cost <= budget:
            kept.update(grouped[task])
            used = cost
    for index in range(len(messages) - 1, -1, -1):
        if index in kept:
            continue
        cost = sum(costs[i] for i in grouped[index])
        if used + cost > budget:
            break
        kept.update(grouped[index])
        used += cost
    return kept


def _joined(texts: Sequence[str], kept: set[int]) -> str:
    return "\n".join(texts[i] for i in sorted(kept))


def measure_transcript(transcript: Transcript, budget: int, config: Any, counter: Any) -> list[StepMeasure]:
    """Per assistant step with something needed: what pagedctx and the reference kept in view."""
    from pagedctx.engine import fixed_clock
    from pagedctx.replay.recording import private_config
    from pagedctx.session import Session

    texts = [m.text for m in transcript.messages]
    costs = [counter.count(text) for text in texts]
    out: list[StepMeasure] = []
    with scratch_dir("pagedctx-transcript-") as scratch:
        private = private_config(config, Path(scratch))
        clock = fixed_clock(datetime(2026, 1, 1, tzinfo=UTC))
        with Session.open(config=private, session_id="transcript", clock=clock) as session:
            added = 0
            for index, message in enumerate(transcript.messages):
                if message.role != "assistant" or index == 0:
                    continue
                used = evidence(message.text, texts[:index])
                wanted = set(used)
                if not wanted:
                    continue
                fresh = [(transcript.messages[i].role, texts[i] or "(empty)") for i in range(added, index)]
                session.add_turns(fresh)
                added = index
                asked = next(
                    (
                        texts[i]
                        for i in range(index - 1, -1, -1)
                        if transcript.messages[i].role != "assistant"
                    ),
                    texts[index - 1],
                )
                result = session.ask(asked or "continue", budget=budget)
                shown = {s for page in result.contract.get("pages", []) for s in page.get("shows", [])}
                shown.update(result.contract.get("query_shows", []))
                in_view = {int(s[1:]) - 1 for s in shown if re.fullmatch(r"t\d+", s)}
                earlier = transcript.messages[:index]
                recent = keep_latest(earlier, costs, budget)
                task_recent = keep_latest(earlier, costs, budget, transcript.task)
                out.append(
                    StepMeasure(
                        step=index,
                        needed=wanted,
                        pagedctx=in_view & wanted,
                        recent=recent & wanted,
                        task_recent=task_recent & wanted,
                        tokens=result.tokens,
                        pagedctx_parts=visible(used, context_text(result.xml)),
                        recent_parts=visible(used, _joined(texts, recent)),
                        task_recent_parts=visible(used, _joined(texts, task_recent)),
                    )
                )
    return out


def recall_table(
    transcripts: Sequence[Transcript], budgets: Sequence[int], config: Any, counter: Any
) -> list[dict[str, Any]]:
    """Per budget: steps measured, messages needed, and the share of them in view for pagedctx and
    for both references (micro-averaged over every needed message)."""
    rows = []
    for budget in budgets:
        steps = [s for t in transcripts for s in measure_transcript(t, budget, config, counter)]
        wanted = sum(len(s.needed) for s in steps)
        rows.append(
            {
                "budget": budget,
                "transcripts": len(transcripts),
                "steps": len(steps),
                "needed": wanted,
                "pagedctx": sum(len(s.pagedctx) for s in steps) / wanted if wanted else 0.0,
                "recent": sum(len(s.recent) for s in steps) / wanted if wanted else 0.0,
                "task_recent": sum(len(s.task_recent) for s in steps) / wanted if wanted else 0.0,
                "pagedctx_parts": sum(len(s.pagedctx_parts) for s in steps) / wanted if wanted else 0.0,
                "recent_parts": sum(len(s.recent_parts) for s in steps) / wanted if wanted else 0.0,
                "task_recent_parts": sum(len(s.task_recent_parts) for s in steps) / wanted if wanted else 0.0,
                "tokens_mean": sum(s.tokens for s in steps) / len(steps) if steps else 0.0,
            }
        )
    return rows
