"""Tasks are visible only to the principal that created them (at 2026-07-28 the owner is the
authenticated principal, not a connection): through the guarded app, Bob cannot read or
cancel Alice's task, while Alice with another token of hers can."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from guarded import TOKENS, bearer
from support.http import run_waitress
from support.waiting import WAIT

from mcp_sync import Client, Context, McpError, Server
from mcp_sync.http import McpWsgiApp
from mcp_sync.tasks import MemoryTaskStore

MODERN = "2026-07-28"


@pytest.fixture
def site() -> Iterator[tuple[str, threading.Event]]:
    release = threading.Event()
    store = MemoryTaskStore()
    server = Server("guarded-tasks", task_store=store)

    @server.tool(task="optional")
    def report(month: str, ctx: Context) -> str:
        """Waits until released (or cancelled)."""
        while not release.is_set() and not ctx.cancelled:
            ctx.wait(0.05)
        return f"report {month}"

    holder: list[McpWsgiApp] = []

    def lazy(environ, start_response):  # type: ignore[no-untyped-def]
        return holder[0](environ, start_response)

    base, stop = run_waitress(lazy)
    app = McpWsgiApp(server, path="/mcp", auth=bearer(base + "/mcp"))
    holder.append(app)
    try:
        yield base + "/mcp", release
    finally:
        release.set()
        server.tasks.shutdown(WAIT)
        app.close()
        stop()
        store.close()


def as_user(url: str, token: str) -> Client:
    return Client.http(url, headers={"Authorization": f"Bearer {token}"})


def test_a_task_is_visible_only_to_its_principal(site: tuple[str, threading.Event]) -> None:
    url, release = site
    with as_user(url, TOKENS["valid"]) as alice, as_user(url, TOKENS["bob"]) as bob:
        assert alice.protocol_version == MODERN
        task = alice.call_tool_as_task("report", {"month": "2026-11"}, timeout=WAIT)

        with pytest.raises(McpError) as refused:
            bob.get_task(task.task_id, timeout=WAIT)
        assert refused.value.code == -32602
        with pytest.raises(McpError):
            bob.cancel_task(task.task_id, timeout=WAIT)

        # the same user with another token is the same requestor
        with as_user(url, TOKENS["writer"]) as alice_again:
            assert alice_again.get_task(task.task_id, timeout=WAIT).status == "working"

        release.set()
        assert task.result(timeout=WAIT).content[0].text == "report 2026-11"
