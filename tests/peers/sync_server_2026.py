#!/usr/bin/env python
"""An mcp_sync stdio server with the tools of the 2026-07-28 peers (``official_server_2026.py``,
``tests/node/ts_server_2026.mjs``), written as a user of mcp_sync would write them: the same
handlers serve a 2025-11-25 session and 2026-07-28 requests.

    python sync_server_2026.py

It imports mcp_sync from this working tree (not from an installed copy).

Env:
    PEER_EVENTS_FILE  optional path; markers are appended there, one per line, flushed at once:
                      "STARTED slow <tag>", "CANCELLED slow <tag>", "FINISHED slow <tag>",
                      "RAN ask_name" (each run of its handler), "ASKED ask_name <action>"
    PEER_WIRE_FILE    optional path; every line this process reads from stdin ("<<") and
                      writes to stdout (">>") is appended there as one JSON object
                      ``{"pid": ..., "dir": ..., "msg": ...}`` (so a test sees this server's own
                      wire, complete once the process has ended, for every process a client
                      spawned)

Tools:
    echo(text)                  the text
    slow(seconds, tag)          waits on its cancellation token; once cancelled it still
                                reports progress, logs and returns (none of which may reach the
                                client) and writes "CANCELLED slow <tag>" last of all
    ask_name(question)          ctx.session.elicit(question, {name}) -> "accept:<name>"
                                (at 2026-07-28 an input_required round: the handler runs again
                                on the retry, so "RAN ask_name" appears twice)
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from peer_events import event  # noqa: E402

from mcp_sync import Context, Server  # noqa: E402
from mcp_sync.transports.stdio import StdioTransport, claim_stdout  # noqa: E402

WIRE_FILE = os.environ.get("PEER_WIRE_FILE")
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class WireTap:
    """A transport that appends every line read and written to :data:`WIRE_FILE`."""

    def __init__(self, inner: StdioTransport, path: str) -> None:
        self.inner = inner
        self._file = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (kept open)
        self._lock = threading.Lock()

    def _record(self, direction: str, line: bytes) -> None:
        try:
            msg: Any = json.loads(line)
        except ValueError:
            msg = line.decode("utf-8", "replace")
        with self._lock:
            self._file.write(json.dumps({"pid": os.getpid(), "dir": direction, "msg": msg}) + "\n")

    def read_line(self) -> bytes | None:
        line = self.inner.read_line()
        if line is not None and line.strip():
            self._record("<<", line)
        return line

    def write(self, data: bytes) -> None:
        self.inner.write(data)
        self._record(">>", data)

    def close(self) -> None:
        self.inner.close()


server = Server("mcp-sync-peer-2026", version="0.2.0-peer")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def slow(seconds: float, tag: str, ctx: Context) -> str:
    """Wait ``seconds`` on the cancellation token; when cancelled, carry on regardless."""
    event(f"STARTED slow {tag}")
    if not ctx.wait(seconds):
        event(f"FINISHED slow {tag}")
        return f"slept {seconds}"
    # cancelled: everything below must stay off the wire
    ctx.report_progress(1, 1, "after the cancel")
    ctx.log("error", f"slow {tag} goes on after its cancel")
    event(f"CANCELLED slow {tag}")
    return "a result nobody may see"


@server.tool()
def ask_name(ctx: Context, question: str = "Your name?") -> str:
    """Ask the user for a name through the client (form-mode elicitation)."""
    event("RAN ask_name")
    answer = ctx.session.elicit(question, NAME_SCHEMA)
    event(f"ASKED ask_name {answer.action}")
    if answer.action != "accept":
        return str(answer.action)
    return f"accept:{(answer.content or {}).get('name')}"


if __name__ == "__main__":
    if WIRE_FILE:
        with claim_stdout() as out:
            server.run(WireTap(StdioTransport(stdout=out), WIRE_FILE))
    else:
        server.run()
