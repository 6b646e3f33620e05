"""The MCP lifecycle over the in-memory pair: initialize, versions, capabilities, ping.

Peers that misbehave (an unsupported version, no answer, no capabilities) are played by a raw
:class:`~mcp_sync.Endpoint`; the judgement is made on the lines that crossed the wire.
"""

from __future__ import annotations

import threading

import mcp_types
import pytest
from support.messages import as_wire, methods, responses_to, with_method
from support.recording import RecordingTransport
from support.sessions import FakeServer, connected
from support.waiting import WAIT, wait_event, wait_until

from mcp_sync import (
    CapabilityError,
    Client,
    ConnectionClosed,
    Context,
    Endpoint,
    McpError,
    RequestTimeout,
    Server,
    ServerSession,
    memory_pair,
)
from mcp_sync.lifecycle import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE_VERSION, State

INIT_PARAMS = {
    "protocolVersion": LATEST_HANDSHAKE_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"},
}


def make_server(**options) -> Server:
    server = Server("demo", version="1.0.0", **options)

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


# -- version negotiation ------------------------------------------------------------------------
def test_latest_version_is_2025_11_25():
    assert LATEST_HANDSHAKE_VERSION == "2025-11-25"
    assert set(HANDSHAKE_VERSIONS) == {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_supported_version_is_echoed(version):
    with connected(make_server(), protocol_version=version) as conn:
        assert conn.client.protocol_version == version
        assert conn.handle.session.protocol_version == version
        init = with_method(conn.wire.received, "initialize")
        assert init[0]["params"]["protocolVersion"] == version
        assert (
            responses_to(conn.wire.sent, init[0]["id"])[0]["result"]["protocolVersion"] == version
        )
        # the negotiated session works
        assert conn.client.call_tool("echo", {"text": "hi"}).content[0].text == "hi"


@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28-draft"])
def test_unknown_version_gets_the_servers_latest(version):
    with connected(make_server(), protocol_version=version) as conn:
        init = with_method(conn.wire.received, "initialize")[0]
        answer = responses_to(conn.wire.sent, init["id"])[0]["result"]
        assert answer["protocolVersion"] == "2025-11-25"
        assert conn.client.protocol_version == "2025-11-25"
        assert conn.handle.session.protocol_version == "2025-11-25"


def test_non_string_version_gets_the_servers_latest():
    server_side, client_side = memory_pair()
    with make_server().serve_in_thread(server_side) as handle:
        with Endpoint(client_side) as raw:
            params = dict(INIT_PARAMS, protocolVersion=20241105)
            assert (
                raw.request("initialize", params, timeout=WAIT)["protocolVersion"] == "2025-11-25"
            )
        assert handle.wait(WAIT)


def test_client_refuses_a_version_it_does_not_speak_and_closes():
    fake = FakeServer(
        init_result={
            "protocolVersion": "2099-01-01",
            "capabilities": {},
            "serverInfo": {"name": "x", "version": "0"},
        }
    )
    with fake:
        with pytest.raises(ConnectionClosed, match="2099-01-01"):
            Client.connect(fake.client_transport, protocol="legacy", init_timeout=WAIT)
        # the client hung up: the fake server's connection ended
        assert fake.endpoint.wait_closed(WAIT), "the client did not disconnect"
        # and it never completed the handshake
        assert methods(fake.wire.received) == ["initialize"]


def test_client_refuses_a_missing_version():
    fake = FakeServer(init_result={"capabilities": {}, "serverInfo": {"name": "x", "version": "0"}})
    with fake:
        with pytest.raises(ConnectionClosed):
            Client.connect(fake.client_transport, init_timeout=WAIT)
        assert fake.endpoint.wait_closed(WAIT)
        assert "notifications/initialized" not in methods(fake.wire.received)


# -- capabilities and identity -------------------------------------------------------------------
def test_capabilities_and_identity_are_recorded_on_both_sides():
    server = make_server(instructions="Use echo to echo.")
    options = dict(
        name="tester",
        version="9.9",
        roots=["/tmp"],
        sampling_handler=lambda params, ctx: {},
        elicitation_handler=lambda params, ctx: {"action": "decline"},
    )
    with connected(server, protocol="legacy", **options) as conn:
        client, session = conn.client, conn.handle.session
        assert client.initialized and session.initialized
        # server side: what the client declared
        assert session.peer_info == {"name": "tester", "version": "9.9"}
        assert session.peer_capabilities["roots"] == {"listChanged": True}
        assert "sampling" in session.peer_capabilities
        assert "elicitation" in session.peer_capabilities
        assert session.peer_supports("roots", "listChanged")
        assert not session.peer_supports("experimental")
        # client side: what the server declared
        assert as_wire(client.server_info) == {"name": "demo", "version": "1.0.0"}
        assert client.peer_info == {"name": "demo", "version": "1.0.0"}
        assert client.server_capabilities["tools"] == {"listChanged": True}
        assert "logging" in client.server_capabilities
        assert client.server_instructions == "Use echo to echo."
        # the client sent notifications/initialized after the handshake
        wait_until(
            lambda: session.lifecycle.peer_confirmed, "notifications/initialized at the server"
        )
        assert methods(conn.wire.received)[:2] == ["initialize", "notifications/initialized"]


def test_a_client_without_handlers_declares_no_client_capabilities():
    with connected(make_server()) as conn:
        assert conn.handle.session.peer_capabilities == {}
        init = with_method(conn.wire.received, "initialize")[0]
        assert init["params"]["capabilities"] == {}
        assert init["params"]["clientInfo"]["name"] == "mcp_sync"


def test_initialize_returns_the_initialize_result():
    server = make_server(instructions="hello")
    client_side, server_side = memory_pair()
    with server.serve_in_thread(server_side):
        client = Client(client_side)
        client.endpoint.start()
        try:
            result = client.initialize(timeout=WAIT)
            assert isinstance(result, mcp_types.InitializeResult)
            assert result.protocol_version == "2025-11-25"
            assert as_wire(result.server_info) == {"name": "demo", "version": "1.0.0"}
            assert result.instructions == "hello"
            assert result.capabilities.tools is not None
            assert client.initialized
        finally:
            client.close()


def test_both_lifecycles_end_closed_and_remember_the_handshake():
    with connected(make_server()) as conn:
        client, handle = conn.client, conn.handle
        assert client.lifecycle.state is State.READY
        wait_until(
            lambda: handle.session.lifecycle.state is State.READY,
            "notifications/initialized at the server",
        )
        client.close()
        assert handle.wait(WAIT)
    assert client.lifecycle.state is State.CLOSED and client.initialized
    wait_until(
        lambda: handle.session.lifecycle.state is State.CLOSED, "the server's lifecycle to close"
    )
    assert handle.session.initialized and handle.session.protocol_version == "2025-11-25"
    with pytest.raises(ConnectionClosed):  # not "not initialized": the connection is what ended
        client.list_tools()


def test_a_second_client_initialize_is_refused_without_sending():
    with connected(make_server(), protocol="legacy") as conn:
        with pytest.raises(RuntimeError, match="initialize cannot be sent"):
            conn.client.initialize(timeout=WAIT)
        conn.client.ping(timeout=WAIT)
        assert methods(conn.wire.received) == ["initialize", "notifications/initialized", "ping"]


# -- before initialization -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "method,params",
    [
        ("tools/list", None),
        ("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
        ("logging/setLevel", {"level": "info"}),
    ],
)
def test_requests_before_initialize_are_refused(method, params):
    client_side, server_side = memory_pair()
    with make_server().serve_in_thread(server_side) as handle:
        with Endpoint(client_side) as raw:
            with pytest.raises(McpError) as info:
                raw.request(method, params, timeout=WAIT)
            assert info.value.code == -32600
            assert "initializ" in info.value.message
            # ping is allowed before initialization, and the connection stays usable
            assert raw.request("ping", timeout=WAIT) == {}
            assert (
                raw.request("initialize", INIT_PARAMS, timeout=WAIT)["protocolVersion"]
                == "2025-11-25"
            )
            raw.notify("notifications/initialized")
            assert raw.request("tools/list", timeout=WAIT)["tools"][0]["name"] == "echo"
        assert handle.wait(WAIT)


def test_unknown_method_is_method_not_found():
    with connected(make_server()) as conn:
        with pytest.raises(McpError) as info:
            conn.client.request("no/such/method", timeout=WAIT)
        assert info.value.code == -32601


def test_second_initialize_is_refused():
    with connected(make_server()) as conn:
        with pytest.raises(McpError) as info:
            conn.client.request("initialize", INIT_PARAMS, timeout=WAIT)
        assert info.value.code == -32600
        assert conn.client.call_tool("echo", {"text": "still fine"}).content[0].text == "still fine"


def test_two_pipelined_initializes_get_one_answer_and_one_refusal():
    client_side, server_side = memory_pair()
    with make_server().serve_in_thread(server_side, max_workers=4) as handle:
        with Endpoint(client_side) as raw:
            calls = [raw.submit("initialize", INIT_PARAMS) for _ in range(2)]
            outcomes = []
            for call in calls:
                try:
                    outcomes.append(call.result(WAIT)["protocolVersion"])
                except McpError as exc:
                    outcomes.append(exc.code)
            assert sorted(outcomes, key=str) == [-32600, "2025-11-25"]
            assert handle.session.initialized
        assert handle.wait(WAIT)


def test_client_refuses_to_send_requests_before_initialize():
    client_side, server_side = memory_pair()
    client = Client(client_side)
    try:
        with pytest.raises(RuntimeError, match="not initialized"):
            client.submit("tools/list")
    finally:
        client.close()
        server_side.close()


# -- ping ---------------------------------------------------------------------------------------
def test_ping_both_ways():
    with connected(make_server()) as conn:
        conn.client.ping(timeout=WAIT)
        conn.handle.session.ping(timeout=WAIT)
        pings_from_client = with_method(conn.wire.received, "ping")
        pings_from_server = with_method(conn.wire.sent, "ping")
        assert len(pings_from_client) == 1 and len(pings_from_server) == 1
        assert "params" not in pings_from_server[0]
        assert responses_to(conn.wire.sent, pings_from_client[0]["id"])[0]["result"] == {}
        assert responses_to(conn.wire.received, pings_from_server[0]["id"])[0]["result"] == {}


def test_ping_is_answered_while_every_worker_is_busy():
    server = Server("busy")
    started, release = threading.Event(), threading.Event()

    @server.tool()
    def block() -> str:
        started.set()
        release.wait(WAIT)
        return "released"

    with connected(server, server_workers=1) as conn:
        pending = conn.client.call_tool_future("block")
        try:
            wait_event(started, "the handler to start")
            conn.client.ping(timeout=WAIT)  # answered on the reader thread
            assert not pending.done()
        finally:
            release.set()
        assert pending.result(WAIT).content[0].text == "released"


# -- initialize is never cancelled ----------------------------------------------------------------
def test_initialize_timeout_does_not_cancel_on_the_wire():
    def never_answer(request):
        request.token.wait(WAIT)  # released when the connection closes
        return {}

    with FakeServer(handler=never_answer) as fake:
        with pytest.raises(RequestTimeout):
            Client.connect(fake.client_transport, protocol="legacy", init_timeout=0.2)
        assert fake.endpoint.wait_closed(WAIT), "the client did not disconnect after the timeout"
        received = fake.wire.received
        assert methods(received) == ["initialize"], received
        assert not with_method(received, "notifications/cancelled")


def test_cancelling_a_pending_initialize_sends_nothing():
    def never_answer(request):
        if request.method == "initialize":
            request.token.wait(WAIT)
        return {}

    with FakeServer(handler=never_answer) as fake:
        client = Client(fake.client_transport)
        client.endpoint.start()
        try:
            pending = client.endpoint.submit("initialize", INIT_PARAMS)
            fake.wire.wait_for(
                lambda w: methods(w.received) == ["initialize"], "initialize at the fake server"
            )
            assert pending.cancel("changed my mind") is True
            assert pending.cancelled()
            # anything the cancel queued is written before this ping
            client.ping(timeout=WAIT)
            assert methods(fake.wire.received) == ["initialize", "ping"]
        finally:
            client.close()


def test_server_ignores_a_cancellation_of_initialize():
    server = make_server()
    client_side, server_side = memory_pair()
    session = ServerSession(server, server_side, max_workers=2)
    started, release = threading.Event(), threading.Event()
    tokens = []
    original = session._on_initialize

    def gated_initialize(request, token):
        tokens.append(token)
        started.set()
        release.wait(WAIT)
        return original(request, token)

    session._on_initialize = gated_initialize  # type: ignore[method-assign]
    session.endpoint.start()
    raw = Endpoint(client_side).start()
    try:
        pending = raw.submit("initialize", INIT_PARAMS)
        wait_event(started, "initialize to start at the server")
        raw.notify(
            "notifications/cancelled", {"requestId": pending.request_id, "reason": "please stop"}
        )
        wait_until(
            lambda: session.endpoint.dropped["initialize cannot be cancelled"] == 1,
            "the server to see (and drop) the cancellation",
        )
        assert not tokens[0].cancelled
        release.set()
        result = pending.result(WAIT)
        assert result["protocolVersion"] == "2025-11-25"
        assert session.initialized
    finally:
        release.set()
        raw.close()
        session.close()


def test_initialize_and_cancel_back_to_back_still_answer():
    server = make_server()
    client_side, server_side = memory_pair()
    wire = RecordingTransport(client_side)
    # both lines are queued before the server starts reading
    wire.write(
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}\n'
    )
    wire.write(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}\n')
    with server.serve_in_thread(server_side):
        line = wire.read_line()
        assert line is not None
        answer = wire.received[-1]
        assert answer["id"] == 1 and answer["result"]["protocolVersion"] == "2025-11-25"
        wire.close()


