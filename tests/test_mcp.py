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
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import FIXED_ADD, agent_tools, call, http_server, project, stdio_client
from typer.testing import CliRunner

from pagedctx.cli import app
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
    request without it is a 401; each MCP session is its own pagedctx session."""
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
    token_session = "mcp.t" + hashlib.sha256(b"secret-token-1").hexdigest()[:16]  # stateless: the token's
    assert token_session in sessions, sessions
    assert any(re.fullmatch(r"mcp\.[0-9a-f]{32}", s) for s in sessions), sessions  # a stateful client's


def test_the_cli_refuses_what_it_cannot_serve(tmp_path: Path) -> None:
    runner = CliRunner()
    no_repo = runner.invoke(app, ["mcp"])
    assert no_repo.exit_code == 2 and "--repo" in no_repo.output
    root, _ = project(tmp_path)
    open_host = runner.invoke(app, ["mcp", "--repo", str(root), "--http", "8765", "--host", "0.0.0.0"])
    assert open_host.exit_code == 2 and "without a bearer token" in open_host.output
    bad_session = runner.invoke(app, ["mcp", "--repo", str(root), "--session", "a/b"])
    assert bad_session.exit_code == 2 and "--session 'a/b'" in bad_session.output
