"""What the MCP server's tools and resources do (issue 21), without the protocol: plain blocking
calls on `pagedctx.Session`, the selection, the PCES engine, the editor and the evidence harness,
each answering with text a model reads without our docs, or raising a `PagedctxError` whose
message says what was wrong (the server turns it into a tool error, never a crash).

Writes stay inside what the server was started with: edits go to the first repository, bounded
by the pins (the task file's, or `--allow-edit` globs; without either every edit is refused);
checks write their evidence under the pagedctx home and run the task's own commands in the
repository. Each agent session is a pagedctx session in the store, resumable by its id.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagedctx.errors import BusFault, PagedctxError, UsageError

__all__ = ["PCR_VIEWS", "AgentTools", "McpSettings"]

PCR_VIEWS = ("exist", "definition", "api", "impl", "asm", "summary", "callchain")
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,95}$")


class McpSettings(BaseModel):
    """What `pagedctx mcp` was started with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repos: tuple[Path, ...] = Field(min_length=1, description="the repositories, resolved")
    store: str | None = None
    profile: str | None = None
    task: Path | None = Field(default=None, description="the task file (docs/evolve.md): pins and checks")
    allow_edit: tuple[str, ...] = Field(default=(), description="globs edits may touch, without a task")
    session: str | None = Field(default=None, description="the stdio connection's session id (resume)")
    budget: int | None = Field(default=None, gt=0, description="the default context budget")
    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=1, le=65535, description="streamable HTTP on this port")
    tokens: tuple[str, ...] = ()


