"""Tasks at 2026-07-28 (extension io.modelcontextprotocol/tasks) over the in-memory pair:
negotiation per request, server-directed creation, tasks/get|update|cancel, the removed
methods, notifications/tasks through subscriptions/listen, input through inputRequests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.messages import requests
from support.probes import GateProbe
from support.sessions import connected
from support.waiting import WAIT, wait_event, wait_until
from tasks.task_servers import STORES, store_for, task_redis, task_server  # noqa: F401 (task_redis: a fixture)

from mcp_sync import Cancelled, McpError
from mcp_sync.lifecycle import TASKS_EXTENSION
from mcp_sync.tasks.memory import MemoryTaskStore
from mcp_sync.tasks.store import TaskRecord, TaskStore

REQUIRED = {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TaskStore]:
    with store_for(request, tmp_path) as made:
        yield made


@pytest.fixture
def gates() -> GateProbe:
    return GateProbe()


def modern(server: Any, **options: Any) -> Any:
    return connected(server, protocol="modern", **options)


def test_discover_advertises_the_extension_and_no_legacy_task_fields(
    store: TaskStore, gates: GateProbe
) -> None:
    with modern(task_server(store, gates)) as conn:
        caps = conn.client.server_capabilities
        assert caps["extensions"][TASKS_EXTENSION] == {}
        assert "tasks" not in caps
        raw = conn.client.request("tools/list", {}, timeout=WAIT)
        assert all("execution" not in tool for tool in raw["tools"])


def test_a_declaring_request_gets_a_task_and_its_result(store: TaskStore, gates: GateProbe) -> None:
    with modern(task_server(store, gates)) as conn:
        raw = conn.client.task_request(
            "tools/call", {"name": "slow", "arguments": {"tag": "a"}, "task": {"ttl": 5}}, {}
        )
        assert raw["resultType"] == "task" and raw["status"] == "working"
        assert raw["ttlMs"] == 3_600_000  # params.task is ignored at 2026-07-28
        assert {"taskId", "createdAt", "lastUpdatedAt", "pollIntervalMs"} <= set(raw)
        gates.release("a")
        task = conn.client.task(raw["taskId"], timeout=WAIT)
        assert task.result(timeout=WAIT).content[0].text == "a done"
        got = conn.client.task_request("tasks/get", {"taskId": task.task_id}, {})
        assert got["resultType"] == "complete" and got["status"] == "completed"
        assert got["result"]["content"][0]["text"] == "a done"


def test_without_the_extension_optional_runs_at_once_and_required_is_refused(
    store: TaskStore, gates: GateProbe
) -> None:
    with modern(task_server(store, gates)) as conn:
        gates.release("b")
        assert conn.client.call_tool("slow", {"tag": "b"}, timeout=WAIT).content[0].text == "b done"
        with pytest.raises(McpError) as info:
            conn.client.call_tool("must", {"tag": "c"}, timeout=WAIT)
        assert info.value.code == -32021 and info.value.data == REQUIRED
        assert not gates.started("c").is_set()
        task = conn.client.call_tool_as_task("plain", {"text": "now"}, timeout=WAIT)
        assert task.task_id is None and task.result(timeout=0).content[0].text == "now"


def test_task_methods_need_the_extension(store: TaskStore, gates: GateProbe) -> None:
    with modern(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "d"}, timeout=WAIT)
        for method in ("tasks/get", "tasks/cancel"):
            with pytest.raises(McpError) as info:
                conn.client.request(method, {"taskId": task.task_id}, timeout=WAIT)
            assert info.value.code == -32021 and info.value.data == REQUIRED
        for method in ("tasks/result", "tasks/list"):
            with pytest.raises(McpError) as info:
                conn.client.task_request(method, {"taskId": task.task_id}, {})
            assert info.value.code == -32601
        gates.release("d")
        task.result(timeout=WAIT)


def test_cancel_is_an_empty_ack_and_fires_the_token(store: TaskStore, gates: GateProbe) -> None:
    with modern(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "e"}, timeout=WAIT)
        wait_event(gates.started("e"), "the handler to start")
        ack = conn.client.task_request("tasks/cancel", {"taskId": task.task_id}, {})
        assert ack == {"resultType": "complete"} or set(ack) <= {"resultType", "_meta"}
        wait_event(gates.cancelled("e"), "the handler's token to fire")
        wait_until(lambda: task.status().status == "cancelled", "the task to be cancelled")
        with pytest.raises(Cancelled):
            task.result(timeout=WAIT)
        # cancelling an ended task is still acknowledged (cooperative)
        conn.client.task_request("tasks/cancel", {"taskId": task.task_id}, {})
        with pytest.raises(McpError) as info:
            conn.client.task_request("tasks/cancel", {"taskId": "unknown"}, {})
        assert info.value.code == -32602


def test_task_call_cancel_reports_the_state(store: TaskStore, gates: GateProbe) -> None:
    with modern(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "f"}, timeout=WAIT)
        wait_event(gates.started("f"), "the handler to start")
        assert task.cancel("no longer needed").status == "cancelled"
        assert task.cancelled()
        wait_event(gates.cancelled("f"), "the handler's token to fire")


def test_outcomes_in_the_detailed_task(store: TaskStore, gates: GateProbe) -> None:
    with modern(task_server(store, gates)) as conn:
        broken = conn.client.call_tool_as_task("broken", {"reason": "bad"}, timeout=WAIT)
        result = broken.result(timeout=WAIT)
        assert result.is_error and broken.status().status == "completed"  # the 2026 rule
        refused = conn.client.call_tool_as_task("refuse", {"reason": "no way"}, timeout=WAIT)
        with pytest.raises(McpError) as info:
            refused.result(timeout=WAIT)
        assert (info.value.code, info.value.message) == (-32603, "no way")
        got = conn.client.task_request("tasks/get", {"taskId": refused.task_id}, {})
        assert got["status"] == "failed" and got["error"]["code"] == -32603


def test_input_required_shows_input_requests_and_update_resumes(
    store: TaskStore, gates: GateProbe
) -> None:
    def answer(params: Any, ctx: Any) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Grace"}}

    with modern(task_server(store, gates), elicitation_handler=answer) as conn:
        raw = conn.client.task_request(
            "tools/call", {"name": "ask", "arguments": {"question": "who?"}}, {}
        )
        task_id = raw["taskId"]

        def detailed() -> dict[str, Any]:
            return conn.client.task_request("tasks/get", {"taskId": task_id}, {})

        wait_until(lambda: detailed()["status"] == "input_required", "the task to ask")
        got = detailed()
        assert list(got["inputRequests"]) == ["elicit-1"]
        assert got["inputRequests"]["elicit-1"]["method"] == "elicitation/create"
        assert got["inputRequests"]["elicit-1"]["params"]["message"] == "who?"
        ack = conn.client.task_request(
            "tasks/update",
            {"taskId": task_id, "inputResponses": {"elicit-1": answer(None, None), "other": {}}},
            {},
        )
        assert set(ack) <= {"resultType", "_meta"}
        wait_until(lambda: detailed()["status"] == "completed", "the task to finish")
        assert detailed()["result"]["content"][0]["text"] == "hello Grace"


def test_task_call_answers_input_with_the_clients_handler(
    store: TaskStore, gates: GateProbe
) -> None:
    def answer(params: Any, ctx: Any) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Lin"}}

    with modern(task_server(store, gates), elicitation_handler=answer) as conn:
        task = conn.client.call_tool_as_task("ask", {"question": "who?"}, timeout=WAIT)
        assert task.result(timeout=WAIT).content[0].text == "hello Lin"


def test_input_not_declared_fails_the_task_with_minus_32021(
    store: TaskStore, gates: GateProbe
) -> None:
    with modern(task_server(store, gates)) as conn:  # no elicitation handler: not declared
        task = conn.client.call_tool_as_task("ask", {"question": "who?"}, timeout=WAIT)
        with pytest.raises(McpError) as info:
            task.result(timeout=WAIT)
        assert info.value.code == -32021


def test_notifications_tasks_on_subscriptions_listen(store: TaskStore, gates: GateProbe) -> None:
    with modern(task_server(store, gates)) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "g"}, timeout=WAIT)
        with conn.client.listen(tasks=[task.task_id, "not-mine"], ack_timeout=WAIT) as sub:
            assert sub.acknowledged == {"taskIds": [task.task_id]}
            gates.release("g")
            while True:
                event = sub.next(timeout=WAIT)
                if event.method == "notifications/tasks" and event.params["status"] == "completed":
                    break
            assert event.params["taskId"] == task.task_id
            assert event.params["result"]["content"][0]["text"] == "g done"


def test_listen_for_tasks_needs_the_extension(store: TaskStore, gates: GateProbe) -> None:
    with modern(task_server(store, gates)) as conn:
        params = conn.client._modern_params({"notifications": {"taskIds": ["x"]}})
        with pytest.raises(McpError) as info:
            conn.client.endpoint.submit("subscriptions/listen", params).result(timeout=WAIT)
        assert info.value.code == -32021 and info.value.data == REQUIRED


def ask_two(conn: Any) -> tuple[str, Callable[[], dict[str, Any]], dict[str, str]]:
    """Start ``ask_two`` as a task and wait until both its questions are asked: the task id,
    a ``tasks/get`` of it, and each question's key by its label."""
    raw = conn.client.task_request("tools/call", {"name": "ask_two", "arguments": {}}, {})
    task_id = raw["taskId"]

    def detailed() -> dict[str, Any]:
        return conn.client.task_request("tasks/get", {"taskId": task_id}, {})

    wait_until(lambda: len(detailed().get("inputRequests", {})) == 2, "both questions")
    asked = detailed()["inputRequests"]
    return task_id, detailed, {entry["params"]["message"]: key for key, entry in asked.items()}


