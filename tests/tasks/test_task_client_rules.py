"""The client's rules for tasks: Ctrl-C in ``task.result()`` stops waiting and leaves the
task running (while ``call_tool()`` still cancels), a ``timeout`` only ends the wait, and the
owner rule of each era."""

from __future__ import annotations

import _thread
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from support.messages import requests
from support.probes import GateProbe
from support.sessions import connected
from support.waiting import WAIT, wait_event, wait_until
from tasks.task_servers import memory_store, task_server

from mcp_sync import Cancelled, McpError
from mcp_sync.principal import Principal
from mcp_sync.server.tasks import ANONYMOUS_OWNER, owner_of
from mcp_sync.tasks.store import TaskStore

ERAS = [pytest.param("legacy", id="2025-11-25"), pytest.param("modern", id="2026-07-28")]


@pytest.fixture
def store() -> Iterator[TaskStore]:
    with memory_store() as store:
        yield store


@pytest.fixture
def gates() -> GateProbe:
    return GateProbe()


def _interrupt_when(condition: Any) -> threading.Thread:
    """A thread that sends Ctrl-C (KeyboardInterrupt) to the main thread once ``condition()``."""

    def run() -> None:
        wait_until(condition, "the moment to interrupt")
        _thread.interrupt_main()

    thread = threading.Thread(target=run, name="test-interrupter")
    thread.start()
    return thread


@pytest.mark.parametrize("protocol", ERAS)
def test_ctrl_c_in_result_leaves_the_task_running(
    store: TaskStore, gates: GateProbe, protocol: str
) -> None:
    assert threading.current_thread() is threading.main_thread()
    with connected(task_server(store, gates), protocol=protocol) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "k"}, timeout=WAIT)
        wait_event(gates.started("k"), "the handler to start")

        def polling() -> bool:  # the client is in result()'s polling loop
            return len(requests(list(conn.wire.received), "tasks/get")) >= 2

        interrupter = _interrupt_when(polling)
        try:
            with pytest.raises(KeyboardInterrupt):
                task.result(timeout=WAIT * 4)
        finally:
            interrupter.join(WAIT)
        assert not task.done()
        assert task.status().status == "working"
        assert not gates.cancelled("k").is_set()
        assert requests(list(conn.wire.received), "tasks/cancel") == []
        gates.release("k")
        assert task.result(timeout=WAIT).content[0].text == "k done"


@pytest.mark.parametrize("protocol", ERAS)
def test_a_result_timeout_ends_the_wait_only(
    store: TaskStore, gates: GateProbe, protocol: str
) -> None:
    with connected(task_server(store, gates), protocol=protocol) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "t"}, timeout=WAIT)
        wait_event(gates.started("t"), "the handler to start")
        with pytest.raises(TimeoutError):
            task.result(timeout=0.05)
        assert task.status().status == "working"
        gates.release("t")
        assert task.result(timeout=WAIT).content[0].text == "t done"


def test_ctrl_c_in_call_tool_still_cancels_the_call(store: TaskStore, gates: GateProbe) -> None:
    with connected(task_server(store, gates)) as conn:
        interrupter = _interrupt_when(gates.started("m").is_set)
        try:
            with pytest.raises(KeyboardInterrupt):
                conn.client.call_tool("slow", {"tag": "m"}, timeout=WAIT * 4)
        finally:
            interrupter.join(WAIT)
        wait_event(gates.cancelled("m"), "the call's handler to be cancelled")
        assert requests(list(conn.wire.received), "tasks/cancel") == []


class _Session:
    """Stands for a server session (the owner key of a 2025 task)."""


def _scope(modern: bool, principal: Any = None, session: Any = None) -> Any:
    return SimpleNamespace(modern=modern, principal=principal, session=session or _Session())


def test_the_owner_of_each_era() -> None:
    alice, bob = Principal("alice"), Principal("bob")
    assert owner_of(_scope(True, alice)) == owner_of(_scope(True, alice))
    assert owner_of(_scope(True, alice)) != owner_of(_scope(True, bob))
    assert owner_of(_scope(True)) == ANONYMOUS_OWNER
    one, two = _Session(), _Session()
    assert owner_of(_scope(False, alice, one)) == owner_of(_scope(False, bob, one))
    assert owner_of(_scope(False, session=one)) != owner_of(_scope(False, session=two))


def test_a_cancelled_task_has_no_result(store: TaskStore, gates: GateProbe) -> None:
    with connected(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "q"}, timeout=WAIT)
        conn.client.cancel_task(task.task_id, timeout=WAIT)
        with pytest.raises(McpError) as info:
            conn.client.request("tasks/result", {"taskId": task.task_id}, timeout=WAIT)
        assert info.value.code == -32602 and info.value.data == {"status": "cancelled"}
        with pytest.raises(Cancelled):
            conn.client.task(task.task_id).result(timeout=WAIT)


@pytest.mark.parametrize("protocol", ERAS)
def test_no_task_is_asked_of_a_server_that_runs_none(store: TaskStore, protocol: str) -> None:
    from mcp_sync import CapabilityError, Server

    server = Server("no-tasks", task_store=store)
    server.tool()(lambda: "x")
    with connected(server, protocol=protocol) as conn:
        with pytest.raises(CapabilityError):
            conn.client.call_tool_as_task("<lambda>", {}, timeout=WAIT)
        assert requests(list(conn.wire.received), "tools/call") == []
        if protocol == "legacy":
            with pytest.raises(CapabilityError):
                conn.client.list_tasks(timeout=WAIT)
