"""The cpu profile's two models on the roles' real module calls (issue 32): per model and role, the
share of answers valid on the first try with the schema constraint (`json_object` with the module's
schema, as the profile's roles ask llama.cpp) and without it, prompt and generation tokens/s (the
server's own timings), seconds per call at 2,000 and 4,000 tokens of budget; each server's start
time and memory (RSS idle, and after the calls).

Each session runs as `pagedctx run` runs it (`pagedctx.run`), all three roles on one model, on a
generated conversation (bench/dialogue_corpus.py, ~100 turns) and this repository's `pages/`
code. The roles' `structured` setting is the constraint under test (host/models/structured.py):
`json_object` (the module's schema, simplified for llama.cpp's converter), `grammar` (the worker's
own GBNF; the other modules as json_object), `none` (the prompt alone). A proxy on 127.0.0.1
between pagedctx and the server keeps each call (module, first try or retry, tokens, seconds,
text). Validity is the module's own check (`parse_envelope_json` + the FULL module schema), not
the payload checks a role adds (ids offered, identifiers kept).

Run from the repository root with the [cpu] extra installed and no `llm serve` running:
`python bench/cpu_models.py [--asks 2] [--models small main] [--budgets 2000 4000]`.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from dialogue_corpus import generate

from pagedctx.actors.llama_server import (
    answering_models,
    ensure_servers,
    llama_plan,
    owned_servers,
    stop_servers,
)
from pagedctx.config import load_config
from pagedctx.host.modules import load_module
from pagedctx.protocol.modules.envelope import parse_envelope_json

RETRY_MARK = "Your previous answer broke the module's contract"


ROLES = ("router", "worker", "consolidator")
MODES = ("json_object", "grammar", "none")


def module_of(system: str) -> str:
    """The module a call is for: the one whose prompt is the call's system message."""
    for name in (*ROLES, "router_select", "negative_select", "generator"):
        if load_module(name).prompt == system:
            return name
    return ""


