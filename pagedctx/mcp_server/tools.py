"""What the MCP server's tools and resources do, without the protocol: plain blocking
calls on `pagedctx.Session`, the selection, the PCES answerer, the editor and the evidence harness,
each answering with text a model reads without our docs, or raising a `PagedctxError` whose
message says what was wrong (the server turns it into a tool error, never a crash).

Writes stay inside what the server was started with: edits go to the first repository, bounded
by the pins (the task file's, or `--allow-edit` globs; without either every edit is refused), and
never touch the server's own task file; checks run only the task read at start (kept in memory:
the file is never read again, and no tool names another), write their evidence under the pagedctx
home and run that task's commands in the repository.

Each agent session is a pagedctx session in the store, resumable by its id, named by a
`SessionRef`: the id the caller sees and its tenant (a bearer token's, over HTTP with tokens),
stored as `{tenant}.{id}`, so one tenant never reaches another's sessions. A session is made only
by `session_ask`; everything else answers a session nobody made, or another tenant's, with the
same `no session 'ID'` refusal.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagedctx.errors import BusFault, PagedctxError, ScopeConflict, UsageError

__all__ = ["PCR_VIEWS", "AgentTools", "McpSettings", "SessionRef", "missing_session"]

PCR_VIEWS = ("exist", "definition", "api", "impl", "asm", "summary", "callchain")
SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,95}$")
TENANT = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class SessionRef:
    """A session as its caller names it: `id` (what the caller sees and sends), `tenant` (the
    caller's bearer token's, None for the server's operator: stdio, or HTTP without tokens)."""

    id: str
    tenant: str | None = None

    def __post_init__(self) -> None:
        if not SESSION_ID.match(self.id):
            raise UsageError(f"session id {self.id!r}: use 1-96 letters, digits and . _ : -")
        if self.tenant is not None and not TENANT.match(self.tenant):
            raise UsageError(f"tenant {self.tenant!r}: 16 hex digits")

    @property
    def stored(self) -> str:
        """The session's name in the store and under the home: `{tenant}.{id}` for a tenant."""
        return self.id if self.tenant is None else f"{self.tenant}.{self.id}"


def missing_session(ref: SessionRef) -> str:
    """The one answer for a session nobody made and for another tenant's (no existence oracle)."""
    return f"no session {ref.id!r}: session_ask starts one"


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


NO_TASK = (
    "NO_TASK: this server has no task (it was started without --task), so there are no checks to "
    "run: run_checks runs only the task the server was started with (restart it with --task TASK.json)"
)


class AgentTools:
    """The tools of one server (see the module docstring); thread-safe per session (store locks)."""

    def __init__(self, settings: McpSettings, config: Any) -> None:
        from pagedctx.engine import Engine
        from pagedctx.workspace import Workspace

        self.settings = settings
        self.config = config
        self.engine = Engine(config)
        for root in settings.repos:
            if not Path(root).is_dir():
                raise UsageError(f"--repo {root} is not a directory")
        self.workspace = Workspace(self.engine, settings.repos)
        self.roots = self.workspace.roots
        # Read once, here: run_checks judges by this copy, never by the file (the code under test
        # may rewrite it) and never by a file a tool names.
        self.task = self._load_task(settings.task) if settings.task is not None else None
        self._task_file = Path(os.path.realpath(settings.task)) if settings.task is not None else None
        self._starts: dict[str, Any] = {}
        self._guard = threading.Lock()

    # -- code -------------------------------------------------------------------------------------

    def select_code(self, intent: str, budget: int | None = None, repo: str | None = None) -> str:
        """The diamond selection for `intent` as text: files, chunk ids, bodies and skeletons."""
        return self.workspace.select(intent, budget or self.settings.budget, repo=repo).text()

    def code_evidence(
        self,
        request: str | None = None,
        refs: Sequence[str] = (),
        view: str = "impl",
        repo: str | None = None,
    ) -> str:
        """A PCR request answered as PCES (`<pcir>`); or the simple form, `refs` with one `view`."""
        if request is None:
            if not refs:
                raise UsageError("give a PCR request, or refs (chunk ids, paths, names) and a view")
            if view not in PCR_VIEWS:
                raise UsageError(f"view {view!r}: use one of {', '.join(PCR_VIEWS)}")
            needs = "".join(f"<need>\nref: {ref.strip()}\nview: {view}\n</need>\n" for ref in refs)
            request = f"<pcr>\n{needs}</pcr>\n"
        return self.workspace.evidence(request, repo=repo)

    def outline(self, path: str, repo: str | None = None) -> str:
        """A file's chunks: id, kind and lines, in order (the ids edits and evidence take)."""
        return self.workspace.outline(path, repo=repo)

    def index_status(self) -> str:
        """What the index holds for the repositories: files, chunks, languages, skipped files."""
        return json.dumps([status.model_dump(mode="json") for status in self.workspace.statuses()], indent=2)

    # -- the agent's session --------------------------------------------------------------------

    def _session(self, ref: SessionRef, *, make: bool = False) -> Any:
        """The session `ref` names, with the repositories added; `make`: start it if nobody has
        (only session_ask does), else a session that is not in the store is refused."""
        from pagedctx.session import Session

        session = Session.open(engine=self.engine, session_id=ref.stored)
        if not make and session.is_new:
            session.close()
            raise UsageError(missing_session(ref))
        try:
            for root in self.roots:
                session.add_repo(root)  # idempotent: a resumed session already has them
        except BaseException:
            session.close()
            raise
        return session

    def session_ask(self, ref: SessionRef, intent: str, budget: int | None = None) -> str:
        """The `<PagedContext>` for `intent`: the Router addresses pages, nobody acts (then zoom)."""
        with self._session(ref, make=True) as session, session.locked():
            return str(session.look(intent, budget or self.settings.budget).xml)

    def zoom(self, ref: SessionRef, move: dict[str, Any], budget: int | None = None) -> str:
        """One Consult / Explore / Shelve on the session's latest intent: the new context, or a
        BusFault whose message is the fault (nothing changed)."""
        with self._session(ref) as session, session.locked():
            result = session.zoom([move], budget or self.settings.budget)
        faults = [f for r in result.rounds for f in r.faults]
        if faults:
            raise BusFault(f"Bus Fault: {'; '.join(faults)} (nothing changed; the context is as before)")
        return str(result.xml)

    def context(self, ref: SessionRef) -> str | None:
        """The session's latest context, a line saying there is none yet, or None when the session
        is not in the store (a read never makes one)."""
        from pagedctx.session import Session

        with Session.open(engine=self.engine, session_id=ref.stored) as session:
            if session.is_new:
                return None
            last = session.last
        return last.xml if last is not None else f"session {ref.id} has no context yet: call session_ask\n"

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

    def _never_the_task_file(self, modifications: Sequence[Any]) -> None:
        """SCOPE_CONFLICT for an edit whose path is the server's task file (named, or through a
        symlink): the task stays as the server read it, for this server and the next."""
        if self._task_file is None:
            return
        for number, mod in enumerate(modifications, start=1):
            try:
                real = Path(os.path.realpath(self.roots[0] / mod.file_path))
            except (OSError, ValueError):
                continue  # a path the editor refuses anyway (a NUL byte, ...)
            if real == self._task_file:
                raise ScopeConflict(
                    f"modification {number}: {mod.file_path!r} is this server's task file; the task "
                    "and its checks are fixed when the server starts and are never edited"
                )

    def apply_edits(self, modifications: Sequence[dict[str, Any]], ref: SessionRef | None = None) -> str:
        """Chunk-anchored edits to the first repository, all or nothing, inside the pins and never
        the server's task file; the report as JSON. A refusal raises the E2 fault (its code in the
        message); nothing is written."""
        from pagedctx.workspace import ModificationBatch

        pins = self._pins()
        try:
            batch = ModificationBatch.model_validate({"modifications": list(modifications)})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise UsageError(f"modifications: {where}: {first['msg']} (docs/mcp.md: apply_edits)") from None
        self._never_the_task_file(batch.modifications)
        if ref is not None:
            self._start(ref)  # the checks' base: before the first edit
        with self._guard:  # one batch at a time per server: a batch is all or nothing
            report = self.workspace.apply(batch.modifications, pins, formatters={})
        return str(report.model_dump_json(indent=2))

    def _start(self, ref: SessionRef) -> Any:
        """The repository's state when the session first edited or checked: sealed, kept in the
        pagedctx home, so a resumed session judges against the same base."""
        from pagedctx.evidence.seal import load_key
        from pagedctx.evidence.tree import load_snapshot, save_snapshot

        with self._guard:
            if ref.stored in self._starts:
                return self._starts[ref.stored]
            path = Path(self.config.home) / "mcp" / ref.stored / "start.json"
            key = load_key(create=True)
            if path.is_file():
                state = load_snapshot(path, key)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                state = self.workspace.snapshot()
                save_snapshot(path, state, key)
            self._starts[ref.stored] = state
            return state

    def run_checks(self, ref: SessionRef) -> str:
        """The test commands of the task the server was started with (as read then) under the
        evidence harness, then the verdict (fail closed), as JSON: verdict, reason code, messages,
        and the evidence folder. Without a task: NO_TASK."""
        if self.task is None:
            raise UsageError(NO_TASK)
        pre = self._start(ref)
        artifacts = Path(self.config.home) / "mcp" / ref.stored / "artifacts"
        checked = self.workspace.check(
            self.task.task_input(), self.task.contract(), pre=pre, artifacts=artifacts
        )
        return json.dumps(checked.summary(), indent=2)


def error_text(exc: PagedctxError) -> str:
    """A refusal as the tool error's text: the fault code first when there is one."""
    code = getattr(exc, "code", None)
    if code is None or isinstance(exc, BusFault):  # a Bus Fault names the fault of the move itself
        return exc.message
    return f"{code}: {exc.message}"
