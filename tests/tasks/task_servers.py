"""The servers and stores the task protocol tests share.

:func:`task_server` serves gated tools in every task mode; :func:`make_store` makes the stores
the protocol tests are parametrized over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.probes import GateProbe

from mcp_sync import Context, McpError, Server
from mcp_sync.tasks import MemoryTaskStore, SqliteTaskStore
from mcp_sync.tasks.store import TaskStore


def memory_store() -> TaskStore:
    """A fresh in-memory task store."""
    return MemoryTaskStore()


STORES = ["memory", "sqlite"]
"""The stores the protocol tests run on where the store matters (Redis: see
:func:`redis_store`)."""


def make_store(kind: str, tmp_path: Path) -> TaskStore:
    """A fresh store of ``kind``: ``"memory"`` or ``"sqlite"`` (a file under ``tmp_path``)."""
    if kind == "memory":
        return MemoryTaskStore()
    if kind == "sqlite":
        return SqliteTaskStore(tmp_path / "tasks.db")
    raise ValueError(kind)


def task_server(store: TaskStore, gates: GateProbe, **options: Any) -> Server:
    """A server with gated tools: ``slow`` (optional), ``must`` (required), ``plain``
    (forbidden), ``broken`` (a tool error), ``refuse`` (a JSON-RPC error), ``ask`` (elicits)."""
    server = Server("tasks-test", task_store=store, **options)

    @server.tool(task="optional")
    def slow(tag: str, ctx: Context) -> str:
        """Wait for the test (or a cancel)."""
        if gates.gate(tag, ctx):
            return f"{tag} stopped"
        return f"{tag} done"

    @server.tool(task="required")
    def must(tag: str, ctx: Context) -> str:
        """Like slow, but only as a task."""
        if gates.gate(tag, ctx):
            return f"{tag} stopped"
        return f"{tag} done"

    @server.tool()
    def plain(text: str) -> str:
        """Never a task."""
        return text

    @server.tool(task="optional")
    def broken(reason: str) -> str:
        """A tool error."""
        raise ValueError(reason)

    @server.tool(task="optional")
    def refuse(reason: str) -> str:
        """A JSON-RPC error."""
        raise McpError(-32603, reason)

    @server.tool(task="optional")
    def ask(question: str, ctx: Context) -> str:
        """Elicit an answer, then return it."""
        answer = ctx.session.elicit(
            question, {"type": "object", "properties": {"name": {"type": "string"}}}
        )
        return f"hello {(answer.content or {}).get('name')}"

    @server.tool(task="optional")
    def ask_two(ctx: Context) -> str:
        """Elicit two answers at once (from two threads), then return both."""
        import threading

        names: dict[str, str] = {}

        def one(label: str) -> None:
            answer = ctx.session.elicit(label, {"type": "object", "properties": {"name": {}}})
            names[label] = (answer.content or {}).get("name", "?")

        threads = [threading.Thread(target=one, args=(label,)) for label in ("first", "second")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return f"{names.get('first')} and {names.get('second')}"

    return server