# -- capability negotiation ------------------------------------------------------------------------
def test_client_refuses_tool_methods_when_the_server_has_no_tools_capability():
    with FakeServer() as fake:  # declares no capabilities
        client = Client.connect(fake.client_transport, protocol="legacy", init_timeout=WAIT)
        try:
            with pytest.raises(CapabilityError, match="tools"):
                client.list_tools()
            with pytest.raises(CapabilityError, match="tools"):
                client.call_tool("anything")
            with pytest.raises(CapabilityError):
                client.call_tool_future("anything")
            client.ping(timeout=WAIT)
            # nothing was sent for the refused calls
            assert methods(fake.wire.received) == [
                "initialize",
                "notifications/initialized",
                "ping",
            ]
        finally:
            client.close()


def roots_server() -> Server:
    server = Server("roots")

    @server.tool()
    def roots(ctx: Context) -> list[str]:
        """The client's root URIs."""
        return [str(root.uri) for root in ctx.session.list_roots(timeout=WAIT)]

    return server


def test_list_roots_without_the_clients_roots_capability_is_a_clear_tool_error():
    with connected(roots_server()) as conn:
        result = conn.client.call_tool("roots", timeout=WAIT)
        assert result.is_error is True
        text = result.content[0].text
        assert "roots" in text and "did not declare" in text
        conn.barrier()
        # the server never asked the client
        assert not with_method(conn.wire.sent, "roots/list")
        with pytest.raises(CapabilityError):
            conn.handle.session.list_roots(timeout=WAIT)