class AgentTools:
    """The tools of one server (see the module docstring); thread-safe per session (store locks)."""

    def __init__(self, settings: McpSettings, config: Any) -> None:
        self.settings = settings
        self.config = config
        self.roots = tuple(Path(r).resolve() for r in settings.repos)
        for root in self.roots:
            if not root.is_dir():
                raise UsageError(f"--repo {root} is not a directory")
        self.task = self._load_task(settings.task) if settings.task is not None else None
        self._starts: dict[str, Any] = {}
        self._guard = threading.Lock()

    # -- code -------------------------------------------------------------------------------------

    def _root(self, repo: str | None) -> Path:
        if not repo:
            return self.roots[0]
        for root in self.roots:
            if repo in (str(root), root.name):
                return root
        names = ", ".join(r.name for r in self.roots)
        raise UsageError(f"repo {repo!r} is not one this server reads; use one of: {names}")

    def select_code(self, intent: str, budget: int | None = None, repo: str | None = None) -> str:
        """The diamond selection for `intent` as text: files, chunk ids, bodies and skeletons."""
        from pagedctx.selecting import select

        chosen = budget or self.settings.budget
        selected = select(
            intent,
            repo=self._root(repo),
            budget=chosen,
            store=self.config.store_url,
            profile=self.settings.profile,
        )
        return selected.text()

    def _index(self, root: Path) -> Any:
        from pagedctx.host.ingest.index import Index

        index = Index.open(self.config.store_url, tokenizer=self.config.tokenizer)
        index.update([str(root)])  # only changed files re-parse
        return index.within([root])

    def code_evidence(
        self,
        request: str | None = None,
        refs: Sequence[str] = (),
        view: str = "impl",
        repo: str | None = None,
    ) -> str:
        """A PCR request answered as PCES (`<pcir>`); or the simple form, `refs` with one `view`."""
        from pagedctx.host.pces.engine import answer_text

        if request is None:
            if not refs:
                raise UsageError("give a PCR request, or refs (chunk ids, paths, names) and a view")
            if view not in PCR_VIEWS:
                raise UsageError(f"view {view!r}: use one of {', '.join(PCR_VIEWS)}")
            needs = "".join(f"<need>\nref: {ref.strip()}\nview: {view}\n</need>\n" for ref in refs)
            request = f"<pcr>\n{needs}</pcr>\n"
        return str(answer_text(self._index(self._root(repo)), request))

    def outline(self, path: str, repo: str | None = None) -> str:
        """A file's chunks: id, kind and lines, in order (the ids edits and evidence take)."""
        root = self._root(repo)
        index = self._index(root)
        base = Path(index.meta().base or root)
        relative = (root / path).resolve()
        if not relative.is_relative_to(root):
            raise UsageError(f"{path} is outside the repository {root.name}")
        meta = index.file(relative.relative_to(base).as_posix())
        if meta is None:
            raise UsageError(f"{path} is not an indexed file of {root.name}; index_status lists what is")
        lines = [f"{path} ({meta.language}, {meta.lines} lines, {meta.tokens} tokens)"]
        for chunk_id in meta.chunk_ids:
            chunk = index.chunk(chunk_id)
            if chunk is not None:
                lines.append(f"  {chunk_id}  {chunk.kind}  lines {chunk.start_line}-{chunk.end_line}")
        return "\n".join(lines) + "\n"

    def index_status(self) -> str:
        """What the index holds for the repositories: files, chunks, languages, skipped files."""
        out = []
        for root in self.roots:
            status = self._index(root).status()
            out.append(status.model_dump(mode="json"))
        return json.dumps(out, indent=2)

    # -- the agent's session --------------------------------------------------------------------

    def _session(self, session_id: str) -> Any:
        from pagedctx.session import Session

        if not SESSION_ID.match(session_id):
            raise UsageError(f"session id {session_id!r}: use 1-96 letters, digits and . _ : -")
        session = Session.open(config=self.config, session_id=session_id)
        for root in self.roots:
            session.add_repo(root)  # idempotent: a resumed session already has them
        return session

    def session_ask(self, session_id: str, intent: str, budget: int | None = None) -> str:
        """The `<PagedContext>` for `intent`: the Router addresses pages, nobody acts (then zoom)."""
        with self._session(session_id) as session, session.locked():
            return str(session.look(intent, budget or self.settings.budget).xml)

    def zoom(self, session_id: str, move: dict[str, Any], budget: int | None = None) -> str:
        """One Consult / Explore / Shelve on the session's latest intent: the new context, or a
        BusFault whose message is the fault (nothing changed)."""
        with self._session(session_id) as session, session.locked():
            result = session.zoom([move], budget or self.settings.budget)
        faults = [f for r in result.rounds for f in r.faults]
        if faults:
            raise BusFault(f"Bus Fault: {'; '.join(faults)} (nothing changed; the context is as before)")
        return str(result.xml)

    def context(self, session_id: str) -> str:
        """The session's latest context, or a line saying there is none yet."""
        with self._session(session_id) as session:
            last = session.last
        return (
            last.xml if last is not None else f"session {session_id} has no context yet: call session_ask\n"
        )

    # -- edits and checks ----------------------------------------------------------------------

    @staticmethod
    def _load_task(path: Path) -> Any:
        from pagedctx.evolve.task import load_task

        return load_task(path)

    def _pins(self) -> Any:
        from pagedctx.evidence.task import Pins

        if self.task is not None:
            return self.task.pins
        if self.settings.allow_edit:
            return Pins(allowed_paths=list(self.settings.allow_edit), forbidden_paths=[])
        raise UsageError(
            "this server was started without pins: edits are refused (start it with --task TASK.json "
            "or --allow-edit GLOB)"
        )

    def apply_edits(self, modifications: Sequence[dict[str, Any]], session_id: str | None = None) -> str:
        """Chunk-anchored edits to the first repository, all or nothing, inside the pins; the
        report as JSON. A refusal raises the E2 fault (its code in the message); nothing is written."""
        from pagedctx.host.edit.editor import apply_modifications
        from pagedctx.host.edit.modification import ModificationBatch
        from pagedctx.host.ingest.index import Index

        pins = self._pins()
        try:
            batch = ModificationBatch.model_validate({"modifications": list(modifications)})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise UsageError(f"modifications: {where}: {first['msg']} (docs/mcp.md: apply_edits)") from None
        if session_id is not None:
            self._start(session_id)  # the checks' base: before the first edit
        root = self.roots[0]
        index = Index.open(self.config.store_url, tokenizer=self.config.tokenizer)
        with self._guard:  # one batch at a time per server: a batch is all or nothing
            report = apply_modifications(root, batch.modifications, pins, formatters={}, index=index)
        return str(report.model_dump_json(indent=2))

    def _start(self, session_id: str) -> Any:
        """The repository's state when the session first edited or checked: sealed, kept in the
        pagedctx home, so a resumed session judges against the same base."""
        from pagedctx.evidence.seal import load_key
        from pagedctx.evidence.tree import load_snapshot, save_snapshot, snapshot

        with self._guard:
            if session_id in self._starts:
                return self._starts[session_id]
            path = Path(self.config.home) / "mcp" / session_id / "start.json"
            key = load_key(create=True)
            if path.is_file():
                state = load_snapshot(path, key)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                state = snapshot(self.roots[0])
                save_snapshot(path, state, key)
            self._starts[session_id] = state
            return state

    def run_checks(self, session_id: str, task: str | None = None) -> str:
        """The task's test commands under the evidence harness, then the verdict (fail closed), as
        JSON: verdict, reason code, messages, and the evidence folder."""
        from pagedctx.evidence.collector import collect
        from pagedctx.evidence.verdict import judge

        chosen = self._checked_task(task)
        pre = self._start(session_id)
        task_input, contract = chosen.task_input(), chosen.contract()
        artifacts = Path(self.config.home) / "mcp" / session_id / "artifacts"
        folder = collect(task_input, self.roots[0], pre=pre, contract=contract, artifacts_root=artifacts)
        verdict = judge(contract, folder, task_input)
        out = {
            "verdict": verdict.verdict,
            "reason_code": verdict.reason_code.value if verdict.reason_code else None,
            "messages": list(verdict.messages),
            "evidence_dir": str(folder),
        }
        return json.dumps(out, indent=2)

    def _checked_task(self, task: str | None) -> Any:
        if task is None:
            if self.task is None:
                raise UsageError("no task: start the server with --task TASK.json, or name a task file")
            return self.task
        path = (self.roots[0] / task).resolve()
        if not any(path.is_relative_to(root) for root in self.roots):
            raise UsageError(f"task file {task} is outside the repositories this server reads")
        return self._load_task(path)


def error_text(exc: PagedctxError) -> str:
    """A refusal as the tool error's text: the fault code first when there is one."""
    code = getattr(exc, "code", None)
    if code is None or isinstance(exc, BusFault):  # a Bus Fault names the fault of the move itself
        return exc.message
    return f"{code}: {exc.message}"
