"""`pagedctx mcp` (issue 21): the tools and resources driven with the official `mcp` SDK's client,
in process, over stdio and over streamable HTTP; refusals (a Bus Fault, an edit outside the pins)
come back as tool errors, never crashes; a scripted agent fixes a failing test through MCP alone
and gets PASS (S5, S6, C1, E2, E6-E9, P3, P4, P9)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import anyio
import httpx2
import pytest
from evolve_support import PYTEST, write_task
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import (
    FIXED_ADD,
    agent_tools,
    call,
    http_client,
    http_server,
    project,
    raw_post,
    read,
    stdio_client,
    stored_sessions,
)
from typer.testing import CliRunner

from pagedctx.cli import app
from pagedctx.errors import UsageError
from pagedctx.mcp_server.server import build_server

TOOLS = {"select_code", "code_evidence", "session_ask", "consult", "explore", "shelve"}
TOOLS |= {"apply_edits", "run_checks"}


def _fix() -> dict[str, str]:
    return {
        "file_path": "calc/ops.py",
        "target_chunk_id": "calc/ops.py::add",
        "action_type": "MODIFY",
        "new_content": FIXED_ADD,
        "reasoning": "add must add",
    }


def test_every_tool_and_resource_in_process(tmp_path: Path) -> None:
    """Tools list with input schemas and descriptions; each tool answers on the fixture project;
    a Bus Fault and an edit outside the pins are tool errors naming what was wrong."""
    server = build_server(agent_tools(tmp_path), "s1")

    async def run() -> None:
        async with Client(server) as client:
            listed = (await client.list_tools()).tools
            assert {t.name for t in listed} == TOOLS
            assert all(t.description and t.input_schema.get("properties") is not None for t in listed)
            error, text = await call(client, "select_code", intent="add returns the sum of two numbers")
            assert not error and "calc/ops.py::add" in text
            assert "### calc/ops.py (full file, 42 tokens, source)" in text  # with its file role
            assert "body, evidence, " in text and " tokens, test)\nchunk: tests/test_ops.py::test_" in text
            error, text = await call(client, "code_evidence", refs=["calc/ops.py::add"], view="impl")
            assert not error and text.startswith("<pcir>") and "return a - b" in text
            request = "<pcr>\n<need>\nref: calc/ops.py::mul\nview: api\n</need>\n</pcr>\n"
            error, text = await call(client, "code_evidence", request=request)
            assert not error and "ref: calc/ops.py::mul" in text
            error, text = await call(client, "code_evidence", refs=["calc/ops.py::add"], view="everything")
            assert error and "view 'everything'" in text
            error, context = await call(client, "session_ask", intent="why does add subtract")
            assert not error and context.startswith("<PagedContext")
            *_, parent, page = re.findall(r'<Node id="([0-9a-f]{8})"', context)  # a file and its one chunk
            error, shelved = await call(client, "shelve", page_id=page)  # its parent folds back (P4)
            assert not error and shelved.startswith("<PagedContext")
            error, text = await call(client, "consult", page_id=page)
            assert error and "NOT_VISIBLE" in text and "consult its parent first" in text
            error, consulted = await call(client, "consult", page_id=parent)
            assert not error and consulted != shelved  # the folded file zooms in again
            error, text = await call(client, "consult", page_id="ffffffff")
            assert error and "Bus Fault" in text and "ffffffff" in text and "nothing changed" in text
            handle = re.findall(r'handle="(pb:[0-9a-f]+)"', context)[0]
            error, explored = await call(client, "explore", handle=handle, keywords=["add"])
            assert explored.startswith("<PagedContext") or "Bus Fault" in explored
            outside = {
                "file_path": "tests/test_ops.py",
                "action_type": "CREATE_FILE",
                "new_content": "x = 1\n",
            }
            error, text = await call(client, "apply_edits", modifications=[outside])
            assert error and "SCOPE_CONFLICT: modification 1" in text and "pins" in text
            error, text = await call(client, "apply_edits", modifications=[{"file_path": "calc/ops.py"}])
            assert error and "action_type" in text
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            assert resources == {"pagedctx://context", "pagedctx://index/status"}
            outline = (await client.read_resource("pagedctx://outline/calc/ops.py")).contents[0]
            assert "calc/ops.py::add  function  lines 4-6" in getattr(outline, "text", "")
            status = (await client.read_resource("pagedctx://index/status")).contents[0]
            assert json.loads(getattr(status, "text", ""))[0]["files"] == 3
            latest = (await client.read_resource("pagedctx://context")).contents[0]
            assert getattr(latest, "text", "").startswith("<PagedContext")

    anyio.run(run)
    assert (tmp_path / "proj" / "calc" / "ops.py").read_text().count(
        "return a - b"
    ) == 1  # refusals wrote nothing


@pytest.mark.slow
def test_index_status_reports_each_repository_apart_and_repo_names_one(tmp_path: Path) -> None:
    """S5, issue 33: with two repositories, `index_status` counts each one's own files and chunks
    (not the whole store's for both); `repo` picks one by folder name, an unknown name is refused
    with the names to use."""
    other = tmp_path / "notes"
    other.mkdir()
    (other / "words.py").write_text("def shout(text):\n    return text.upper()\n", encoding="utf-8")
    tools = agent_tools(tmp_path, repos=(tmp_path / "proj", other))
    status = json.loads(tools.index_status())  # each repository indexed, then counted
    assert [(len(s["roots"]), s["files"], s["chunks"]) for s in status] == [(1, 3, 4), (1, 1, 1)]
    assert [list(s["settings"]) for s in status] == [[str(tmp_path / "proj")], [str(other)]]
    with pytest.raises(UsageError, match=r"repo 'elsewhere' is not one .* use one of: proj, notes"):
        tools.outline("calc/ops.py", repo="elsewhere")


def test_without_pins_every_edit_is_refused(tmp_path: Path) -> None:
    """The server never writes outside what it was started with: no task, no --allow-edit, no edit."""
    server = build_server(agent_tools(tmp_path, task=None), "s1")

    async def run() -> None:
        async with Client(server) as client:
            error, text = await call(client, "apply_edits", modifications=[_fix()])
            assert error and "started without pins" in text
            error, text = await call(client, "run_checks")
            assert error and "no task" in text

    anyio.run(run)


@pytest.mark.slow
def test_a_scripted_agent_fixes_the_failing_test_over_stdio_and_the_session_resumes(tmp_path: Path) -> None:
    """Done means: select, evidence, edit, checks through MCP alone (a `pagedctx mcp` process on
    stdio) turn FAIL into PASS; a second process with --session resumes the session's context."""
    project(tmp_path)

    async def agent() -> None:
        async with stdio_client(tmp_path, "--session", "agent-1") as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            error, selected = await call(client, "select_code", intent="add returns the sum of its arguments")
            target = next(c for c in re.findall(r"calc/ops\.py::\w+", selected) if c.endswith("::add"))
            error, evidence = await call(client, "code_evidence", refs=[target], view="impl")
            assert not error and "return a - b" in evidence
            error, before = await call(client, "run_checks")
            assert json.loads(before)["verdict"] == "FAIL"
            cheat = {"file_path": "tests/test_ops.py", "action_type": "CREATE_FILE", "new_content": "x = 1\n"}
            error, refused = await call(client, "apply_edits", modifications=[cheat])  # rewrite the test? no
            assert error and "SCOPE_CONFLICT" in refused
            error, report = await call(client, "apply_edits", modifications=[_fix()])
            assert not error and json.loads(report)["applied"] is True
            error, after = await call(client, "run_checks")
            assert not error and json.loads(after)["verdict"] == "PASS", after
            error, context = await call(client, "session_ask", intent="how does add work now")
            assert not error and "return a + b" in context

        async with stdio_client(tmp_path, "--session", "agent-1") as again:
            latest = (await again.read_resource("pagedctx://context")).contents[0]
            assert "return a + b" in getattr(latest, "text", "")

    anyio.run(agent)


@pytest.mark.slow
def test_streamable_http_with_a_bearer_token(tmp_path: Path) -> None:
    """`--http PORT` on 127.0.0.1: the SDK's HTTP client lists and calls tools with the token; a
    request without it is a 401; each MCP session is its own pagedctx session, stored under the
    token's tenant (issue 31)."""
    project(tmp_path)
    with http_server(tmp_path, env={"PAGEDCTX_MCP_TOKENS": "secret-token-1"}) as url:
        with httpx2.Client(timeout=10) as plain:
            assert plain.post(url, json={}).status_code == 401

        async def run() -> None:
            headers = {"Authorization": "Bearer secret-token-1"}
            async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                    error, context = await call(client, "session_ask", intent="why does add subtract")
                    assert not error and context.startswith("<PagedContext")
                    error, text = await call(client, "consult", page_id="ffffffff")
                    assert error and "Bus Fault" in text
                async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                    error, context = await call(client, "session_ask", intent="which test fails")
                    assert not error and context.startswith("<PagedContext")

        anyio.run(run)
    from pagedctx.host.store.url import open_store

    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    sessions = {key.split("/")[2] for key in store.scan_keys("pagedctx/session/") if key.endswith("/inputs")}
    store.close()
    tenant = hashlib.sha256(b"secret-token-1").hexdigest()[:16]  # stored under the token's tenant
    assert f"{tenant}.mcp.t{tenant}" in sessions, sessions  # stateless: the token's own session
    assert any(re.fullmatch(rf"{tenant}\.mcp\.[0-9a-f]{{32}}", s) for s in sessions), sessions  # stateful


def test_the_cli_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    runner = CliRunner()
    no_repo = runner.invoke(app, ["mcp"])
    assert no_repo.exit_code == 2 and "--repo" in no_repo.output
    root, _ = project(tmp_path)
    open_host = runner.invoke(app, ["mcp", "--repo", str(root), "--http", "8765", "--host", "0.0.0.0"])
    assert open_host.exit_code == 2 and "without a bearer token" in open_host.output
    bad_session = runner.invoke(app, ["mcp", "--repo", str(root), "--session", "a/b"])
    assert bad_session.exit_code == 2 and "--session 'a/b'" in bad_session.output
    for token in ("t\u00f6k\u00e9n-long-1", "two words here"):  # no client could send it (issue 31)
        bad_token = runner.invoke(app, ["mcp", "--repo", str(root)], env={"PAGEDCTX_MCP_TOKENS": token})
        assert bad_token.exit_code == 2 and "printable ASCII without spaces" in bad_token.output


# -- issue 31: the server's own task only, one tenant per token, no session made by a read ------


def _forged_task(marker: Path) -> str:
    """A task an agent writes: its test command leaves `marker` (ran as the server's user) and its
    acceptance asks only for the test that already passes."""
    run = f"python -c \"open({str(marker)!r}, 'w').write('ran')\""
    return json.dumps(
        {
            "task_id": "6f1b1ad2-7c1d-4e8a-9d27-2f4f1d8b6a01",
            "goal": "anything",
            "pins": {"allowed_paths": ["calc/**"]},
            "acceptance": {"fail_to_pass": [], "pass_to_pass": ["tests/test_ops.py::test_mul"]},
            "test_commands": [
                f"{run} && {PYTEST} tests/test_ops.py::test_mul --junitxml=$PAGEDCTX_REPORTS/junit.xml"
            ],
        }
    )


def test_run_checks_never_runs_a_task_file_the_agent_names(tmp_path: Path) -> None:
    """E1, E3, issue 31: a server started without --task has no checks to run: run_checks refuses
    with NO_TASK, and a task file the agent wrote inside its pins and names is never read, let
    alone executed (today its test command ran as the server's user)."""
    marker = tmp_path / "ran-as-server"
    server = build_server(agent_tools(tmp_path, task=None, allow_edit=("calc/**",)), "s1")
    forged = {"file_path": "calc/t.json", "action_type": "CREATE_FILE", "new_content": _forged_task(marker)}

    async def run() -> None:
        async with Client(server) as client:
            error, report = await call(client, "apply_edits", modifications=[forged])
            assert not error and json.loads(report)["applied"] is True
            error, text = await call(client, "run_checks", task="calc/t.json")
            assert error and "task" in text and "not accepted" in text, text
            error, text = await call(client, "run_checks")
            assert error and text.endswith(
                ": NO_TASK: this server has no task (it was started without --task), so there are no "
                "checks to run: run_checks runs only the task the server was started with (restart it "
                "with --task TASK.json)"
            ), text

    anyio.run(run)
    assert not marker.exists()


def test_reading_a_resource_never_makes_a_session(tmp_path: Path) -> None:
    """Issue 31: a session's context read by an id nobody made is a not-found protocol error, and
    the store holds no session afterwards (today the read made one)."""
    server = build_server(agent_tools(tmp_path), "s1")

    async def run() -> None:
        async with Client(server) as client:
            error, text = await read(client, "pagedctx://sessions/nobody/context")
            assert error and text == "no session 'nobody': session_ask starts one", text
            error, text = await read(client, "pagedctx://context")  # s1 asked nothing yet
            assert error and text == "no session 's1': session_ask starts one", text
            error, text = await read(client, "pagedctx://outline/calc/nope.py")
            assert error and "is not an indexed file" in text, text  # the reason, not a crash

    anyio.run(run)
    assert stored_sessions(tmp_path) == set()


@pytest.mark.slow
def test_run_checks_runs_the_task_read_at_start_over_stdio(tmp_path: Path) -> None:
    """E1, E2, E3, issue 31, over stdio: run_checks has no argument in its schema and refuses any
    it is given (a task path, relative or absolute, a contract); the server's task file, inside the
    repository and the pins, cannot be edited (SCOPE_CONFLICT), and code under test that tries to
    rewrite it reaches only the sandbox's copy; each check runs the task read at start (FAIL: add
    still subtracts)."""
    root, _ = project(tmp_path)
    task = write_task(root / "calc" / "task.json")
    marker = tmp_path / "ran-as-server"
    forged = _forged_task(marker)
    rewrites = (  # add still subtracts; calling it rewrites the server's task file
        "def add(a, b):\n"
        '    """Add two numbers."""\n'
        "    import pathlib\n"
        f"    pathlib.Path(__file__).with_name('task.json').write_text({forged!r})\n"
        "    return a - b\n"
    )

    async def agent() -> None:
        async with stdio_client(tmp_path, task=task) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert listed["run_checks"].input_schema.get("properties", {}) == {}
            create = {"file_path": "calc/t.json", "action_type": "CREATE_FILE", "new_content": forged}
            error, report = await call(client, "apply_edits", modifications=[create])
            assert not error and json.loads(report)["applied"] is True
            for arguments in (
                {"task": "calc/t.json"},
                {"task": str(root / "calc" / "t.json")},
                {"task": "../proj/calc/t.json"},
                {"contract": "calc/t.json"},
            ):
                error, text = await call(client, "run_checks", **arguments)
                assert error and "not accepted" in text and "started with" in text, text
            own = {"file_path": "calc/task.json", "action_type": "CREATE_FILE", "new_content": forged}
            error, text = await call(client, "apply_edits", modifications=[own])
            assert (
                error
                and "SCOPE_CONFLICT: modification 1: 'calc/task.json' is this server's task file" in text
            )
            change = {**_fix(), "new_content": rewrites}
            error, report = await call(client, "apply_edits", modifications=[change])
            assert not error and json.loads(report)["applied"] is True
            error, first = await call(client, "run_checks")
            assert not error and json.loads(first)["verdict"] == "FAIL", first
            # the code under test ran in the sandbox, on a copy: the server's task file is untouched
            assert json.loads(task.read_text())["goal"] != "anything"
            error, second = await call(client, "run_checks")
            assert not error and json.loads(second)["verdict"] == "FAIL", second

    anyio.run(agent)
    assert not marker.exists()


def _operator_session(tmp_path: Path, name: str) -> str:
    """A session made before the server starts (an operator's, resumed with --session)."""
    from pagedctx.session import Session

    with Session.open(store=f"sqlite:///{tmp_path / 'state.db'}", session_id=name, runtime="inproc") as made:
        made.add_repo(tmp_path / "proj")
        return str(made.look("why does add subtract").xml)


def _tokens(tmp_path: Path, *tokens: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text("".join(f"{t}\n" for t in tokens))
    return path


@pytest.mark.slow
def test_each_bearer_token_is_a_tenant_over_http(tmp_path: Path) -> None:
    """D2, issue 31, over streamable HTTP with two tokens: what token A made (an X-Session-Id
    session, its token's own session) is invisible to token B through every tool and resource; a
    foreign id answers exactly as a missing one; `pagedctx://context` is the caller's session,
    never the operator's; A's stateful MCP session answers B's requests as an unknown one (404);
    reads make no session."""
    a, b = "tenant-a-token-1", "tenant-b-token-2"
    project(tmp_path)
    operator = _operator_session(tmp_path, "operator-1")
    assert operator.startswith("<PagedContext")
    a_default = "mcp.t" + hashlib.sha256(a.encode()).hexdigest()[:16]
    with http_server(
        tmp_path, "--token-file", str(_tokens(tmp_path, a, b)), "--session", "operator-1"
    ) as url:

        async def run() -> None:
            async with http_client(url, a, "shared") as client_a:
                error, made = await call(client_a, "session_ask", intent="why does add subtract")
                assert not error and made.startswith("<PagedContext")
                page = re.findall(r'<Node id="([0-9a-f]{8})"', made)[-1]
                error, own = await read(client_a, "pagedctx://sessions/shared/context")
                assert not error and own == made
            async with http_client(url, a) as client_a:  # A's token's own session
                error, text = await call(client_a, "session_ask", intent="which test fails")
                assert not error and text.startswith("<PagedContext")
            async with http_client(url, b, "shared") as client_b:
                error, missing = await read(client_b, "pagedctx://sessions/never-made/context")
                assert error and missing == "no session 'never-made': session_ask starts one", missing
                error, text = await read(client_b, "pagedctx://sessions/shared/context")
                assert error and text == missing.replace("never-made", "shared"), text
                error, text = await read(client_b, f"pagedctx://sessions/{a_default}/context")
                assert error and text == missing.replace("never-made", a_default), text
                error, text = await read(client_b, "pagedctx://context")  # B's "shared": not made yet
                assert error and text == missing.replace("never-made", "shared"), text
                for tool in ("consult", "shelve"):
                    error, text = await call(client_b, tool, page_id=page)
                    expected = f"Error executing tool {tool}: " + missing.replace("never-made", "shared")
                    assert error and text == expected, text
            async with http_client(url, b) as client_b:  # B's own session: nothing of A's, nor the operator's
                error, text = await read(client_b, "pagedctx://context")
                assert error and "no session 'mcp.t" in text, text
            async with http_client(url, a, "shared") as client_a:  # A's session is as A left it
                error, own = await read(client_a, "pagedctx://sessions/shared/context")
                assert not error and own == made

        anyio.run(run)
        opening = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        accept = {"Accept": "application/json, text/event-stream"}
        with httpx2.Client(timeout=30, headers=accept) as plain:
            opened = plain.post(url, json=opening, headers={"Authorization": f"Bearer {a}"})
            assert opened.status_code == 200
            connection = opened.headers["mcp-session-id"]
            foreign = plain.post(
                url, json=listing, headers={"Authorization": f"Bearer {b}", "Mcp-Session-Id": connection}
            )
            unknown = plain.post(
                url, json=listing, headers={"Authorization": f"Bearer {b}", "Mcp-Session-Id": "f" * 32}
            )
            assert (
                (foreign.status_code, foreign.text)
                == (unknown.status_code, unknown.text)
                == (404, unknown.text)
            )
            mine = plain.post(
                url, json=listing, headers={"Authorization": f"Bearer {a}", "Mcp-Session-Id": connection}
            )
            assert mine.status_code == 200
    tenant_a = hashlib.sha256(a.encode()).hexdigest()[:16]
    assert stored_sessions(tmp_path) == {"operator-1", f"{tenant_a}.shared", f"{tenant_a}.{a_default}"}


@pytest.mark.slow
def test_a_malformed_authorization_header_is_a_401_never_a_500(tmp_path: Path) -> None:
    """Issue 31, raw bytes on a socket: a non-ASCII Authorization header (UTF-8 or Latin-1), an
    empty one, a missing or other scheme, extra spaces or words, two headers: each is a 401 with a
    JSON body; a non-UTF-8 byte in another header never turns a good token into a 500."""
    project(tmp_path)
    good = b"Bearer secret-token-1"
    with http_server(tmp_path, "--token-file", str(_tokens(tmp_path, "secret-token-1"))) as url:
        for value in (
            "Bearer t\u00f6k\u00e9n".encode(),
            "Bearer t\u00f6k\u00e9n".encode("latin-1"),
            b"Bearer secret-token-1\xff",
            b"",
            b"Bearer",
            b"Bearer ",
            b"secret-token-1",
            b"Basic secret-token-1",
            b"Bearer  secret-token-1",
            b"Bearer secret-token-1 secret-token-1",
        ):
            status, headers, body = raw_post(url, [(b"Authorization", value)])
            assert status == 401 and headers.get("www-authenticate") == "Bearer", (value, status, body)
            assert "bearer token" in json.loads(body)["error"], body
        status, _, body = raw_post(
            url, [(b"Authorization", good), (b"Authorization", b"Bearer other-token-2")]
        )
        assert status == 401, body
        status, _, body = raw_post(url, [(b"Authorization", good), (b"X-Note", b"caf\xe9 \xff")])
        assert status not in (401, 500), (status, body)
        status, _, body = raw_post(url, [(b"Authorization", good)])
        assert status not in (401, 500), (status, body)
