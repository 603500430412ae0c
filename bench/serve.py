"""`pagedctx serve` under load (issue 15): latency it adds over the baseline worker alone, requests/s,
replica memory per session as turns pile up, and cross-session leaks.

    python bench/serve.py [--sessions 32] [--turns 50] [--time-limit 900] [--quick]

Everything runs on 127.0.0.1. The clients are the real `openai` SDK (`AsyncOpenAI`), one task per
session, each sending its conversation the OpenAI way: the whole message history every request,
the replies appended, the session pinned with `X-Session-Id`. Each session states one canary fact
of its own early ("my locker code is K7-...") and asks about it last.

1. Reference ("the baseline worker alone"): the same sessions, the same requests, the same
   concurrency against a plain OpenAI-shape server (FastAPI on uvicorn, another process started by
   this script) that renders the request's messages (the most recent that fit the same budget) as a
   flat `<PagedContext>` of Original pages in Detail (`render_state`: no routing, no governance, no
   rounds, no store, no Ray) and answers with one `baseline_worker(final=True)` call.
2. `pagedctx serve --replicas 1` (SQLite store, local profile) is started as a subprocess.
3. Memory: fresh sessions receive requests that paste ten user/assistant pairs of history plus one
   new user message (the server adds only what it does not hold), until 1,000 and then 10,000
   turns are held; the RSS of the Serve replica (and of the whole server's process tree) is read
   from /proc at each point.
4. Concurrency: the sessions of the reference, all at once, against pagedctx serve: per-request
   latency p50/p99 and requests/s, and the ratio to the reference.
3b. History: one session grows to 100, 1,000 and 10,000 turns (requests pasting 100 pairs at once);
   at each point `--probes` requests of one new user message (only it sent: the server holds the
   rest) are timed: a request must cost what it adds, not the history held. With the rounds each
   took (the reply's `pagedctx.rounds`) and the latency a round: a longer history can make the
   Worker consult more before it answers, which is the paging's work, not a cost of holding it.
5. Leaks: every session is asked for its canary; its answer and its `<PagedContext>`
   (`GET /v1/sessions/{id}/context`) must never show another session's canary.

Bounded: `--time-limit` seconds in all (phases stop early and say so); the server is stopped with
SIGTERM in a `finally`, and every process of its tree is waited for. No timed assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import statistics
import string
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request  # module level: FastAPI resolves the route's annotation here

ROOT = Path(__file__).resolve().parents[1]
CANARY = re.compile(r"\bK7-[A-Z0-9]{6}\b")
HOST = "127.0.0.1"

# --- conversations ---------------------------------------------------------------------------------

PEOPLE = [
    "my sister",
    "my brother",
    "my neighbour",
    "my manager",
    "a friend from school",
    "my dad",
    "my aunt",
]
CITIES = ["Lisbon", "Kyoto", "Oaxaca", "Tallinn", "Montreal", "Cape Town", "Hanoi", "Valparaiso", "Bergen"]
DISHES = ["a mushroom risotto", "lentil soup", "banana bread", "a Thai green curry", "shakshuka", "gnocchi"]
HOBBIES = ["bouldering", "watercolour painting", "sourdough baking", "trail running", "chess", "the cello"]
THINGS = ["my bike's gears", "the kitchen tap", "a flaky wifi router", "my laptop fan", "the garden hose"]
MONTHS = ["March", "April", "June", "September", "October", "December"]
ADJ = ["great", "a bit bland", "too salty", "surprisingly good", "burnt on one side", "better than last time"]
USER_LINES = [
    "I'm planning a trip to {city} in {month}; what should I not miss there?",
    "Yesterday I cooked {dish} and it came out {adj}.",
    "{person} just took up {hobby}, and now I'm tempted to try it too.",
    "Any idea how to fix {thing}? It started acting up last week.",
    "I slept badly again, maybe it's the coffee after lunch.",
    "Remind me later to call {person} about the weekend in {city}.",
    "How long should I rest between {hobby} sessions as a beginner?",
    "We're hosting dinner on Friday; I think I'll make {dish}.",
    "The train to work was {n} minutes late three days in a row.",
    "I finally finished that book about {city}; the ending was {adj}.",
    "Do you think {month} is a good time to start {hobby}?",
    "My budget for the {city} trip is about {n}00 euros, flights not included.",
    "Quick one: what goes well with {dish}?",
    "{person} recommended a podcast about {hobby}, I listened to {n} episodes.",
]
REPLY_LINES = [
    "Sure. For {city} in {month}, the old town early in the morning is worth it.",
    "{dish} is forgiving: taste as you go and add acid at the end.",
    "For {thing}, start with the simplest cause and check one thing at a time.",
    "Beginners in {hobby} usually do best with a rest day in between.",
    "That sounds {adj}; keep notes so next time is easier.",
    "Noted. I'll keep that in mind for the weekend plans.",
]


def _fill(template: str, rng: random.Random) -> str:
    return template.format(
        person=rng.choice(PEOPLE),
        city=rng.choice(CITIES),
        dish=rng.choice(DISHES),
        hobby=rng.choice(HOBBIES),
        thing=rng.choice(THINGS),
        month=rng.choice(MONTHS),
        adj=rng.choice(ADJ),
        n=rng.randint(2, 19),
    )


@dataclass
class Conversation:
    """One client's session: its id, canary, the user lines it will send, and its messages so far."""

    sid: str
    canary: str
    rng: random.Random
    messages: list[dict[str, str]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)

    @staticmethod
    def make(sid: str, seed: int) -> Conversation:
        rng = random.Random(seed)
        canary = "K7-" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(6))
        return Conversation(sid, canary, rng)

    def user_line(self, number: int, last: bool) -> str:
        if number == 1:
            return f"By the way, my locker code at the gym is {self.canary}, in case I forget it."
        if last:
            return "What is my locker code at the gym?"
        return _fill(self.rng.choice(USER_LINES), self.rng)

    def pasted_pairs(self, pairs: int) -> list[dict[str, str]]:
        """History pasted in one request (a transcript from elsewhere): user/assistant pairs."""
        out = []
        for _ in range(pairs):
            out.append({"role": "user", "content": _fill(self.rng.choice(USER_LINES), self.rng)})
            out.append({"role": "assistant", "content": _fill(self.rng.choice(REPLY_LINES), self.rng)})
        return out