def test_list_roots_with_the_capability():
    roots = ["/tmp/project", {"uri": "file:///data", "name": "data"}]
    with connected(roots_server(), roots=roots) as conn:
        result = conn.client.call_tool("roots", timeout=WAIT)
        assert result.is_error is not True
        assert result.structured_content == {"result": ["file:///tmp/project", "file:///data"]}
        assert as_wire(conn.handle.session.list_roots(timeout=WAIT)[1]) == {
            "uri": "file:///data",
            "name": "data",
        }


def test_roots_list_changed_reaches_the_server():
    changed = threading.Event()
    with connected(roots_server(), roots=["/a"]) as conn:
        conn.handle.session.on_roots_changed = changed.set
        conn.client.set_roots(["/b"])
        wait_event(changed, "notifications/roots/list_changed at the server")
        assert as_wire(conn.handle.session.list_roots(timeout=WAIT)) == [{"uri": "file:///b"}]


def test_sampling_and_elicitation_need_the_clients_capabilities():
    with connected(make_server()) as conn:
        with pytest.raises(CapabilityError, match="sampling"):
            conn.handle.session.create_message([], max_tokens=10)
        with pytest.raises(CapabilityError, match="elicitation"):
            conn.handle.session.elicit("name?", {"type": "object", "properties": {}})
