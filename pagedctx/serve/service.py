"""The chat service: OpenAI chat requests on `pagedctx.Session` (no web framework here).

One request, one session, under the session's lock in the store (so replicas and concurrent
requests never interleave rounds). Everything that can refuse the request without the session is
checked first; the last request again (same fingerprint, nothing answered since) gets its recorded
answer; a request whose history diverged is a 409 (`history.reconcile`). Otherwise, in one store
transaction (`Session.atomic`): the messages the session does not hold yet become turns, the
session asks with the last user message as the intent (deferred merges: the answer never waits for
the Consolidator), the answer as delivered is added as the assistant turn, with the request's
fingerprint as the session's note. Refused, failing or killed halfway, it leaves nothing.
After the reply, `consolidate` folds the far field in the background. The store holds every
session: a session is opened from it for each request and closed after, so a replica that dies
loses nothing. Between requests a replica keeps only a bounded cache of what its last sessions'
asks rebuilt (`Engine.warm`, host/records/warm.py: the page state, the Router's page search, the
dialogue of turns, the record, the trace recorder, for at most the 16 sessions asked last and
100,000 pages), each part checked against the store before use, so a request costs what its
new turns add, not the history (another replica's write is read from the store), and memory
stays bounded whatever the sessions served.

Sessions are stored as `{tenant}.{id}`: the id a client sees (`X-Session-Id`) never carries the
tenant, and another token's session is not found.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

from pagedctx.config import Config
from pagedctx.errors import BudgetError, ConfigError, PagedctxError, StoreError, UsageError
from pagedctx.serve.new_messages import reconcile
from pagedctx.serve.openai_types import ChatRequest, FinishReason, PagedctxOptions, ServeError
from pagedctx.serve.settings import ServeSettings
from pagedctx.session import Session

__all__ = ["ChatService", "Reply", "SourceKind"]

log = logging.getLogger("pagedctx.serve")

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,95}$")
SourceKind = Literal["repo", "doc", "dialogue"]
NO_ANSWER = "(pagedctx {policy}: no answer after {rounds} rounds; see /v1/sessions/{sid}/context)"
LAST_REQUEST = "serve.last_request"  # session note: the last request answered (a retry gets its answer)


@dataclass(frozen=True)
class _Exchange:
    """What one request adds: its new messages, then the ask (question, budget, rounds)."""

    new: list[tuple[str, str]]
    asked: str
    budget: int | None
    rounds: int
    fingerprint: str


def _diverged(sid: str, index: int, turn: int | None) -> ServeError:
    return ServeError(
        409,
        f"messages[{index}] is an assistant message session {sid!r} holds (turn {turn}), but the "
        "messages do not line up with the end of the session's history: this request branches off "
        "it (another client went on from the same point, or an earlier message was edited or "
        "dropped), and nothing of it was added. To go on in this session, send its whole history, "
        "a window of its latest turns, or only the new message; to keep this branch, send these "
        "messages with a new X-Session-Id (a new session pages them)",
        kind="invalid_request_error",
        code="history_diverged",
        param=f"messages[{index}]",
    )


class _Held(Sequence[tuple[str, str]]):
    """A session's turns as `(role, text)`, made when read (a request reads a few from the end)."""

    def __init__(self, turns: Sequence[Mapping[str, Any]]) -> None:
        self._turns = turns

    def __len__(self) -> int:
        return len(self._turns)

    @overload
    def __getitem__(self, index: int) -> tuple[str, str]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[str, str]]: ...
    def __getitem__(self, index: int | slice) -> tuple[str, str] | Sequence[tuple[str, str]]:
        if isinstance(index, slice):
            return [(str(t["speaker"]), str(t["text"])) for t in self._turns[index]]
        turn = self._turns[index]
        return str(turn["speaker"]), str(turn["text"])


@dataclass(frozen=True)
class Reply:
    """What one chat request produced."""

    session_id: str
    answer: str
    finish_reason: FinishReason
    usage: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)
    consolidate: bool = False  # run the Consolidator in the background after the reply