# --- the reference server (another process: `python bench/serve.py --reference-server PORT BUDGET`) ---


def reference_server(port: int, budget: int) -> None:
    """An OpenAI-shape chat endpoint: flat render of the recent messages, one baseline Worker call."""
    from datetime import timedelta

    import uvicorn
    from fastapi import FastAPI
    from starlette.concurrency import run_in_threadpool

    from pagedctx.host.roles.baseline import baseline_worker
    from pagedctx.pages import Origin, OriginalPage, SessionState, Transition, View, add_pages
    from pagedctx.protocol.paged_context.render import render_state
    from pagedctx.protocol.tokens import token_counter

    counter = token_counter()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    def render(messages: list[tuple[str, str]], intent: str) -> tuple[str, int]:
        pages = [
            OriginalPage(id=f"{n:08x}", depth=0, timestamp=start + timedelta(seconds=n),
                         summary=f"{role}: {text[:80]}", content=f"{role}: {text}", origin=Origin.HISTORY)
            for n, (role, text) in enumerate(messages)
        ]  # fmt: skip
        keep = len(pages)
        while True:  # the most recent messages whose document fits the budget
            shown = pages[len(pages) - keep :]
            moved = add_pages(SessionState(), shown, views={p.id: View.DETAIL for p in shown})
            assert isinstance(moved, Transition), moved
            xml = render_state(moved.state, current_time=start + timedelta(days=1), query=intent)
            tokens = counter.count(xml)
            if tokens <= budget or keep <= 1:
                return xml, tokens
            keep = min(keep - 1, int(keep * budget / tokens * 0.95))

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        messages = [(m["role"], str(m.get("content") or "").strip()) for m in body["messages"]]
        messages = [(role, text) for role, text in messages if text]
        intent = next(text for role, text in reversed(messages) if role == "user")
        xml, tokens = render(messages, intent)
        envelope = json.loads(baseline_worker(xml, intent, final=True))
        text = envelope["data"]["answer"] or ""
        return {
            "id": "chatcmpl-reference",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "reference-baseline",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens},
        }

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {"id": "reference-baseline", "object": "model", "created": 0, "owned_by": "bench"}
        return {"object": "list", "data": [card]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        return await run_in_threadpool(answer, await request.json())

    uvicorn.run(app, host=HOST, port=port, log_level="warning")


# --- processes -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _get(url: str, timeout: float = 30) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _started(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Proc:
    """A server this script started, the folder of its log, and its process tree once seen."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path
    seen: dict[int, str] = field(default_factory=dict)  # pid -> its start time (a pid is reused)

    def tree(self) -> list[int]:
        found = descendants(self.process.pid)
        for pid in found:
            self.seen.setdefault(pid, _started(pid))
        return found

    def replicas(self) -> list[int]:
        return [pid for pid in self.tree() if "ServeReplica" in _cmdline(pid)]

    def wait_healthy(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise SystemExit(f"server exited with {self.process.returncode}:\n{tail}")
            try:
                if _get(self.url + "/health", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"server not healthy after {seconds:.0f} s; log: {self.log}")

    def stop(self) -> list[str]:
        """SIGTERM, wait for it, then for every process of its tree; returns those left (killed)."""
        self.tree()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        deadline = time.monotonic() + 30
        left = [pid for pid, born in self.seen.items() if _started(pid) == born]
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = [pid for pid in left if _started(pid) == self.seen[pid]]
        named = [f"{pid} {_cmdline(pid)[:120]}" for pid in left]
        for pid in left:  # started by this script (same pid, same start time): end them by id
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return named


def start(command: list[str], env: dict[str, str], log: Path, port: int) -> Proc:
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    return Proc(process, f"http://{HOST}:{port}", log)


# --- clients ---------------------------------------------------------------------------------------


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    context_tokens: list[int] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)  # pagedctx's rounds per request (its extra field)
    requests: int = 0
    stopped: bool = False


async def send(
    client: Any, model: str, conv: Conversation, messages: list[dict[str, str]], tally: Tally
) -> str:
    started = time.perf_counter()
    try:
        reply = await client.chat.completions.create(
            model=model, messages=messages, extra_headers={"X-Session-Id": conv.sid}
        )
    except Exception as exc:  # counted and reported: a bench reports failures, it does not stop
        tally.errors.append(f"{conv.sid}: {type(exc).__name__}: {str(exc)[:200]}")
        return ""
    tally.latencies.append(time.perf_counter() - started)
    tally.requests += 1
    if reply.usage is not None:
        tally.prompt_tokens.append(reply.usage.prompt_tokens)
    extra = (reply.model_extra or {}).get("pagedctx") or {}  # the server's extra field
    if "rounds" in extra:
        tally.rounds.append(int(extra["rounds"]))
    if "context_tokens" in extra:
        tally.context_tokens.append(int(extra["context_tokens"]))
    elif reply.usage is not None:  # the reference sends one context: its prompt
        tally.context_tokens.append(reply.usage.prompt_tokens)
    return str(reply.choices[0].message.content or "")


async def chat_session(
    client: Any, *, model: str, conv: Conversation, turns: int, tally: Tally, deadline: float
) -> None:
    """`turns` user messages, the whole history each time, the answers appended."""
    for number in range(turns):
        if time.monotonic() > deadline:
            tally.stopped = True
            return
        text = conv.user_line(number, last=number == turns - 1)
        conv.messages.append({"role": "user", "content": text})
        answer = await send(client, model, conv, list(conv.messages), tally)
        conv.answers.append(answer)
        conv.messages.append({"role": "assistant", "content": answer or "(no answer)"})


async def concurrency(
    url: str, convs: list[Conversation], turns: int, deadline: float
) -> tuple[Tally, float]:
    import openai

    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300) as client:
        model = (await client.models.list()).data[0].id
        tally = Tally()
        started = time.perf_counter()
        await asyncio.gather(
            *(
                chat_session(client, model=model, conv=c, turns=turns, tally=tally, deadline=deadline)
                for c in convs
            )
        )
        return tally, time.perf_counter() - started


async def warm(url: str, prefix: str) -> int:
    """A few requests of an extra session: imports, lexicon and schema loaded before anything is timed."""
    conv = Conversation.make(f"{prefix}-warm", 999)
    await concurrency(url, [conv], 3, time.monotonic() + 300)
    return len(conv.messages)


@dataclass
class MemoryPoint:
    label: str
    sessions: int
    turns: int
    replica_mb: float
    tree_mb: float


async def memory(
    server: Proc,
    *,
    convs: list[Conversation],
    targets: list[int],
    pairs: int,
    deadline: float,
    workers: int = 4,
) -> tuple[list[MemoryPoint], Tally, bool]:
    """Requests of `pairs` pasted pairs plus one user message, round robin, until each target is held."""
    import openai

    points: list[MemoryPoint] = []
    held = {c.sid: 0 for c in convs}
    locks = {c.sid: asyncio.Lock() for c in convs}  # a session's requests in order
    tally = Tally()
    per = 2 * pairs + 2  # turns a request adds: the pasted pairs, the new user message, the reply
    async with openai.AsyncOpenAI(
        base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=300
    ) as client:
        model = (await client.models.list()).data[0].id
        turn = 0
        for target in targets:
            queue: asyncio.Queue[Conversation] = asyncio.Queue()
            needed = max(0, -(-(target - sum(held.values())) // per))
            for n in range(needed):
                queue.put_nowait(convs[(turn + n) % len(convs)])
            turn += needed

            async def worker(queue: asyncio.Queue[Conversation] = queue) -> None:
                while not queue.empty() and time.monotonic() < deadline:
                    conv = queue.get_nowait()
                    async with locks[conv.sid]:
                        first = not conv.messages
                        new = conv.pasted_pairs(pairs)
                        if first:  # the canary, stated in the first pasted history
                            new[0] = {"role": "user", "content": conv.user_line(1, last=False)}
                        new.append({"role": "user", "content": conv.user_line(2, last=False)})
                        answer = await send(client, model, conv, [*conv.messages, *new], tally)
                        conv.messages += [*new, {"role": "assistant", "content": answer or "(no answer)"}]
                        held[conv.sid] = len(conv.messages)

            await asyncio.gather(*(worker() for _ in range(workers)))
            if time.monotonic() >= deadline:
                tally.stopped = True
            await asyncio.sleep(2.0)  # background consolidation of the last replies settles
            total = sum(held.values())
            replicas = server.replicas()
            points.append(
                MemoryPoint(
                    f"{target:,} turns" if not tally.stopped else f"{total:,} turns (time limit)",
                    sum(1 for v in held.values() if v),
                    total,
                    sum(rss_mb(p) for p in replicas),
                    sum(rss_mb(p) for p in server.tree()),
                )
            )
            if tally.stopped:
                break
    return points, tally, tally.stopped


@dataclass
class HistoryPoint:
    turns: int
    latencies: list[float]
    rounds: list[int] = field(default_factory=list)


async def history(
    url: str, *, marks: list[int], bulk: int, probes: int, deadline: float
) -> tuple[list[HistoryPoint], Tally]:
    """One session grows to each mark in `marks` (requests pasting `bulk` pairs of history at
    once); at each mark, `probes` requests of one new user message each (only that message sent,
    the session pinned: the server holds the rest) are timed. What a request costs the host as
    the history it holds grows from 100 to 10,000 turns."""
    import openai

    conv = Conversation.make("history-000", 7000)
    tally, probe_tally = Tally(), Tally()
    points: list[HistoryPoint] = []
    held = 0
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=600) as client:
        model = (await client.models.list()).data[0].id
        for mark in marks:
            while held < mark and time.monotonic() < deadline:
                pairs = max(1, min(bulk, (mark - held) // 2))
                new = [*conv.pasted_pairs(pairs), {"role": "user", "content": conv.user_line(2, last=False)}]
                for n, message in enumerate(new):  # each its own: a held reply repeated reads as overlap
                    message["content"] += f" (#{held + n})"
                await send(client, model, conv, new, tally)
                held += len(new) + 1  # and the reply
            if held < mark:
                tally.stopped = True
                break
            probe_tally = Tally()
            for _ in range(probes):
                question = {"role": "user", "content": f"{conv.user_line(2, last=False)} (#{held})"}
                await send(client, model, conv, [question], probe_tally)
                held += 2
            points.append(HistoryPoint(held, list(probe_tally.latencies), list(probe_tally.rounds)))
            tally.errors += probe_tally.errors
    return points, tally


async def leak_check(url: str, convs: list[Conversation], deadline: float) -> tuple[int, int, int, list[str]]:
    """Ask every session for its canary; count own canaries found and foreign ones seen anywhere."""
    import openai

    canaries = {c.canary: c.sid for c in convs}
    own = leaks = checked = 0
    found: list[str] = []
    gate = asyncio.Semaphore(4)
    tally = Tally()
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300) as client:
        model = (await client.models.list()).data[0].id

        async def one(conv: Conversation) -> None:
            nonlocal own, leaks, checked
            async with gate:
                if time.monotonic() > deadline:
                    return
                conv.messages.append({"role": "user", "content": conv.user_line(0, last=True)})
                answer = await send(client, model, conv, list(conv.messages), tally)
                conv.answers.append(answer)
                status, xml = await asyncio.to_thread(_get, f"{url}/v1/sessions/{conv.sid}/context")
            checked += 1
            if status != 200:
                found.append(f"{conv.sid}: context {status}: {xml[:200]}")
            seen = (
                set(CANARY.findall(answer))
                | set(CANARY.findall(xml))
                | {c for a in conv.answers for c in CANARY.findall(a)}
            )
            own += conv.canary in seen
            if conv.canary not in seen:
                found.append(
                    f"{conv.sid} ({len(conv.messages)} messages): own canary in neither answer nor context"
                )
            foreign = seen - {conv.canary}
            leaks += len(foreign)
            found.extend(f"{conv.sid} shows {c} of {canaries.get(c, '?')}" for c in sorted(foreign))

        await asyncio.gather(*(one(c) for c in convs))
    return checked, own, leaks, found + tally.errors


# --- report ----------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def keep_logs(tmp: Path, dest: Path | None) -> None:
    """The servers' logs (tracebacks of 500s) copied to `dest`, if given, before the scratch goes."""
    if dest is not None:
        dest.mkdir(parents=True, exist_ok=True)
        for log in tmp.glob("*.log"):
            (dest / log.name).write_bytes(log.read_bytes())


def print_history(grown: list[HistoryPoint], probes: int) -> None:
    """The history phase's table: a request's latency at each point, against the first point."""
    if not grown or not grown[0].latencies:
        return
    first = pct(grown[0].latencies, 0.5)
    print(
        f"\none session's history grown (pasted 100 pairs a request); at each point {probes} "
        "requests of one new user message (only it sent), timed:\n"
    )
    print("| turns held | p50 ms | max ms | p50 / p50 at the first point | rounds, mean | p50 ms a round |")
    print("|---|---|---|---|---|---|")
    for point in grown:
        if point.latencies:
            mid = pct(point.latencies, 0.5)
            most = max(point.latencies)
            rounds = f"{statistics.mean(point.rounds):.1f}" if point.rounds else "-"
            per = "-"
            if len(point.rounds) == len(point.latencies):
                each = [t / r for t, r in zip(point.latencies, point.rounds, strict=True)]
                per = f"{pct(each, 0.5) * 1e3:,.0f}"
            cells = [f"{point.turns:,}", f"{mid * 1e3:,.0f}", f"{most * 1e3:,.0f}", f"{mid / first:.2f}x"]
            print("| " + " | ".join([*cells, rounds, per]) + " |")


def main() -> None:  # noqa: PLR0915 - one run, its phases in order
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32, help="concurrent sessions (phase 4)")
    parser.add_argument("--turns", type=int, default=50, help="user messages per session (phase 4)")
    parser.add_argument("--memory-sessions", type=int, default=100)
    parser.add_argument(
        "--memory-turns", default="1000,5000,10000,20000", help="turns held at which RSS is read"
    )
    parser.add_argument(
        "--pairs", type=int, default=10, help="user/assistant pairs pasted per memory request"
    )
    parser.add_argument(
        "--history-turns", default="100,1000,10000", help="turns one session holds when timed (phase 3b)"
    )
    parser.add_argument("--probes", type=int, default=15, help="requests timed at each of those points")
    parser.add_argument("--logs", type=Path, default=None, help="copy the servers' logs into this folder")
    parser.add_argument("--time-limit", type=float, default=900.0, help="seconds in all")
    parser.add_argument("--quick", action="store_true", help="4 sessions x 5 turns, memory at 100/300 turns")
    parser.add_argument(
        "--reference-server", nargs=2, type=int, metavar=("PORT", "BUDGET"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.reference_server:
        reference_server(*args.reference_server)
        return
    history_marks = [int(t) for t in args.history_turns.split(",")]
    if args.quick:
        args.sessions, args.turns, args.memory_sessions, args.memory_turns = 4, 5, 4, "100,300"
        history_marks, args.probes = [100, 400], 3
    targets = [int(t) for t in args.memory_turns.split(",")]
    began = time.monotonic()
    deadline = began + args.time_limit
    from pagedctx.config import load_config

    budget = load_config(profile="local").budget
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1")
    notes: list[str] = []

    with tempfile.TemporaryDirectory(prefix="pagedctx-bench-serve-") as scratch:
        tmp = Path(scratch)
        env["PAGEDCTX_HOME"] = str(tmp / "home")
        # The local profile, with a rate limit no bench reaches (the limiter is not what is measured).
        profile = tmp / "bench-local.yaml"
        local = (ROOT / "pagedctx" / "configs" / "profiles" / "local.yaml").read_text(encoding="utf-8")
        profile.write_text(local + "\nserve:\n  requests_per_minute: 100000000\n", encoding="utf-8")

        def conversations(prefix: str) -> list[Conversation]:
            return [Conversation.make(f"{prefix}{n:03d}", 1000 + n) for n in range(args.sessions)]

        # 1. the reference, alone on the machine
        port = free_port()
        ref = start(
            [sys.executable, __file__, "--reference-server", str(port), str(budget)],
            env,
            tmp / "ref.log",
            port,
        )
        try:
            ref.wait_healthy(120)
            asyncio.run(warm(ref.url, "ref"))
            ref_convs = conversations("chat-")
            ref_tally, ref_wall = asyncio.run(concurrency(ref.url, ref_convs, args.turns, deadline))
        finally:
            ref.stop()

        # 2. pagedctx serve
        port = free_port()
        command = [sys.executable, "-m", "pagedctx", "serve", "--port", str(port), "--replicas", "1"]
        command += ["--store", f"sqlite:///{tmp}/serve.db", "--profile", str(profile)]
        server = start(command, env, tmp / "serve.log", port)
        left: list[str] = []
        try:
            started = time.perf_counter()
            server.wait_healthy(120)
            ready = time.perf_counter() - started
            warm_turns = asyncio.run(warm(server.url, "srv"))
            warm_replica = sum(rss_mb(p) for p in server.replicas())
            warm_tree = sum(rss_mb(p) for p in server.tree())
            points = [MemoryPoint("warm (1 session)", 1, warm_turns, warm_replica, warm_tree)]

            # 3. memory
            mem_convs = [Conversation.make(f"mem-{n:03d}", 5000 + n) for n in range(args.memory_sessions)]
            reached, mem_tally, mem_stopped = asyncio.run(
                memory(server, convs=mem_convs, targets=targets, pairs=args.pairs, deadline=deadline)
            )
            points += reached
            if mem_stopped:
                notes.append("memory phase stopped at the time limit")

            # 3b. one session's history grown to 10,000 turns: the cost of a request as it grows
            grown, hist_tally = asyncio.run(
                history(server.url, marks=history_marks, bulk=100, probes=args.probes, deadline=deadline)
            )
            notes += ["history phase stopped at the time limit"] * hist_tally.stopped

            # 4. concurrency
            convs = conversations("chat-")
            tally, wall = asyncio.run(concurrency(server.url, convs, args.turns, deadline))
            if tally.stopped or ref_tally.stopped:
                notes.append("concurrency phase stopped at the time limit (fewer requests than asked)")
            mem_turns = sum(len(c.messages) for c in mem_convs)
            chat_turns = sum(len(c.messages) for c in convs)
            points.append(
                MemoryPoint(
                    "after the concurrency phase too",
                    len(mem_convs) + len(convs),
                    mem_turns + chat_turns,
                    sum(rss_mb(p) for p in server.replicas()),
                    sum(rss_mb(p) for p in server.tree()),
                )
            )

            # 5. leaks: the chat sessions (their last request asked already) and the memory sessions
            checked, own, leaks, leak_notes = asyncio.run(
                leak_check(server.url, [c for c in convs + mem_convs if c.messages], deadline + 120)
            )
            replicas = len(server.replicas())
        finally:
            left = server.stop()
            keep_logs(tmp, args.logs)
        errors = ref_tally.errors + tally.errors + mem_tally.errors + hist_tally.errors

    # --- the tables
    def ms(x: float) -> str:
        return f"{x * 1e3:,.0f}" if x >= 0.1 else f"{x * 1e3:,.1f}"

    r50, r99 = pct(ref_tally.latencies, 0.5), pct(ref_tally.latencies, 0.99)
    p50, p99 = pct(tally.latencies, 0.5), pct(tally.latencies, 0.99)
    ref_rps, rps = ref_tally.requests / ref_wall, tally.requests / wall
    if not ref_tally.latencies or not tally.latencies:
        raise SystemExit(f"no successful requests; errors: {errors[:5]}")
    print(
        f"pagedctx serve (1 replica, SQLite store, local profile: baseline roles, budget {budget:,}); "
        f"ready in {ready:.1f} s; {args.sessions} concurrent sessions x {args.turns} user messages "
        f"(the whole history each request); 127.0.0.1, openai SDK {__import__('openai').__version__}\n"
    )
    print(
        "| server | requests | p50 ms | p99 ms | requests/s | context tokens, mean / max "
        "| usage.prompt_tokens, mean |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, t, a, b, r in (
        ("baseline worker alone (reference)", ref_tally, r50, r99, ref_rps),
        ("pagedctx serve", tally, p50, p99, rps),
    ):
        prompt = statistics.mean(t.prompt_tokens) if t.prompt_tokens else 0
        context = (
            f"{statistics.mean(t.context_tokens):,.0f} / {max(t.context_tokens):,}"
            if t.context_tokens
            else "-"
        )
        print(f"| {name} | {t.requests:,} | {ms(a)} | {ms(b)} | {r:.1f} | {context} | {prompt:,.0f} |")
    print(
        f"| added by pagedctx (x reference) | | {ms(p50 - r50)} ({p50 / r50:.1f}x) | "
        f"{ms(p99 - r99)} ({p99 / r99:.1f}x) | {rps / ref_rps:.2f}x | | |"
    )
    print_history(grown, args.probes)
    print(
        f"\nmemory ({args.memory_sessions} sessions fed {args.pairs} pasted pairs + 1 user message "
        f"a request; "
        f"{replicas} replica process(es); RSS from /proc):\n"
    )
    print(
        "| point | sessions | turns held | replica RSS MB | replica RSS / session KB | server tree RSS MB |"
    )
    print("|---|---|---|---|---|---|")
    for point in points:
        per = point.replica_mb * 1024 / point.sessions
        print(
            f"| {point.label} | {point.sessions:,} | {point.turns:,} | {point.replica_mb:,.0f} | "
            f"{per:,.0f} | {point.tree_mb:,.0f} |"
        )
    if len(points) >= 3:
        grow = points[-2].replica_mb - points[1].replica_mb
        turns = points[-2].turns - points[1].turns
        print(
            f"\nreplica RSS from {points[1].label} to {points[-2].label}: {grow:+.1f} MB "
            f"({grow * 1024 * 1024 / max(1, turns):,.0f} bytes per turn held)"
        )
    print(f"\ncanary recalled by its own session: {own}/{checked}")
    print(f"cross-session leaks: {leaks}")
    print(f"request errors: {len(errors)}; processes left after SIGTERM (killed): {len(left)}")
    for note in [*notes, *leak_notes[:10], *errors[:10], *(f"left: {x}" for x in left)]:
        print(f"- {note}")
    print(f"\nwall {time.monotonic() - began:.0f} s; run at {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")


if __name__ == "__main__":
    main()
