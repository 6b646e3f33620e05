"""Tasks at 2025-11-25 over the in-memory pair: creation, tasks/get, tasks/result, tasks/list,
tasks/cancel, status notifications, task modes, the bounded pool and input during a task."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.probes import Collector, GateProbe
from support.sessions import connected
from support.waiting import WAIT, wait_event, wait_until
from tasks.task_servers import STORES, store_for, task_redis, task_server  # noqa: F401 (task_redis: a fixture)

from mcp_sync import Cancelled, CancelToken, McpError
from mcp_sync.lifecycle import RELATED_TASK_KEY
from mcp_sync.tasks.store import TaskStore


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    with store_for(request, tmp_path) as made:
        yield made


@pytest.fixture
def gates() -> GateProbe:
    return GateProbe()


def test_capabilities_and_task_support_are_declared(store: TaskStore, gates: GateProbe) -> None:
    with connected(task_server(store, gates)) as conn:
        caps = conn.client.server_capabilities
        assert caps["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        modes = {t.name: t.execution for t in conn.client.list_tools()}
        assert modes["slow"] is not None and modes["slow"].task_support == "optional"
        assert modes["must"] is not None and modes["must"].task_support == "required"
        assert modes["plain"] is None


def test_no_task_tool_no_capability_no_methods(store: TaskStore) -> None:
    from mcp_sync import Server

    server = Server("plain", task_store=store)
    server.tool()(lambda: "x")
    with connected(server) as conn:
        assert "tasks" not in conn.client.server_capabilities
        with pytest.raises(McpError) as info:
            conn.client.request("tasks/list", {}, timeout=WAIT)
        assert info.value.code == -32601


def test_task_is_created_at_once_and_result_is_what_the_call_returns(
    store: TaskStore, gates: GateProbe
) -> None:
    with connected(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "a"}, ttl=60, timeout=WAIT)
        wait_event(gates.started("a"), "the handler to start")
        assert isinstance(task, concurrent.futures.Future)
        state = task.status()
        assert (state.task_id, state.status, state.ttl_ms) == (task.task_id, "working", 60_000)
        assert not task.done()
        gates.release("a")
        result = task.result(timeout=WAIT)
        assert result.content[0].text == "a done" and not result.is_error
        assert task.done() and task.status().status == "completed"
        raw = conn.client.request("tasks/result", {"taskId": task.task_id}, timeout=WAIT)
        assert raw["_meta"][RELATED_TASK_KEY] == {"taskId": task.task_id}
        assert raw["content"][0]["text"] == "a done"


def test_the_create_task_result_is_sent_before_the_handler_ends(
    store: TaskStore, gates: GateProbe
) -> None:
    with connected(task_server(store, gates)) as conn:
        raw = conn.client.request(
            "tools/call", {"name": "slow", "arguments": {"tag": "b"}, "task": {}}, timeout=WAIT
        )
        assert set(raw) == {"task"}
        assert raw["task"]["status"] == "working" and raw["task"]["ttl"] == 3_600_000
        assert not gates.completed("b").is_set()
        gates.release("b")
        wait_event(gates.completed("b"), "the handler to finish")


def test_cancel_is_recorded_before_the_reply_and_fires_the_token(
    store: TaskStore, gates: GateProbe
) -> None:
    with connected(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "c"}, timeout=WAIT)
        wait_event(gates.started("c"), "the handler to start")
        raw = conn.client.request("tasks/cancel", {"taskId": task.task_id}, timeout=WAIT)
        assert raw["status"] == "cancelled"  # the reply carries the cancelled task
        wait_event(gates.cancelled("c"), "the handler's token to fire")
        # the handler returned "c stopped" afterwards: the task stays cancelled
        wait_until(
            lambda: not conn.handle.session.server.tasks.running(task.task_id), "the handler to end"
        )
        assert conn.client.get_task(task.task_id).status == "cancelled"
        with pytest.raises(McpError) as info:
            conn.client.request("tasks/cancel", {"taskId": task.task_id}, timeout=WAIT)
        assert info.value.code == -32602
        with pytest.raises(Cancelled):
            task.result(timeout=WAIT)


def test_task_call_cancel_reports_the_state_and_cancels_the_future(
    store: TaskStore, gates: GateProbe
) -> None:
    with connected(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "d"}, timeout=WAIT)
        wait_event(gates.started("d"), "the handler to start")
        state = task.cancel("no longer needed")
        assert state.status == "cancelled" and task.cancelled()
        wait_event(gates.cancelled("d"), "the handler's token to fire")
        with pytest.raises(Cancelled):
            task.result(timeout=WAIT)
        sent = [m for m in conn.wire.received if m.get("method") == "notifications/cancelled"]
        assert sent == []  # tasks are cancelled with tasks/cancel only


def test_cancel_after_the_end_reports_the_end(store: TaskStore, gates: GateProbe) -> None:
    with connected(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "e"}, timeout=WAIT)
        gates.release("e")
        assert task.result(timeout=WAIT).content[0].text == "e done"
        state = conn.client.cancel_task(task.task_id, timeout=WAIT)
        assert state.status == "completed"


def test_task_modes_are_enforced(store: TaskStore, gates: GateProbe) -> None:
    with connected(task_server(store, gates)) as conn:
        with pytest.raises(McpError) as info:
            conn.client.call_tool("must", {"tag": "x"}, timeout=WAIT)
        assert info.value.code == -32601
        with pytest.raises(McpError) as info:
            conn.client.call_tool_as_task("plain", {"text": "x"}, timeout=WAIT)
        assert info.value.code == -32601
        assert conn.client.call_tool("plain", {"text": "y"}, timeout=WAIT).content[0].text == "y"
        with pytest.raises(McpError) as info:
            conn.client.request(
                "tools/call",
                {"name": "slow", "arguments": {"tag": "z"}, "task": {"ttl": "1"}},
                timeout=WAIT,
            )
        assert info.value.code == -32602


def test_tool_error_fails_the_task_and_result_is_the_tool_error(
    store: TaskStore, gates: GateProbe
) -> None:
    with connected(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("broken", {"reason": "bad input"}, timeout=WAIT)
        result = task.result(timeout=WAIT)
        assert result.is_error and result.content[0].text == "bad input"
        assert task.status().status == "failed"  # the 2025-11-25 rule for isError


def test_json_rpc_error_of_the_handler_is_the_result_error(
    store: TaskStore, gates: GateProbe
) -> None:
    with connected(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("refuse", {"reason": "no way"}, timeout=WAIT)
        with pytest.raises(McpError) as info:
            task.result(timeout=WAIT)
        assert (info.value.code, info.value.message) == (-32603, "no way")
        assert task.status().status == "failed"


def test_tasks_list_pages_and_is_per_session(store: TaskStore, gates: GateProbe) -> None:
    server = task_server(store, gates, page_size=2)
    with connected(server) as conn:
        ids = []
        for tag in ("l1", "l2", "l3"):
            gates.release(tag)
            ids.append(conn.client.call_tool_as_task("slow", {"tag": tag}, timeout=WAIT))
        for task in ids:
            task.result(timeout=WAIT)
        first = conn.client.request("tasks/list", {}, timeout=WAIT)
        assert len(first["tasks"]) == 2 and "nextCursor" in first
        listed = conn.client.list_tasks(timeout=WAIT)
        assert sorted(t.task_id for t in listed) == sorted(t.task_id for t in ids)
        with connected(server) as other:  # another session sees none of them
            assert other.client.list_tasks(timeout=WAIT) == []
            with pytest.raises(McpError) as info:
                other.client.get_task(ids[0].task_id, timeout=WAIT)
            assert info.value.code == -32602


def test_status_notifications_follow_the_task(store: TaskStore, gates: GateProbe) -> None:
    seen = Collector()
    with connected(task_server(store, gates), on_notification=seen) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "n"}, timeout=WAIT)
        gates.release("n")
        task.result(timeout=WAIT)
        seen.wait_for(
            lambda item: (
                item[0] == "notifications/tasks/status"
                and item[1]["taskId"] == task.task_id
                and item[1]["status"] == "completed"
            ),
            "the completed status notification",
        )


def test_cancelling_a_tasks_result_wait_leaves_the_task_running(
    store: TaskStore, gates: GateProbe
) -> None:
    with connected(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "r"}, timeout=WAIT)
        wait_event(gates.started("r"), "the handler to start")
        waiting = conn.client.submit("tasks/result", {"taskId": task.task_id}, raw=True)
        wait_until(lambda: conn.handle.session.endpoint.in_flight()[0] == 1, "tasks/result to wait")
        assert waiting.cancel("stop waiting")  # notifications/cancelled for tasks/result
        wait_until(lambda: conn.handle.session.endpoint.in_flight()[0] == 0, "the wait to end")
        assert conn.client.get_task(task.task_id, timeout=WAIT).status == "working"
        assert not gates.cancelled("r").is_set()
        gates.release("r")
        assert task.result(timeout=WAIT).content[0].text == "r done"


def test_pool_bound_refuses_a_task_beyond_it(store: TaskStore, gates: GateProbe) -> None:
    with connected(task_server(store, gates, max_tasks=1)) as conn:
        first = conn.client.call_tool_as_task("slow", {"tag": "p1"}, timeout=WAIT)
        with pytest.raises(McpError) as info:
            conn.client.call_tool_as_task("slow", {"tag": "p2"}, timeout=WAIT)
        assert info.value.code == -32603 and info.value.data == {"limit": 1}
        gates.release("p1")
        first.result(timeout=WAIT)
        wait_until(lambda: conn.handle.session.server.tasks.running_count() == 0, "the slot")
        gates.release("p3")
        assert (
            conn.client.call_tool_as_task("slow", {"tag": "p3"}, timeout=WAIT)
            .result(timeout=WAIT)
            .content[0]
            .text
            == "p3 done"
        )


@pytest.fixture(params=STORES)
def one_task_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    with store_for(request, tmp_path, max_tasks=1) as made:
        yield made


def test_a_full_task_store_refuses_a_task_with_an_internal_error(
    one_task_store: TaskStore, gates: GateProbe
) -> None:
    """The store's bound, not the server's pool (16 handlers), refuses the second task."""
    server = task_server(one_task_store, gates)
    with connected(server) as conn:
        first = conn.client.call_tool_as_task("slow", {"tag": "f1"}, timeout=WAIT)
        with pytest.raises(McpError) as info:
            conn.client.call_tool_as_task("slow", {"tag": "f2"}, timeout=WAIT)
        assert info.value.code == -32603 and "task store is full" in info.value.message
        assert [t.task_id for t in conn.client.list_tasks(timeout=WAIT)] == [first.task_id]
        gates.release("f1")
        first.result(timeout=WAIT)  # ended: the oldest ended task makes room for the next
        gates.release("f3")
        third = conn.client.call_tool_as_task("slow", {"tag": "f3"}, timeout=WAIT)
        assert third.result(timeout=WAIT).content[0].text == "f3 done"


def test_elicitation_during_a_task_goes_through_tasks_result(
    store: TaskStore, gates: GateProbe
) -> None:
    asked: list[dict[str, Any]] = []

    def answer(params: Any, ctx: Any) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Ada"}}

    with connected(task_server(store, gates), elicitation_handler=answer) as conn:
        task = conn.client.call_tool_as_task("ask", {"question": "name?"}, timeout=WAIT)
        wait_until(
            lambda: conn.client.get_task(task.task_id, timeout=WAIT).status == "input_required",
            "the task to need input",
        )
        assert task.result(timeout=WAIT).content[0].text == "hello Ada"
        assert asked[0]["_meta"][RELATED_TASK_KEY] == {"taskId": task.task_id}
        assert task.status().status == "completed"


def test_unknown_task_is_invalid_params(store: TaskStore, gates: GateProbe) -> None:
    with connected(task_server(store, gates)) as conn:
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            with pytest.raises(McpError) as info:
                conn.client.request(method, {"taskId": "nope"}, timeout=WAIT)
            assert info.value.code == -32602, method
        with pytest.raises(McpError) as info:
            conn.client.request("tasks/get", {}, timeout=WAIT)
        assert info.value.code == -32602


def test_a_stopping_server_fails_its_running_tasks(store: TaskStore, gates: GateProbe) -> None:
    server = task_server(store, gates)
    with connected(server) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "s"}, timeout=WAIT)
        wait_event(gates.started("s"), "the handler to start")
        assert server.tasks.shutdown(WAIT) == []  # joined: the handler saw its token
        assert gates.cancelled("s").is_set()
        state = conn.client.get_task(task.task_id, timeout=WAIT)
        assert (state.status, state.status_message) == ("failed", "the server stopped")
        gates.release("s2")
        again = conn.client.call_tool_as_task("slow", {"tag": "s2"}, timeout=WAIT)
        assert again.result(timeout=WAIT).content[0].text == "s2 done"  # it serves again


def test_a_closed_session_cancels_its_tasks(store: TaskStore, gates: GateProbe) -> None:
    from mcp_sync.server.tasks import owner_of

    server = task_server(store, gates)
    with connected(server) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "u"}, timeout=WAIT)
        wait_event(gates.started("u"), "the handler to start")
        owner = owner_of(conn.handle.session.scoped(CancelToken()))
    wait_event(gates.cancelled("u"), "the handler's token to fire")
    wait_until(lambda: server.tasks.running(task.task_id) is None, "the handler to end")
    state = store.get(task.task_id, owner=owner)
    assert (state.status, state.status_message) == ("cancelled", "the session ended")
