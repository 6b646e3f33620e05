"""The servers and stores the task protocol tests share.

:func:`task_server` serves gated tools in every task mode; :func:`make_store` makes the stores
the protocol tests are parametrized over.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.probes import GateProbe
from support.redis_server import RedisServer, running_redis
from support.task_stores import NEEDS_REDIS

from mcp_sync import Context, McpError, Server
from mcp_sync.tasks import MemoryTaskStore, RedisTaskStore, SqliteTaskStore
from mcp_sync.tasks.store import TaskStore


def memory_store() -> TaskStore:
    """A fresh in-memory task store."""
    return MemoryTaskStore()


STORES = ["memory", "sqlite", pytest.param("redis", marks=NEEDS_REDIS)]
"""The stores the protocol tests run on where the store matters."""


def make_store(
    kind: str, tmp_path: Path, redis_url: str | None = None, **options: Any
) -> TaskStore:
    """A fresh store of ``kind``: ``"memory"``, ``"sqlite"`` (a file under ``tmp_path``) or
    ``"redis"`` (keys of its own on the server at ``redis_url``), given ``options``."""
    if kind == "memory":
        return MemoryTaskStore(**options)
    if kind == "sqlite":
        return SqliteTaskStore(tmp_path / "tasks.db", **options)
    if kind == "redis":
        assert redis_url is not None
        return RedisTaskStore(redis_url, prefix=f"t{uuid.uuid4().hex[:12]}:", **options)
    raise ValueError(kind)


@pytest.fixture
def task_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own (its output pumps are threads: no test may inherit
    them)."""
    with running_redis() as server:
        yield server


@contextmanager
def store_for(
    request: pytest.FixtureRequest, tmp_path: Path, **options: Any
) -> Iterator[TaskStore]:
    """The body of a test module's ``store`` fixture parametrized over :data:`STORES` (the
    module imports :func:`task_redis` too); ``options`` go to the store."""
    url = request.getfixturevalue("task_redis").url if request.param == "redis" else None
    with make_store(request.param, tmp_path, url, **options) as made:
        yield made


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