def test_two_inputs_at_once_and_a_partial_update(store: TaskStore, gates: GateProbe) -> None:
    with modern(task_server(store, gates), elicitation_handler=lambda p, c: {}) as conn:
        task_id, detailed, by_label = ask_two(conn)
        first, second = by_label["first"], by_label["second"]
        assert sorted(by_label.values()) == ["elicit-1", "elicit-2"]
        answer = {"action": "accept", "content": {"name": "Ann"}}
        conn.client.task_request(
            "tasks/update", {"taskId": task_id, "inputResponses": {first: answer}}, {}
        )
        wait_until(lambda: list(detailed().get("inputRequests", {})) == [second], "one left")
        assert detailed()["status"] == "input_required"
        answer = {"action": "accept", "content": {"name": "Bo"}}
        conn.client.task_request(
            "tasks/update", {"taskId": task_id, "inputResponses": {second: answer}}, {}
        )
        wait_until(lambda: detailed()["status"] == "completed", "the task to finish")
        assert detailed()["result"]["content"][0]["text"] == "Ann and Bo"


class AnswerBeforeTheTake(MemoryTaskStore):
    """A memory store that lands one more client answer at a chosen moment: just before the
    handler's change that takes the answers it read, as a ``tasks/update`` from another
    thread or process may land then. ``landed`` is the record that answer made."""

    def __init__(self) -> None:
        super().__init__()
        self.to_land: dict[str, Any] = {}
        self.landed: list[TaskRecord] = []
        self._owners: dict[str, str] = {}

    def answer_input(self, task_id: str, *, owner: str, responses: Any) -> TaskRecord:
        self._owners[task_id] = owner
        return super().answer_input(task_id, owner=owner, responses=responses)

    def set_status(self, task_id: str, status: Any, **changes: Any) -> TaskRecord:
        land, self.to_land = self.to_land, {}
        if land and changes.get("taken_responses"):
            self.landed.append(
                self.answer_input(task_id, owner=self._owners[task_id], responses=land)
            )
        return super().set_status(task_id, status, **changes)


