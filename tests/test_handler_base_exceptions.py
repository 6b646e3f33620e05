"""Handlers that raise SystemExit, KeyboardInterrupt or another BaseException are answered.

Before the fix the worker swallowed the exception and the request stayed in flight for ever:
the caller waited for its timeout (these tests' bounded waits failed) and ``in_flight()``
never returned to zero.
"""

from __future__ import annotations

import logging
import sys

import pytest
from support.endpoints import endpoint_pair
from support.paths import PEERS, ROOT
from support.sessions import connected
from support.waiting import WAIT, wait_until

from mcp_sync import Client, McpError, Server
from mcp_sync.jsonrpc import INTERNAL_ERROR

HOSTILE = PEERS / "hostile_input_server.py"


class Unusual(BaseException):
    pass


RAISERS = {
    "exit": lambda: SystemExit(3),
    "interrupt": lambda: KeyboardInterrupt(),
    "unusual": lambda: Unusual("odd"),
}


@pytest.mark.parametrize("kind", sorted(RAISERS))
def test_endpoint_answers_a_base_exception_with_internal_error_and_keeps_its_worker(kind, caplog):
    def boom(req):
        raise RAISERS[kind]()

    with (
        caplog.at_level(logging.ERROR, logger="mcp_sync.endpoint"),
        endpoint_pair({"boom": boom, "echo": lambda req: req.params}, server_workers=1) as pair,
    ):
        with pytest.raises(McpError) as info:
            pair.client.request("boom", {}, timeout=WAIT)
        assert info.value.code == INTERNAL_ERROR
        assert type(RAISERS[kind]()).__name__ in info.value.message
        # the only worker is still usable, and nothing is left in flight
        assert pair.client.request("echo", {"x": 1}, timeout=WAIT) == {"x": 1}
        assert pair.server.in_flight() == (0, 0)
    assert any("boom" in r.getMessage() for r in caplog.records), "the failure was not logged"


def test_base_exception_in_a_notification_callback_does_not_stop_later_callbacks():
    seen = []

    def on_note(note):
        seen.append(note.params["n"])
        if note.params["n"] == 0:
            raise SystemExit(1)

    with endpoint_pair(notification_handler=on_note) as pair:
        for n in range(3):
            pair.client.notify("note", {"n": n})
        wait_until(lambda: seen == [0, 1, 2], f"callbacks after a SystemExit ran: {seen}")


def _tool_and_method_checks(client: Client) -> None:
    for kind in ("exit", "interrupt", "unusual"):
        result = client.call_tool("raise_base", {"kind": kind}, timeout=WAIT)
        assert result.is_error, result
        assert "the handler raised" in result.content[0].text
        with pytest.raises(McpError) as info:
            client.request("test/raise_base", {"kind": kind}, timeout=WAIT)
        assert info.value.code == INTERNAL_ERROR


def test_server_tool_and_custom_method_over_memory():
    server = Server("t")

    @server.tool()
    def raise_base(kind: str) -> str:
        raise RAISERS[kind]()

    server.add_method(
        "test/raise_base", lambda s, req, tok: (_ for _ in ()).throw(RAISERS[req.params["kind"]]())
    )
    with connected(server, server_workers=1) as conn:
        _tool_and_method_checks(conn.client)
        assert conn.handle.session.endpoint.in_flight() == (0, 0)
        assert conn.client.list_tools(timeout=WAIT)


def test_stdio_server_survives_base_exceptions_in_tools():
    env = {"PYTHONPATH": str(ROOT)}
    with Client.stdio(
        [sys.executable, str(HOSTILE)], env=env, stderr="discard", init_timeout=20
    ) as client:
        pid = client.call_tool("pid", timeout=WAIT).structured_content
        _tool_and_method_checks(client)
        # the same process still serves
        assert client.call_tool("pid", timeout=WAIT).structured_content == pid
        assert client.transport.process.poll() is None


def test_deadline_scheduler_survives_a_callback_that_raises_system_exit():
    import threading

    from mcp_sync import deadlines

    fired = threading.Event()

    def bad() -> None:
        raise SystemExit(2)

    deadlines.schedule(0, bad)
    deadlines.schedule(0.01, fired.set)
    assert fired.wait(WAIT), "a later deadline never fired after one raised SystemExit"
