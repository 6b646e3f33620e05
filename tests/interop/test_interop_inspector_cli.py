"""MCP Inspector's command line (``@modelcontextprotocol/inspector-cli``, pinned in
``tests/node/package-lock.json``) against an mcp_sync server, over stdio and Streamable HTTP.

The Inspector is run as its users run it (``mcp-inspector-cli --cli TARGET --method ...``)
with the machine's ``node``, and judged by its exit status and the JSON it prints. Without
``tests/node/node_modules`` these tests skip, unless ``CI`` is set (see :mod:`support.node`).
"""

from __future__ import annotations

import importlib.util
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.node import node, node_package
from support.paths import PEERS, PYTHON
from support.processes import Finished, Proc, run

pytestmark = pytest.mark.interop

CLI_SERVER = PEERS / "cli_server.py"
MCP_SYNC = str(Path(PYTHON).with_name("mcp-sync"))
LIMIT = 60.0


def inspector(target: list[str], *args: str) -> Finished:
    """Run the Inspector's CLI mode against ``target`` (a command, or a URL and options)."""
    package = node_package("@modelcontextprotocol/inspector-cli")
    build = package / "build"
    # it reads its own package.json as "../package.json" of the *working directory*, so it
    # must run from its build directory (a path of its own, not ours)
    return run([node(), str(build / "cli.js"), "--cli", *target, *args], LIMIT, cwd=build)


def _json(result: Finished) -> Any:
    assert result.code == 0, f"the Inspector failed\n{result.describe()}"
    try:
        return json.loads(result.stdout)
    except ValueError:
        raise AssertionError(f"the Inspector printed no JSON\n{result.describe()}") from None


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """``mcp-sync serve cli_server:server --http`` on a free loopback port."""
    if importlib.util.find_spec("httpx") is None:
        pytest.skip("the http extra (httpx) is not installed")
    with Proc(
        [MCP_SYNC, "serve", "cli_server:server", "--http", "--port", "0"], cwd=PEERS
    ) as server:
        line = server.wait_for("stderr", "serving cli-test at http://", LIMIT)
        yield line.split(" at ", 1)[1].strip()
        server.send_signal(signal.SIGINT)
        stopped = server.finish(LIMIT)
    assert stopped.code == 0, stopped.describe()


@pytest.fixture(scope="module", params=["stdio", "http"])
def target(request: pytest.FixtureRequest) -> list[str]:
    """How the Inspector names our server: a command (stdio) or a URL (Streamable HTTP)."""
    if request.param == "stdio":
        return [PYTHON, str(CLI_SERVER)]
    return [request.getfixturevalue("http_url"), "--transport", "http"]


def test_inspector_lists_our_tools(target: list[str]) -> None:
    listed = _json(inspector(target, "--method", "tools/list"))
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert {"echo", "fail", "image", "pool_size"} <= set(tools), listed
    assert tools["echo"]["inputSchema"]["properties"]["text"]["type"] == "string", listed


def test_inspector_calls_a_tool(target: list[str]) -> None:
    result = _json(
        inspector(
            target, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hello"
        )
    )
    assert result["content"] == [{"type": "text", "text": "hello"}], result
    assert not result.get("isError"), result


def test_inspector_reports_a_failing_tool_as_a_tool_error(target: list[str]) -> None:
    result = _json(
        inspector(
            target, "--method", "tools/call", "--tool-name", "fail", "--tool-arg", "message=no disk"
        )
    )
    assert result["isError"] is True and result["content"][0]["text"] == "no disk", result


def test_inspector_reports_invalid_arguments_as_a_tool_error(target: list[str]) -> None:
    """Arguments that fail the tool's input schema are a tool result with ``isError``
    (2025-11-25, SEP-1303), which the Inspector prints with exit status 0 -- not a JSON-RPC
    error, which makes it exit 1."""
    result = _json(
        inspector(target, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=5")
    )
    assert result["isError"] is True, result
    assert "text" in result["content"][0]["text"], (
        f"the message does not name the bad argument: {result}"
    )