def test_an_answer_that_lands_while_the_handler_takes_another_is_not_lost(
    gates: GateProbe,
) -> None:
    store = AnswerBeforeTheTake()
    with modern(task_server(store, gates), elicitation_handler=lambda p, c: {}) as conn:
        task_id, detailed, key = ask_two(conn)
        ann = {"action": "accept", "content": {"name": "Ann"}}
        bo = {"action": "accept", "content": {"name": "Bo"}}
        store.to_land = {key["second"]: bo}
        conn.client.task_request(
            "tasks/update", {"taskId": task_id, "inputResponses": {key["first"]: ann}}, {}
        )
        wait_until(lambda: detailed()["status"] == "completed", "the task to finish")
        # the second answer was in the store before the handler took the first
        assert [dict(r.input_responses or {}) for r in store.landed] == [
            {key["first"]: ann, key["second"]: bo}
        ]
        assert detailed()["result"]["content"][0]["text"] == "Ann and Bo"


def test_result_listens_for_the_end_instead_of_waiting_a_poll_interval(
    store: TaskStore, gates: GateProbe
) -> None:
    server = task_server(store, gates)
    server.tasks.poll_interval_ms = 600_000  # a poll would come only after ten minutes
    with modern(server) as conn:
        task = conn.client.call_tool_as_task("slow", {"tag": "w"}, timeout=WAIT)
        wait_event(gates.started("w"), "the handler to start")

        # released once result() listens (its subscriptions/listen reached the server)
        def release_when_listening() -> None:
            wait_until(
                lambda: requests(list(conn.wire.received), "subscriptions/listen"), "a listen"
            )
            gates.release("w")

        releaser = threading.Thread(target=release_when_listening)
        releaser.start()
        try:
            assert task.result(timeout=WAIT).content[0].text == "w done"
        finally:
            releaser.join(WAIT)
        assert len(requests(list(conn.wire.received), "tasks/get")) <= 2