class Proxy:
    """Forwards /v1/* to a llama.cpp server as it is, keeping every chat call."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.calls: list[dict[str, Any]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                self._forward(json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0")))))

            def _forward(self, body: dict[str, Any] | None) -> None:
                status, data = proxy.forward(self.path, body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def forward(self, path: str, body: dict[str, Any] | None) -> tuple[int, bytes]:
        module = module_of(body["messages"][0]["content"]) if body is not None else ""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.upstream}{path}",
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json"},
            method="POST" if body is not None else "GET",
        )
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=600) as response:
                status, data = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, data = exc.code, exc.read()
        seconds = time.perf_counter() - started
        if body is not None:
            user = body["messages"][-1]["content"]
            call: dict[str, Any] = {"module": module, "retry": RETRY_MARK in user, "status": status,
                                    "seconds": seconds}  # fmt: skip
            if status == 200:
                reply = json.loads(data)
                call.update(text=reply["choices"][0]["message"]["content"] or "",
                            finish=reply["choices"][0].get("finish_reason"),
                            prompt_tokens=reply["usage"]["prompt_tokens"],
                            completion_tokens=reply["usage"]["completion_tokens"])  # fmt: skip
            self.calls.append(call)
        return status, data

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def valid(call: dict[str, Any]) -> bool:
    if call["status"] != 200 or not call["module"]:
        return False
    value, violations = parse_envelope_json(call["text"])
    return not violations and not load_module(call["module"]).validate(value)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


TIMINGS = re.compile(r"(prompt eval|\s eval) time =\s*([\d.]+) ms /\s*(\d+) (?:tokens|runs)")


def speeds(log: Path) -> tuple[float, float]:
    """Prompt and generation tokens/s from the server's own timings (llama_perf_context_print) over
    the whole run: prompts of 200 tokens or more (the prefix cache makes the rest a few tokens), and
    every generation."""
    pm = pt = em = et = 0.0
    for kind, ms, tokens in TIMINGS.findall(log.read_text(errors="replace")):
        if kind == "prompt eval" and int(tokens) >= 200:
            pm, pt = pm + float(ms), pt + int(tokens)
        elif kind != "prompt eval":
            em, et = em + float(ms), et + int(tokens)
    return (pt / (pm / 1000) if pm else 0.0), (et / (em / 1000) if em else 0.0)


def first_violation(call: dict[str, Any]) -> str:
    if call["status"] != 200:
        return f"HTTP {call['status']}"
    value, violations = parse_envelope_json(call["text"])
    if not violations:
        violations = load_module(call["module"]).validate(value)
    return f"{violations[0].path}: {violations[0].message}"[:100] if violations else ""


def profile_for(folder: Path, alias: str, port: int, roles: dict[str, Any], mode: str) -> Path:
    """All three roles on one model, through the proxy, with the cpu profile's max_tokens and
    timeout, constrained by `mode`."""
    models = {"roles": {}}  # type: dict[str, Any]
    for role in ROLES:
        url = f"http://127.0.0.1:{port}/v1"
        cap, timeout = roles[role].get("max_tokens"), roles[role].get("timeout", 900)
        models["roles"][role] = {"backend": "openai", "model": alias, "base_url": url, "max_tokens": cap,
                                 "timeout": timeout, "structured": mode}  # fmt: skip
    path = folder / f"bench-{alias}-{port}-{mode}.yaml"
    path.write_text(json.dumps({"runtime": "inproc", "models": models}))
    return path


def module_rows(alias: str, mode: str, calls: list[dict[str, Any]]) -> list[str]:
    """One table row per module: valid on the first try, calls, HTTP errors, capped, median s."""
    by_module: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for call in calls:
        by_module[call["module"] or "?"].append(call)
    rows = []
    for module, some in sorted(by_module.items()):
        first = [c for c in some if not c["retry"]]
        ok = sum(valid(c) for c in first)
        errors = sum(c["status"] != 200 for c in some)
        capped = sum(c.get("finish") == "length" for c in some)
        seconds = statistics.median(c["seconds"] for c in some)
        cells = [alias, mode, module, f"{ok}/{len(first)}", len(some), errors, capped, f"{seconds:.1f}"]
        rows.append("| " + " | ".join(map(str, cells)) + " |")
    return rows


def sessions(
    args: argparse.Namespace,
    *,
    folder: Path,
    dialogue: Path,
    questions: list[str],
    profile: Path,
    tag: str,
    per_call: dict[int, list[float]],
    calls: list[dict[str, Any]],
) -> int:
    """The sessions of one model and constraint at each budget; the fault steps they recorded."""
    import pagedctx

    faults = 0
    for budget in args.budgets:
        before = len(calls)
        for i, question in enumerate(questions):
            store = f"sqlite:///{folder / f'{tag}-{budget}-{i}.db'}"
            result = pagedctx.run(
                question,
                dialogues=[dialogue],
                repos=["pages"],
                budget=budget,
                max_rounds=args.max_rounds,
                profile=str(profile),
                store=store,
            )
            faults += sum(len(r.faults) for r in result.rounds)
        per_call[budget] += [
            c["seconds"] for c in calls[before:] if c["module"] == "worker" and c["status"] == 200
        ]
    return faults


def start_each(plan: Any, names: list[str]) -> dict[str, float]:
    """Each server started alone (none may be answering already); its seconds to answer."""
    for name in names:
        if answering_models(plan.servers[name].port) is not None:
            raise SystemExit(f"a server answers on {plan.servers[name].port}: stop `llm serve` first")
    starts = {}
    for name in names:
        started = time.perf_counter()
        ensure_servers(plan, [name])
        starts[name] = time.perf_counter() - started
    return starts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asks", type=int, default=2, help="questions per session")
    parser.add_argument("--models", nargs="+", default=["small", "main"])
    parser.add_argument("--modes", nargs="+", choices=MODES, default=["grammar", "none"])
    parser.add_argument("--budgets", nargs="+", type=int, default=[2000, 4000])
    parser.add_argument("--max-rounds", type=int, default=3)
    parser.add_argument("--show", action="store_true", help="print each call's first violation")
    parser.add_argument("--profile", default="cpu", help="cpu, or a copy of it (other ports, threads)")
    args = parser.parse_args()
    config = load_config(profile=args.profile)
    plan = llama_plan(config.models)
    assert plan is not None
    starts = start_each(plan, args.models)
    running = {r.name: r for r in owned_servers()}
    idle = {name: rss_mib(running[name].process.pid) for name in args.models}
    conversation = generate(101, sessions=4, turns_per_session=24)
    questions = [q.text for q in conversation.questions[: args.asks]]
    rows: list[str] = []
    per_call: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        dialogue = folder / "d.jsonl"
        turns = [
            {"id": t.id, "speaker": t.speaker, "text": t.text, "timestamp": t.timestamp.isoformat()}
            for t in conversation.turns
        ]
        dialogue.write_text("".join(json.dumps(t) + "\n" for t in turns))
        for name in args.models:
            server = plan.servers[name]
            for mode in args.modes:
                proxy = Proxy(server.port)
                profile = profile_for(folder, server.alias, proxy.port, config.models["roles"], mode)
                wall = time.perf_counter()
                seconds: dict[int, list[float]] = defaultdict(list)
                faults = sessions(
                    args,
                    folder=folder,
                    dialogue=dialogue,
                    questions=questions,
                    profile=profile,
                    tag=f"{name}-{mode}",
                    per_call=seconds,
                    calls=proxy.calls,
                )
                wall = time.perf_counter() - wall
                proxy.close()
                for budget, some in seconds.items():
                    per_call.setdefault((f"{server.alias} {mode}", budget), []).extend(some)
                rows += module_rows(server.alias, mode, proxy.calls)
                if args.show:
                    for call in proxy.calls:
                        print(f"{server.alias} {mode} {call['module']}: {first_violation(call) or 'valid'}")
                total = f"all sessions: {wall:.0f} s, {faults} fault steps"
                rows.append(f"| {server.alias} | {mode} | {total} | | | | | |")
        after = {name: rss_mib(running[name].process.pid) for name in args.models}
        rates = {name: speeds(running[name].log) for name in args.models}
    stop_servers()
    servers = [(plan.servers[n].alias, starts[n], idle[n], after[n], *rates[n]) for n in args.models]
    report(plan.threads, servers, rows, per_call)


def report(
    threads: int,
    servers: list[tuple[str, float, float, float, float, float]],
    rows: list[str],
    per_call: dict[tuple[str, int], list[float]],
) -> None:
    print(f"cpu models bench, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, threads {threads}\n")
    print("| model | server start s | RSS idle MiB | RSS after MiB | prompt tok/s | generation tok/s |")
    print("|---|---|---|---|---|---|")
    for alias, start, idle, after, prompt, gen in servers:
        print(f"| {alias} | {start:.1f} | {idle:.0f} | {after:.0f} | {prompt:.0f} | {gen:.1f} |")
    print(
        "\n| model | constraint | module | valid 1st try | calls | HTTP errors | hit max_tokens | median s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\n| model, constraint | budget | worker calls | median s per worker call |\n|---|---|---|---|")
    for (what, budget), some in sorted(per_call.items()):
        print(f"| {what} | {budget} | {len(some)} | {statistics.median(some) if some else 0:.1f} |")


if __name__ == "__main__":
    main()
