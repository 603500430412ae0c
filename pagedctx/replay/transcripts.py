"""Transcripts not made here, run through the paging policy (D3, P13, P15).

Readers:
- `openai`: a JSONL file, each line one conversation in the OpenAI chat format: `{"messages":
  [...]}` or the bare list; roles system, user, assistant, tool; `content` a string, a list of
  text parts, or null; assistant `tool_calls` (function name and arguments).
- `swe-agent`: SWE-agent trajectory files (`*.traj`, JSON): their `history`, the same roles, with
  the assistant's `action` when its content is empty.

Measure (`measure_transcript`): for every assistant step, the messages before it become a PCP
session's turns (incrementally, one session per transcript, as a live agent's context grows),
asked with the latest user or tool message at the budget. What the step went on to use is the set
of earlier messages it *needs*:
- it quotes them: a run of QUOTE_WORDS consecutive words of the message appears in the step;
- it names what only they hold: an identifier, path or `call()` of the step that appears in at
  most DISTINCT earlier messages.
In view: pagedctx's final context shows the message in full (the JSON contract's `shows`). The
reference, in the same run: the most recent messages that fit the budget (their texts alone).
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
    "measure_transcript",
    "needed",
    "read_transcripts",
    "recall_table",
]

QUOTE_WORDS = 8
DISTINCT = 3
INTENT_CHARS = 2000  # the latest user or tool message, as the session's intent, is cut here
Source = Literal["openai", "swe-agent"]


@dataclass(frozen=True)
class Message:
    role: str
    text: str


@dataclass(frozen=True)
class Transcript:
    name: str
    messages: tuple[Message, ...]


def _content(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in value]
        return "\n".join(p for p in parts if p)
    return str(value)


def _message(raw: Any, where: str) -> Message:
    if not isinstance(raw, dict) or not isinstance(raw.get("role"), str):
        raise UsageError(f"{where}: a message must be an object with a string `role`")
    text = _content(raw.get("content"))
    calls = raw.get("tool_calls") or []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        text += f"\ncall {function.get('name', '?')}({function.get('arguments', '')})"
    if not text.strip() and isinstance(raw.get("action"), str):  # SWE-agent: the command it ran
        text = raw["action"]
    role = (
        raw["role"] if raw["role"] != "tool" else f"tool:{raw.get('name') or raw.get('tool_call_id') or ''}"
    )
    return Message(role=role, text=text.strip())


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
        yield Transcript(
            name=f"{path.name}:{number}",
            messages=tuple(_message(m, f"{path}:{number}") for m in messages),
        )


def _swe_agent(path: Path) -> Transcript:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read SWE-agent trajectory {path}: {exc}") from None
    history = value.get("history") if isinstance(value, dict) else None
    if not isinstance(history, list):
        raise UsageError(f"{path}: a SWE-agent trajectory has a `history` list")
    return Transcript(name=path.name, messages=tuple(_message(m, str(path)) for m in history))


def read_transcripts(paths: Sequence[Path], source: Source) -> list[Transcript]:
    """Every transcript of the files (folders: their `*.jsonl` / `*.traj` files, sorted)."""
    out: list[Transcript] = []
    pattern = "*.jsonl" if source == "openai" else "*.traj"
    for path in paths:
        files = sorted(path.rglob(pattern)) if path.is_dir() else [path]
        for file in files:
            if source == "openai":
                out.extend(_openai(file))
            else:
                out.append(_swe_agent(file))
    return out


_WORD = re.compile(r"\S+")


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = [w.lower() for w in _WORD.findall(text)]
    return {tuple(words[i : i + QUOTE_WORDS]) for i in range(len(words) - QUOTE_WORDS + 1)}


def needed(step: str, earlier: Sequence[str]) -> set[int]:
    """The earlier messages a step uses: quoted, or the only holders of a name it uses."""
    from pagedctx.text import code_identifiers

    quoted = _shingles(step)
    out = {i for i, text in enumerate(earlier) if quoted & _shingles(text)}
    for name in code_identifiers(step):
        holders = [i for i, text in enumerate(earlier) if name in text]
        if 0 < len(holders) <= DISTINCT:
            out.update(holders)
    return out


@dataclass
class StepMeasure:
    step: int  # the assistant message's index
    needed: set[int]
    pagedctx: set[int] = field(default_factory=set)
    recent: set[int] = field(default_factory=set)
    tokens: int = 0  # pagedctx's whole rendered context


def _recent(texts: Sequence[str], budget: int, counter: Any) -> set[int]:
    """The most recent messages whose texts fit the budget together (what most agents keep)."""
    kept: set[int] = set()
    used = 0
    for index in range(len(texts) - 1, -1, -1):
        used += counter.count(texts[index])
        if used > budget:
            break
        kept.add(index)
    return kept


def measure_transcript(transcript: Transcript, budget: int, config: Any, counter: Any) -> list[StepMeasure]:
    """Per assistant step with something needed: what pagedctx and the reference kept in view."""
    from pagedctx.engine import fixed_clock
    from pagedctx.replay.recording import private_config
    from pagedctx.session import Session

    texts = [m.text for m in transcript.messages]
    out: list[StepMeasure] = []
    with scratch_dir("pagedctx-transcript-") as scratch:
        private = private_config(config, Path(scratch))
        clock = fixed_clock(datetime(2026, 1, 1, tzinfo=UTC))
        with Session.open(config=private, session_id="transcript", clock=clock) as session:
            added = 0
            for index, message in enumerate(transcript.messages):
                if message.role != "assistant" or index == 0:
                    continue
                wanted = needed(message.text, texts[:index])
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
                result = session.ask(asked[:INTENT_CHARS] or "continue", budget=budget)
                shown = {s for page in result.contract.get("pages", []) for s in page.get("shows", [])}
                in_view = {int(s[1:]) - 1 for s in shown if re.fullmatch(r"t\d+", s)}
                out.append(
                    StepMeasure(
                        step=index,
                        needed=wanted,
                        pagedctx=in_view & wanted,
                        recent=_recent(texts[:index], budget, counter) & wanted,
                        tokens=result.tokens,
                    )
                )
    return out


def recall_table(
    transcripts: Sequence[Transcript], budgets: Sequence[int], config: Any, counter: Any
) -> list[dict[str, Any]]:
    """Per budget: steps measured, messages needed, and the share of them in view for pagedctx and
    for the most recent messages that fit (micro-averaged over every needed message)."""
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
                "tokens_mean": sum(s.tokens for s in steps) / len(steps) if steps else 0.0,
            }
        )
    return rows
