"""Tasks over Streamable HTTP (the WSGI app under waitress): mcp_sync's client at 2025-11-25,
and raw 2026-07-28 POSTs with the tasks extension's routing header ``Mcp-Name: <taskId>``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.http import ACCEPT_BOTH, run_waitress
from support.probes import GateProbe
from support.waiting import WAIT, wait_event, wait_until
from tasks.task_servers import memory_store, task_server

from mcp_sync import Cancelled, Client
from mcp_sync.lifecycle import RELATED_TASK_KEY, TASKS_EXTENSION
from mcp_sync.server import Server

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
}


@pytest.fixture
def gates() -> GateProbe:
    return GateProbe()


@pytest.fixture
def served(gates: GateProbe) -> Iterator[tuple[str, Server]]:
    with memory_store() as store:
        server = task_server(store, gates)
        app = server.wsgi_app()
        base, stop = run_waitress(app)
        try:
            yield base + "/mcp", server
        finally:
            server.tasks.shutdown(WAIT)
            app.close()
            stop()


def test_a_task_over_http_at_2025(served: tuple[str, Server], gates: GateProbe) -> None:
    url, _server = served
    with Client.http(url, protocol="legacy") as client:
        task = client.call_tool_as_task("slow", {"tag": "h1"}, timeout=WAIT)
        wait_event(gates.started("h1"), "the handler to start")
        assert task.status().status == "working"
        gates.release("h1")
        assert task.result(timeout=WAIT).content[0].text == "h1 done"
        listed = client.list_tasks(timeout=WAIT)
        assert [t.task_id for t in listed] == [task.task_id]


def test_cancel_over_http_at_2025(served: tuple[str, Server], gates: GateProbe) -> None:
    url, server = served
    with Client.http(url, protocol="legacy") as client:
        task = client.call_tool_as_task("slow", {"tag": "h2"}, timeout=WAIT)
        wait_event(gates.started("h2"), "the handler to start")
        assert task.cancel().status == "cancelled"
        wait_event(gates.cancelled("h2"), "the handler's token to fire")
        with pytest.raises(Cancelled):
            task.result(timeout=WAIT)
        wait_until(lambda: server.tasks.running(task.task_id) is None, "the handler to end")
        assert client.get_task(task.task_id, timeout=WAIT).status == "cancelled"


def test_elicitation_during_a_task_over_http_at_2025(
    served: tuple[str, Server], gates: GateProbe
) -> None:
    url, _server = served
    asked: list[dict[str, Any]] = []

    def answer(params: Any, ctx: Any) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Ada"}}

    with Client.http(url, protocol="legacy", elicitation_handler=answer) as client:
        task = client.call_tool_as_task("ask", {"question": "name?"}, timeout=WAIT)
        assert task.result(timeout=WAIT).content[0].text == "hello Ada"
        assert asked[0]["_meta"][RELATED_TASK_KEY] == {"taskId": task.task_id}


def _post(url: str, method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": ENVELOPE}}
    sent = {
        "Accept": ACCEPT_BOTH,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        **headers,
    }
    return httpx.post(url, content=json.dumps(body), headers=sent, timeout=WAIT)


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if "id" in message:
                    return message  # type: ignore[no-any-return]
        raise AssertionError(f"no answer in {response.text!r}")
    return response.json()  # type: ignore[no-any-return]


def test_tasks_at_2026_over_http_carry_mcp_name(
    served: tuple[str, Server], gates: GateProbe
) -> None:
    url, _server = served
    created = _answer(
        _post(
            url, "tools/call", {"name": "slow", "arguments": {"tag": "h3"}}, **{"Mcp-Name": "slow"}
        )
    )["result"]
    assert created["resultType"] == "task"
    task_id = created["taskId"]
    missing = _post(url, "tasks/get", {"taskId": task_id})
    assert missing.status_code == 400 and _answer(missing)["error"]["code"] == -32020
    wrong = _post(url, "tasks/get", {"taskId": task_id}, **{"Mcp-Name": "other"})
    assert _answer(wrong)["error"]["code"] == -32020
    got = _answer(_post(url, "tasks/get", {"taskId": task_id}, **{"Mcp-Name": task_id}))
    assert got["result"]["status"] == "working"
    ack = _answer(_post(url, "tasks/cancel", {"taskId": task_id}, **{"Mcp-Name": task_id}))
    assert ack["result"]["resultType"] == "complete"
    wait_event(gates.cancelled("h3"), "the handler's token to fire")
    got = _answer(_post(url, "tasks/get", {"taskId": task_id}, **{"Mcp-Name": task_id}))
    assert got["result"]["status"] == "cancelled"


def test_a_task_over_http_at_2026_with_our_client(
    served: tuple[str, Server], gates: GateProbe
) -> None:
    """The default client negotiates 2026-07-28 over HTTP; its tasks/* requests carry
    Mcp-Name (the server refuses them without it), and result() sees the end."""
    url, _server = served
    with Client.http(url) as client:
        assert client.protocol_version == MODERN
        task = client.call_tool_as_task("slow", {"tag": "m1"}, timeout=WAIT)
        wait_event(gates.started("m1"), "the handler to start")
        assert task.status().status == "working"
        gates.release("m1")
        assert task.result(timeout=WAIT).content[0].text == "m1 done"
        assert client.get_task(task.task_id, timeout=WAIT).status == "completed"


def test_cancel_over_http_at_2026_with_our_client(
    served: tuple[str, Server], gates: GateProbe
) -> None:
    url, server = served
    with Client.http(url) as client:
        assert client.protocol_version == MODERN
        task = client.call_tool_as_task("slow", {"tag": "m2"}, timeout=WAIT)
        wait_event(gates.started("m2"), "the handler to start")
        task.cancel()
        wait_event(gates.cancelled("m2"), "the handler's token to fire")
        with pytest.raises(Cancelled):
            task.result(timeout=WAIT)
        wait_until(lambda: server.tasks.running(task.task_id) is None, "the handler to end")
        wait_until(
            lambda: client.get_task(task.task_id, timeout=WAIT).status == "cancelled",
            "the task to end cancelled",
        )