def _status(exc: PagedctxError) -> int:
    if isinstance(exc, StoreError):
        return 503
    if isinstance(exc, ConfigError):
        return 500
    if isinstance(exc, UsageError | BudgetError):
        return 400
    return 500


def refused(exc: PagedctxError) -> ServeError:
    """A pagedctx error as the OpenAI error of its kind (the app's one handler for them)."""
    status = _status(exc)
    kind = {400: "invalid_request_error", 503: "service_unavailable"}.get(status, "server_error")
    return ServeError(status, str(exc), kind=kind, code=type(exc).__name__)


class ChatService:
    """Chat completions and the PCP views of sessions (see the module docstring)."""

    def __init__(self, settings: ServeSettings, config: Config | None = None) -> None:
        from pagedctx.engine import Engine

        # The rounds run in this process: a Serve replica is already a Ray actor (docs/serve.md).
        self.engine = Engine.open(
            None if config is not None else settings.profile,
            config=config,
            store=settings.store,
            budget=settings.budget,
            runtime="inproc",
        )
        self.config = self.engine.config
        self.settings = settings
        self.policy = self.engine.policy
        self.model_id = f"pagedctx-{self.policy}".replace(":", "-").replace("/", "-")
        self.created = int(time.time())
        self._counter = self.engine.counter

    # -- sessions ------------------------------------------------------------------------------

    @staticmethod
    def session_id(header: str | None, user: str | None) -> str:
        """The client's session id: `X-Session-Id`, else `user`, else a new one."""
        if header is not None:
            if not _ID.match(header):
                raise ServeError(
                    400,
                    "X-Session-Id: use 1-96 letters, digits and . _ : - (a letter or digit first)",
                    param="X-Session-Id",
                )
            return header
        if user:
            hashed = "user-" + hashlib.sha256(user.encode()).hexdigest()[:16]
            return user if _ID.match(user) else hashed
        return uuid.uuid4().hex[:16]

    def _open(self, tenant: str, sid: str, *, changes: bool = False) -> Session:
        """Session `sid` of `tenant`; `changes`: it is opened to change it, so it records itself
        in its replay bundle when the server keeps them (`serve.bundles`)."""
        if not _ID.match(sid):
            raise ServeError(404, f"no session {sid[:100]!r}", code="session_not_found")
        name = f"{tenant}.{sid}"
        bundle = self.settings.bundles / name if changes and self.settings.bundles is not None else None
        return Session.open(
            engine=self.engine, session_id=name, keep_trace=self.settings.trace, bundle=bundle
        )

    def _existing(self, tenant: str, sid: str) -> Session:
        session = self._open(tenant, sid)
        if session.is_new:
            session.close()
            raise ServeError(404, f"no session {sid!r} for this token", code="session_not_found")
        return session

    # -- chat ----------------------------------------------------------------------------------

    def complete(
        self, tenant: str, sid: str, request: ChatRequest, *, idempotency_key: str | None = None
    ) -> Reply:
        """Answer one chat request on session `sid` (see the module docstring).

        Everything that can refuse the request is checked before anything is written; the
        exchange itself (the new turns, the ask, the answer turn) is one store transaction
        (`Session.atomic`): refused or killed halfway, it leaves the session as it was.
        """
        sent, asked, budget, rounds = self._checked(request)
        fingerprint = self._fingerprint(request, idempotency_key)
        with self._open(tenant, sid) as session, session.locked(self.settings.lock_wait_seconds):
            turns = _Held(session.turns)  # read from the end only: a request costs what it sends
            finish = self._retried(session, turns, fingerprint)
            if finish is not None:  # the last request again: the reply is the answer recorded for it
                return self._reply(
                    sid, answer=turns[-1][1], finish=finish, result=session.last, new_turns=0, replayed=True
                )
            found = reconcile(turns, sent)
            if found.diverged is not None:
                raise _diverged(sid, found.diverged, found.held_turn)
            new = sent[found.new :]
            if not new and sent[-1][0] != "user":
                raise ServeError(
                    400,
                    "nothing new: the session holds every message sent; add a user message",
                    param="messages",
                )
            exchange = _Exchange(new=new, asked=asked, budget=budget, rounds=rounds, fingerprint=fingerprint)
            if self.settings.bundles is None:
                return self._exchange(session, sid, exchange, request)
            with self._open(tenant, sid, changes=True) as recording:  # under the lock taken above
                return self._exchange(recording, sid, exchange, request)

    def _checked(self, request: ChatRequest) -> tuple[list[tuple[str, str]], str, int | None, int]:
        """The request's messages `(role, text)`, its question, budget and rounds; refused here,
        before the session is opened, for everything that does not need the session."""
        from pagedctx.protocol.text import clean_text

        if request.model not in (self.model_id, "pagedctx"):
            raise ServeError(
                404,
                f"model {request.model[:100]!r} is not served here; use {self.model_id!r} (GET /v1/models)",
                code="model_not_found",
                param="model",
            )
        if request.n != 1:
            raise ServeError(400, "n must be 1: a paged session gives one answer per request", param="n")
        if len(request.messages) > self.settings.max_messages:
            raise ServeError(
                413,
                f"{len(request.messages)} messages in one request; this server takes at most "
                f"{self.settings.max_messages} (send only the new ones: the session keeps the history)",
                code="too_many_messages",
            )
        sent: list[tuple[str, str]] = [
            (str(m.role), clean_text(m.text(i)).strip()) for i, m in enumerate(request.messages)
        ]
        sent = [(role, text) for role, text in sent if text]
        asked = next((text for role, text in reversed(sent) if role == "user"), None)
        if asked is None:
            raise ServeError(
                400, "no user message with text: the last user message is the question", param="messages"
            )
        options = request.pagedctx or PagedctxOptions()
        budget = self.engine.budget(options.budget).total
        question = self._counter.count(asked)
        if question >= budget:
            raise ServeError(
                400,
                f"the question (the last user message) is {question} tokens and the context budget is "
                f"{budget}: the question alone fills it. Send the long text as an earlier message, "
                "a document (POST /v1/sessions/{id}/sources) or raise pagedctx.budget, and ask a "
                "shorter question",
                code="question_too_long",
                param="messages",
            )
        return sent, asked, options.budget, options.max_rounds or self.settings.max_rounds

    @staticmethod
    def _fingerprint(request: ChatRequest, idempotency_key: str | None) -> str:
        """What makes two requests the same request: the body as sent, but for how the reply is
        framed (`stream`, `stream_options`), and the `Idempotency-Key` header when there is one."""
        body = request.model_dump(mode="json", exclude_unset=True, exclude={"stream", "stream_options"})
        text = json.dumps([body, idempotency_key], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    @staticmethod
    def _retried(session: Session, turns: Sequence[tuple[str, str]], fingerprint: str) -> FinishReason | None:
        """The finish reason of the last request answered when this request is that one again
        (same fingerprint, and the session unchanged since its answer), else None."""
        raw = session.note(LAST_REQUEST)
        if raw is None or not turns or turns[-1][0] != "assistant":
            return None
        try:
            last = json.loads(raw)
        except ValueError:
            return None
        if (
            not isinstance(last, dict)
            or last.get("request") != fingerprint
            or last.get("turns") != len(turns)
        ):
            return None
        return "length" if last.get("finish") == "length" else "stop"

    def _exchange(self, session: Session, sid: str, exchange: _Exchange, request: ChatRequest) -> Reply:
        """The new turns, the ask and the answer turn, in one store transaction."""
        with session.atomic():
            session.add_turns(exchange.new)
            result = session.ask(exchange.asked, exchange.budget, exchange.rounds, merges="deferred")
            answer, finish = self._delivered(result, sid, request)
            session.add_turn("assistant", answer)
            note = {"request": exchange.fingerprint, "turns": len(session.turns), "finish": finish}
            session.set_note(LAST_REQUEST, json.dumps(note))
        return self._reply(sid, answer=answer, finish=finish, result=result, new_turns=len(exchange.new))

    def _delivered(self, result: Any, sid: str, request: ChatRequest) -> tuple[str, FinishReason]:
        """The answer as the client gets it (and the session keeps it: its next whole-history
        request sends it back), cut to `max_completion_tokens` / `max_tokens`, and why it ended."""
        from pagedctx.protocol.text import clean_text

        answer = clean_text(result.answer or "").strip()
        finish: FinishReason = "stop"
        if not answer:
            answer = NO_ANSWER.format(policy=self.policy, rounds=len(result.rounds), sid=sid)
            finish = "length"
        limit = request.max_completion_tokens or request.max_tokens
        if limit is not None and self._counter.count(answer) > limit:
            answer, finish = self._cut(answer, limit), "length"
        return answer, finish

    def _reply(
        self,
        sid: str,
        *,
        answer: str,
        finish: FinishReason,
        result: Any,
        new_turns: int,
        replayed: bool = False,
    ) -> Reply:
        completion = self._counter.count(answer)
        prompt = sum(r.tokens for r in result.rounds) if result is not None and not replayed else 0
        extra: dict[str, Any] = {"session_id": sid, "new_turns": new_turns, "replayed": replayed}
        if result is not None:
            extra.update(
                cites=list(result.cites),
                context_tokens=result.tokens,
                budget=result.budget,
                rounds=len(result.rounds),
                policy=result.policy,
            )
        usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        usage["total_tokens"] = prompt + completion
        return Reply(sid, answer, finish, usage, extra, consolidate=not replayed)

    def _cut(self, text: str, limit: int) -> str:
        """The most words of `text` within `limit` tokens; when not even the first word fits, the
        most characters of it (an answer is cut, never emptied)."""
        words = text.split(" ")
        low = self._fitting(len(words), lambda n: " ".join(words[:n]), limit)
        if low:
            return " ".join(words[:low])
        return text[: self._fitting(len(words[0]), lambda n: words[0][:n], limit)]

    def _fitting(self, size: int, prefix: Any, limit: int) -> int:
        low, high = 0, size
        while low < high:  # the longest prefix that fits
            mid = (low + high + 1) // 2
            if self._counter.count(prefix(mid)) <= limit:
                low = mid
            else:
                high = mid - 1
        return low

    def consolidate(self, tenant: str, sid: str) -> int:
        """Fold the far field of a session after a reply (background; failures are logged, not raised)."""
        try:
            with self._open(tenant, sid, changes=True) as session:
                return session.consolidate(wait_seconds=self.settings.lock_wait_seconds)
        except Exception:  # a background job: the next request still works without it
            log.exception("pagedctx serve: consolidating session %s failed", sid)
            return 0

    # -- views ---------------------------------------------------------------------------------

    def summary(self, tenant: str, sid: str) -> dict[str, Any]:
        """GET /v1/sessions/{id}: the session's counts and the JSON contract of its latest context."""
        with self._existing(tenant, sid) as session:
            last = session.last
            return {
                "id": sid,
                "object": "pagedctx.session",
                "created": int(session.created.timestamp()),
                "turns": len(session.turns),
                "asks": session.asked,
                "sources": session.sources,
                "contract": last.contract if last is not None else None,
            }

    def context(self, tenant: str, sid: str) -> str:
        """GET /v1/sessions/{id}/context: the `<PagedContext>` of the latest reply."""
        with self._existing(tenant, sid) as session:
            last = session.last
        if last is None:
            raise ServeError(
                404, f"session {sid!r} has no context yet: send a chat completion first", code="no_context"
            )
        return last.xml

    def trace(self, tenant: str, sid: str) -> list[str]:
        """GET /v1/sessions/{id}/trace: the round events of every request (JSONL lines)."""
        with self._existing(tenant, sid) as session:
            return session.trace_lines()

    def view(self, tenant: str, sid: str) -> str:
        """GET /v1/sessions/{id}/view: the HTML picture of the trace (as `pagedctx view` draws it)."""
        from pagedctx.records import RoundEvent
        from pagedctx.records import trace_page as render_html

        lines = self.trace(tenant, sid)
        if not lines:
            raise ServeError(404, f"session {sid!r} has no rounds to draw yet", code="no_trace")
        return render_html((RoundEvent.model_validate_json(line) for line in lines), source=f"session {sid}")

    def delete(self, tenant: str, sid: str) -> dict[str, Any]:
        """DELETE /v1/sessions/{id}: remove the session from the store."""
        session = self._existing(tenant, sid)
        with session.locked(self.settings.lock_wait_seconds):
            session.delete()
            self._retire_bundle(f"{tenant}.{sid}")
        return {"id": sid, "object": "pagedctx.session.deleted", "deleted": True}

    def _retire_bundle(self, name: str) -> None:
        """A deleted session's bundle is kept under another name (it is the record of what was
        done); a session started again under the id records a new one."""
        if self.settings.bundles is None or not (self.settings.bundles / name).is_dir():
            return
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        (self.settings.bundles / name).rename(
            self.settings.bundles / f"{name}.deleted-{stamp}-{uuid.uuid4().hex[:6]}"
        )

    def add_source(self, tenant: str, sid: str, kind: str, path: str) -> dict[str, Any]:
        """POST /v1/sessions/{id}/sources: attach a repository, document or dialogue file (allowed paths)."""
        if kind not in ("repo", "doc", "dialogue"):
            raise ServeError(400, f"kind {kind[:40]!r}: use repo, doc or dialogue", param="kind")
        resolved = self._allowed(path, kind)
        with (
            self._open(tenant, sid, changes=True) as session,
            session.locked(self.settings.lock_wait_seconds),
        ):
            adders = {"repo": session.add_repo, "doc": session.add_doc, "dialogue": session.add_dialogue}
            adders[kind](resolved)
            session.set_note(LAST_REQUEST, None)  # the context changed: a request after it is a new one
        return self.summary(tenant, sid)

    def _allowed(self, path: str, kind: str) -> Path:
        """`path` resolved, if it is under an allowed root and of the kind named; else 400 / 403."""
        shown = path if len(path) <= 200 else path[:200] + "..."
        if not path or any(ord(c) < 32 or ord(c) == 127 for c in path):
            raise ServeError(
                400, f"path {shown!r}: give a path without control characters (NUL, newline...)", param="path"
            )
        try:
            target = Path(path).expanduser()
            if not target.is_absolute():
                raise ServeError(400, f"path {shown!r} must be absolute (a path on the server)", param="path")
            resolved = target.resolve()
            roots = [Path(r).expanduser().resolve() for r in self.settings.source_roots]
            inside = any(resolved == root or resolved.is_relative_to(root) for root in roots)
            is_dir, is_file, exists = resolved.is_dir(), resolved.is_file(), resolved.exists()
        except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name too long, ~nobody
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise ServeError(400, f"path {shown!r} cannot be resolved ({why})", param="path") from exc
        if not inside:
            allowed = ", ".join(str(r) for r in roots) or "none (set serve.source_roots in the profile)"
            raise ServeError(
                403,
                f"{shown} is outside the paths this server may read; allowed: {allowed}",
                kind="permission_error",
                code="path_not_allowed",
                param="path",
            )
        if kind == "repo" and not is_dir:
            raise ServeError(400, f"repository {shown} is not a directory on the server", param="path")
        if kind != "repo" and not is_file:
            what = "no such file" if not exists else "not a regular file (a folder, FIFO or device)"
            raise ServeError(400, f"{kind} {shown}: {what} on the server", param="path")
        return resolved
