"""The client at 2026-07-28 against scripted servers on a memory pair: the discover probe and
the fallback to ``initialize``, ``protocol=``, the envelope on every request, multi round-trip
input through the client's own handlers, removed features, stray server requests."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from support.messages import methods, with_method
from support.sessions import INIT_RESULT as INIT
from support.sessions import FakeServer
from support.waiting import WAIT, wait_until

from mcp_sync import Client, Context, McpError
from mcp_sync.errors import Cancelled, ConnectionClosed, FeatureRemoved, PeerMisbehaved
from mcp_sync.lifecycle import Era

MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
INFO_KEY = "io.modelcontextprotocol/clientInfo"
DISCOVERED = {
    "resultType": "complete",
    "supportedVersions": [MODERN, "2025-11-25"],
    "capabilities": {"tools": {}, "resources": {"subscribe": True}, "logging": {}, "prompts": {}},
    "instructions": "be kind",
    "ttlMs": 0,
    "cacheScope": "private",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-fake", "version": "9"}},
}
TEXT = {"content": [{"type": "text", "text": "ok"}], "resultType": "complete"}


class ModernFake:
    """Answers like a 2026-07-28 server: ``server/discover``, ``tools/call`` (via ``on_call``),
    ``tools/list``; refuses ``initialize`` with -32022."""

    def __init__(self, on_call: Any = None, discovered: dict[str, Any] | None = None) -> None:
        self.on_call = on_call or (lambda request: TEXT)
        self.discovered = DISCOVERED if discovered is None else discovered

    def __call__(self, request: Any) -> Any:
        if request.method == "server/discover":
            return self.discovered
        if request.method == "tools/call":
            return self.on_call(request)
        if request.method == "tools/list":
            return {
                "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
                "resultType": "complete",
            }
        if request.method == "initialize":
            raise McpError(
                -32022,
                "no handshake here",
                {"supported": [MODERN], "requested": request.params.get("protocolVersion")},
            )
        raise McpError(-32601, f"Method not found: {request.method}")


def requests_of(fake: FakeServer) -> list[dict[str, Any]]:
    return [m for m in fake.wire.received if isinstance(m, dict) and "id" in m and "method" in m]


def connect(fake: FakeServer, **options: Any) -> Client:
    options.setdefault("init_timeout", WAIT)
    return Client.connect(fake.client_transport, **options)


# -- negotiation ---------------------------------------------------------------------------------
def test_a_discover_result_means_2026_and_every_request_carries_the_envelope():
    with (
        FakeServer(ModernFake()) as fake,
        connect(
            fake,
            name="probe",
            version="1.2",
            elicitation_handler=lambda p, c: {"action": "decline"},
            roots=["/r"],
        ) as client,
    ):
        assert (client.era, client.protocol_version, client.initialized) == (
            Era.MODERN,
            MODERN,
            True,
        )
        assert client.server_info.name == "modern-fake" and client.server_instructions == "be kind"
        assert client.server_capabilities == DISCOVERED["capabilities"]
        assert client.call_tool("t", {"x": 1}).content[0].text == "ok"
        assert [tool.name for tool in client.list_tools()] == ["t"]
        sent = requests_of(fake)
        assert methods(sent) == ["server/discover", "tools/call", "tools/list"]
        for message in sent:
            meta = message["params"]["_meta"]
            assert meta[VERSION_KEY] == MODERN
            assert meta[CAPS_KEY] == {"roots": {}, "elicitation": {"form": {}, "url": {}}}
            assert meta[INFO_KEY] == {"name": "probe", "version": "1.2"}
        assert sent[1]["params"]["arguments"] == {"x": 1}
        assert not with_method(fake.wire.received, "initialize")
        assert not with_method(fake.wire.received, "notifications/initialized")


@pytest.mark.parametrize("code", [-32601, -32602, -32600, -32603, -1])
def test_any_other_error_to_discover_falls_back_to_initialize(code):
    def legacy(request: Any) -> Any:
        if request.method == "server/discover":
            raise McpError(code, "not for me")
        return fake.init_result if request.method == "initialize" else TEXT

    with (
        FakeServer(legacy, init_result={**INIT, "capabilities": {"tools": {}}}) as fake,
        connect(fake) as client,
    ):
        assert (client.era, client.protocol_version) == (Era.HANDSHAKE, "2025-11-25")
        client.call_tool("t")
        assert methods(fake.wire.received) == [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/call",
        ]
        assert "_meta" not in requests_of(fake)[-1]["params"]


def test_a_discover_result_without_a_modern_version_falls_back_to_initialize():
    old = dict(DISCOVERED, supportedVersions=["2025-11-25"])

    def server(request: Any) -> Any:
        return old if request.method == "server/discover" else fake.init_result

    with FakeServer(server) as fake, connect(fake) as client:
        assert client.era is Era.HANDSHAKE
        assert methods(fake.wire.received)[:2] == ["server/discover", "initialize"]


def test_a_server_that_never_answers_discover_gets_initialize_after_the_bounded_wait():
    def silent_until_initialized(request: Any) -> Any:
        if request.method == "server/discover":
            request.token.wait(WAIT * 4)  # never answers (released when the connection closes)
            return {}
        return fake.init_result

    with (
        FakeServer(silent_until_initialized) as fake,
        connect(fake, discover_timeout=0.2) as client,
    ):
        assert client.era is Era.HANDSHAKE
        fake.wire.wait_for(
            lambda w: with_method(w.received, "notifications/initialized"), "the handshake's end"
        )
        assert methods(fake.wire.received) == [
            "server/discover",
            "initialize",
            "notifications/initialized",
        ]
        assert not with_method(
            fake.wire.received, "notifications/cancelled"
        )  # the probe is never cancelled
        assert client.stats().outbound_in_flight == 0  # and not left pending either


def test_a_modern_error_to_discover_means_2026_and_capabilities_are_asked_for_again():
    probes: list[Any] = []

    def picky(request: Any) -> Any:
        if request.method == "server/discover" and not probes:
            probes.append(request.params)
            raise McpError(-32021, "needs something", {"requiredCapabilities": {}})
        return ModernFake()(request)

    with FakeServer(picky) as fake, connect(fake) as client:
        assert client.era is Era.MODERN
        assert client.server_capabilities == DISCOVERED["capabilities"]
        assert methods(fake.wire.received) == ["server/discover", "server/discover"]


def test_unsupported_version_without_a_mutual_one_fails_without_fallback():
    def future_only(request: Any) -> Any:
        raise McpError(
            -32022,
            "Unsupported protocol version",
            {"supported": ["2027-01-01"], "requested": MODERN},
        )

    with FakeServer(future_only) as fake:
        with pytest.raises(McpError) as caught:
            connect(fake)
        assert caught.value.code == -32022
        assert methods(fake.wire.received) == ["server/discover"]


def test_initialize_refused_with_unsupported_version_after_a_late_probe_goes_modern():
    answered = threading.Event()

    def slow_modern(request: Any) -> Any:
        if request.method == "server/discover" and not answered.is_set():
            answered.set()
            request.token.wait(0.5)  # too late for the probe (never cancelled by the client)
            return DISCOVERED
        return ModernFake()(request)

    with FakeServer(slow_modern) as fake, connect(fake, discover_timeout=0.1) as client:
        assert client.era is Era.MODERN
        assert methods(fake.wire.received) == ["server/discover", "initialize", "server/discover"]


@pytest.mark.parametrize(
    "protocol, asked",
    [("legacy", "2025-11-25"), ("handshake", "2025-11-25"), ("2025-06-18", "2025-06-18")],
)
def test_protocol_legacy_or_a_handshake_version_sends_initialize_at_once(protocol, asked):
    with FakeServer() as fake:
        fake.init_result["protocolVersion"] = asked
        with connect(fake, protocol=protocol) as client:
            assert client.protocol_version == asked
        (initialize,) = requests_of(fake)
        assert (
            initialize["method"] == "initialize"
            and initialize["params"]["protocolVersion"] == asked
        )


@pytest.mark.parametrize("protocol", ["modern", MODERN])
def test_protocol_modern_fails_against_an_older_server_without_initialize(protocol):
    with FakeServer() as fake:
        with pytest.raises(ConnectionClosed, match="does not speak 2026-07-28"):
            connect(fake, protocol=protocol)
        assert methods(fake.wire.received) == ["server/discover"]


def test_protocol_modern_speaks_2026_with_a_modern_server():
    with FakeServer(ModernFake()) as fake, connect(fake, protocol="modern") as client:
        assert client.protocol_version == MODERN


def test_an_unknown_protocol_is_refused_before_connecting():
    with FakeServer() as fake:
        with pytest.raises(ValueError, match="protocol='2030-01-01'"):
            connect(fake, protocol="2030-01-01")
        assert fake.wire.received == []
        fake.client_transport.close()


# -- at 2026-07-28 -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, feature",
    [
        (lambda c: c.ping(), "ping"),
        (lambda c: c.set_logging_level("info"), "logging/setLevel"),
        (lambda c: c.subscribe("x://1"), "resources/subscribe"),
        (lambda c: c.unsubscribe("x://1"), "resources/unsubscribe"),
        (
            lambda c: c.send_notification("notifications/roots/list_changed"),
            "notifications/roots/list_changed",
        ),
    ],
)
def test_features_removed_at_2026_fail_naming_the_version_and_send_nothing(call, feature):
    with FakeServer(ModernFake()) as fake, connect(fake) as client:
        before = len(fake.wire.received)
        with pytest.raises(
            FeatureRemoved, match=f"{feature} does not exist in protocol 2026-07-28"
        ) as caught:
            call(client)
        assert (caught.value.feature, caught.value.protocol_version) == (feature, MODERN)
        client.call_tool("t")  # a barrier: everything sent before it has arrived
        assert methods(fake.wire.received[before:]) == ["tools/call"]


def test_set_roots_at_2026_sends_nothing_and_the_next_input_round_gets_the_new_roots():
    def roots_round(request: Any) -> Any:
        responses = request.params.get("inputResponses")
        if responses is None:
            return {
                "resultType": "input_required",
                "inputRequests": {"r": {"method": "roots/list"}},
            }
        return {
            "content": [{"type": "text", "text": responses["r"]["roots"][0]["uri"]}],
            "resultType": "complete",
        }

    with (
        FakeServer(ModernFake(roots_round)) as fake,
        connect(fake, roots=["file:///old"]) as client,
    ):
        client.set_roots(["file:///new"])
        assert client.call_tool("t").content[0].text == "file:///new"
        assert not with_method(fake.wire.received, "notifications/roots/list_changed")


def test_log_level_travels_in_every_envelope():
    with FakeServer(ModernFake()) as fake, connect(fake, log_level="warning") as client:
        client.call_tool("t")
        assert (
            requests_of(fake)[-1]["params"]["_meta"]["io.modelcontextprotocol/logLevel"]
            == "warning"
        )


def test_each_request_stamps_what_the_client_declares_at_the_time():
    """The envelope follows the client's settings from one call to the next (it is made
    again whenever one of them changed)."""

    def envelope(fake: FakeServer) -> dict[str, Any]:
        return requests_of(fake)[-1]["params"]["_meta"]  # type: ignore[no-any-return]

    caps = "io.modelcontextprotocol/clientCapabilities"
    with FakeServer(ModernFake()) as fake, connect(fake, log_level="warning") as client:
        client.call_tool("t")
        client.call_tool("t")
        assert envelope(fake)["io.modelcontextprotocol/logLevel"] == "warning"
        assert envelope(fake)[caps] == {}
        client.log_level = "debug"
        client.elicitation_handler = lambda params, ctx: {"action": "decline"}
        client.call_tool("t")
        assert envelope(fake)["io.modelcontextprotocol/logLevel"] == "debug"
        assert set(envelope(fake)[caps]) == {"elicitation"}
        client.client_info = {"name": "renamed", "version": "2"}
        client.call_tool("t")
        assert envelope(fake)["io.modelcontextprotocol/clientInfo"]["name"] == "renamed"
        client.client_info["name"] = "edited"  # the same dict, changed: stamped as it is now
        client.log_level = None
        client.call_tool("t")
        assert envelope(fake)["io.modelcontextprotocol/clientInfo"]["name"] == "edited"
        assert "io.modelcontextprotocol/logLevel" not in envelope(fake)


def test_a_stray_server_request_is_dropped_unanswered():
    asked = threading.Event()

    def handler(params: dict[str, Any], ctx: Context) -> Any:
        asked.set()
        return {"action": "decline"}

    with FakeServer(ModernFake()) as fake, connect(fake, elicitation_handler=handler) as client:
        fake.endpoint.submit(
            "elicitation/create",
            {"message": "hi", "requestedSchema": {"type": "object"}},
            timeout=None,
        )
        fake.wire.wait_for(
            lambda w: any(
                m.get("method") == "elicitation/create" for m in w.sent if isinstance(m, dict)
            ),
            "the stray request",
        )
        wait_until(lambda: client.endpoint.dropped, "the client to drop it")
        client.call_tool("t")  # a barrier: an answer would have come before this call's request
        assert not asked.is_set()
        assert [m for m in fake.wire.received if isinstance(m, dict) and "method" not in m] == []


def test_an_input_round_uses_the_clients_handlers_with_a_context():
    seen: list[Any] = []

    def elicit(params: dict[str, Any], ctx: Context) -> Any:
        seen.append((params["message"], ctx.request_id, ctx.cancelled))
        return {"action": "accept", "content": {"name": "Ada"}}

    def sample(params: dict[str, Any], ctx: Context) -> Any:
        seen.append(("sample", ctx.request_id, ctx.cancelled))
        return {"role": "assistant", "content": {"type": "text", "text": "hm"}, "model": "m"}

    def two_inputs(request: Any) -> Any:
        responses = request.params.get("inputResponses")
        if responses is None:
            return {
                "resultType": "input_required",
                "inputRequests": {
                    "who": {
                        "method": "elicitation/create",
                        "params": {"message": "Name?", "requestedSchema": {"type": "object"}},
                    },
                    "llm": {
                        "method": "sampling/createMessage",
                        "params": {"messages": [], "maxTokens": 3},
                    },
                },
                "requestState": "s1",
            }
        assert request.params["requestState"] == "s1"
        return {
            "content": [
                {
                    "type": "text",
                    "text": f"{responses['who']['content']['name']}/{responses['llm']['content']['text']}",
                }
            ]
        }

    with (
        FakeServer(ModernFake(two_inputs)) as fake,
        connect(fake, elicitation_handler=elicit, sampling_handler=sample) as client,
    ):
        assert client.call_tool("t").content[0].text == "Ada/hm"
        assert seen == [("Name?", "who", False), ("sample", "llm", False)]
        calls = with_method(fake.wire.received, "tools/call")
        assert len(calls) == 2 and calls[0]["id"] != calls[1]["id"]
        assert calls[1]["params"]["_meta"][CAPS_KEY] == {
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
        }


def test_an_input_request_for_an_undeclared_capability_fails_the_call():
    def wants_sampling(request: Any) -> Any:
        return {
            "resultType": "input_required",
            "inputRequests": {"s": {"method": "sampling/createMessage", "params": {}}},
        }

    with FakeServer(ModernFake(wants_sampling)) as fake, connect(fake) as client:
        with pytest.raises(PeerMisbehaved, match="does not offer"):
            client.call_tool("t")
        assert len(with_method(fake.wire.received, "tools/call")) == 1


class UserWhoNeverAnswers:
    """An elicitation handler that waits for its cancellation; ``started``/``stopped`` say
    when it was asked and when its token fired. ``ask`` is a server's input round for it."""

    def __init__(self) -> None:
        self.started, self.stopped = threading.Event(), threading.Event()

    def __call__(self, params: dict[str, Any], ctx: Context) -> Any:
        self.started.set()
        if ctx.wait(WAIT):
            self.stopped.set()
            ctx.raise_if_cancelled()
        return {"action": "decline"}

    @staticmethod
    def ask(request: Any) -> Any:
        return {
            "resultType": "input_required",
            "inputRequests": {"e": {"method": "elicitation/create", "params": {"message": "?"}}},
        }


def test_cancelling_between_rounds_stops_the_handler_and_sends_nothing():
    user = UserWhoNeverAnswers()
    started, stopped = user.started, user.stopped
    with (
        FakeServer(ModernFake(user.ask)) as fake,
        connect(fake, elicitation_handler=user) as client,
    ):
        call = client.call_tool_future("t")
        assert started.wait(WAIT)
        assert call.cancel("stop") is True
        assert stopped.wait(WAIT)
        with pytest.raises(Cancelled):
            call.result(WAIT)
        assert client.list_tools()  # a barrier
        assert methods(fake.wire.received)[1:] == ["tools/call", "tools/list"]


def test_rounds_are_bounded_by_max_input_rounds():
    def forever(request: Any) -> Any:
        return {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list"}}}

    with (
        FakeServer(ModernFake(forever)) as fake,
        connect(fake, roots=["/r"], max_input_rounds=2) as client,
    ):
        with pytest.raises(PeerMisbehaved, match="after 2 rounds"):
            client.call_tool("t")
        assert len(with_method(fake.wire.received, "tools/call")) == 3


@pytest.mark.parametrize(
    "answer, problem",
    [
        ({"tools": [], "resultType": "soon"}, "unknown resultType"),
        ({"resultType": "input_required", "requestState": "s"}, "only tools/call"),
    ],
)
def test_results_are_checked_on_every_method(answer, problem):
    def server(request: Any) -> Any:
        return answer if request.method == "tools/list" else ModernFake()(request)

    with (
        FakeServer(server) as fake,
        connect(fake) as client,
        pytest.raises(PeerMisbehaved, match=problem),
    ):
        client.list_tools()


def test_unsupported_version_on_a_request_is_surfaced_when_no_other_version_is_shared():
    def refuses(request: Any) -> Any:
        raise McpError(
            -32022, "Unsupported protocol version", {"supported": [MODERN], "requested": MODERN}
        )

    with FakeServer(ModernFake(refuses)) as fake, connect(fake) as client:
        with pytest.raises(McpError) as caught:
            client.call_tool("t")
        assert caught.value.code == -32022
        assert len(with_method(fake.wire.received, "tools/call")) == 1


def test_a_closed_client_at_2026_raises_connection_closed():
    with FakeServer(ModernFake()) as fake:
        client = connect(fake)
        client.close()
        with pytest.raises(ConnectionClosed):
            client.call_tool("t")


def test_unsupported_version_on_a_request_is_retried_once_with_a_version_both_speak(monkeypatch):
    import mcp_sync.lifecycle as lifecycle

    monkeypatch.setattr(lifecycle, "MODERN_VERSIONS", (MODERN, "2026-01-01"))  # as if we spoke two

    def only_the_older(request: Any) -> Any:
        if request.params["_meta"][VERSION_KEY] != "2026-01-01":
            raise McpError(
                -32022,
                "Unsupported protocol version",
                {"supported": ["2026-01-01"], "requested": MODERN},
            )
        return TEXT

    with FakeServer(ModernFake(only_the_older)) as fake, connect(fake) as client:
        assert client.call_tool("t").content[0].text == "ok"
        assert client.protocol_version == "2026-01-01"
        client.call_tool("t")
        versions = [
            m["params"]["_meta"][VERSION_KEY] for m in with_method(fake.wire.received, "tools/call")
        ]
        assert versions == [MODERN, "2026-01-01", "2026-01-01"]


def test_ctrl_c_between_rounds_stops_the_input_handler_sends_nothing_and_propagates():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("needs the main thread")
    import signal

    main_ident = threading.main_thread().ident
    assert main_ident is not None
    user = UserWhoNeverAnswers()
    started, stopped = user.started, user.stopped

    def interrupt_when_asked() -> None:
        if started.wait(WAIT):
            signal.pthread_kill(main_ident, signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        with (
            FakeServer(ModernFake(user.ask)) as fake,
            connect(fake, elicitation_handler=user) as client,
        ):
            helper = threading.Thread(target=interrupt_when_asked)
            helper.start()
            try:
                with pytest.raises(KeyboardInterrupt):
                    client.call_tool("t", timeout=WAIT * 2)
            finally:
                helper.join(WAIT)
            assert stopped.wait(WAIT)
            assert client.list_tools()  # still usable; a barrier for the assertion below
            assert methods(fake.wire.received)[1:] == ["tools/call", "tools/list"]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_random_cancels_of_input_rounds_never_send_a_request_after_the_cancel(fast_switching):
    """Many calls of two rounds each, cancelled at random moments from other threads: a
    cancelled call's last request is the only one it may cancel on the wire, and nothing of
    the call follows its cancellation."""

    def two_rounds(request: Any) -> Any:
        if "inputResponses" not in request.params:
            return {
                "resultType": "input_required",
                "inputRequests": {"r": {"method": "roots/list"}},
                "requestState": "s",
            }
        return TEXT

    rng = random.Random(2026)
    with (
        FakeServer(ModernFake(two_rounds)) as fake,
        connect(fake, roots=["/r"], max_workers=8) as client,
    ):
        calls: list[Any] = []
        cancelled: set[int] = set()
        cancellers: list[threading.Thread] = []

        def cancel_after(n: int, jitter: float) -> None:
            threading.Event().wait(jitter)  # a random moment: during a round, between, or after
            if calls[n].cancel("random"):
                cancelled.add(n)

        for n in range(120):
            calls.append(client.call_tool_future("t", {"n": n}))
            if rng.random() < 0.7:
                cancellers.append(
                    threading.Thread(target=cancel_after, args=(n, rng.random() * 0.004))
                )
                cancellers[-1].start()
        for thread in cancellers:
            thread.join(WAIT)
        for call in calls:
            try:
                call.result(WAIT * 2)
            except Cancelled:
                pass
        client.list_tools()  # a barrier: what the calls sent has arrived
        received = list(fake.wire.received)
    ids_of: dict[int, list[Any]] = {}
    for message in received:
        if message.get("method") == "tools/call":
            ids_of.setdefault(message["params"]["arguments"]["n"], []).append(message["id"])
    position = {id(m): i for i, m in enumerate(received)}
    for n, ids in ids_of.items():
        assert len(ids) <= 2
        notes = [
            m
            for m in with_method(received, "notifications/cancelled")
            if m["params"]["requestId"] in ids
        ]
        assert len(notes) <= 1
        if notes:
            assert n in cancelled
            assert notes[0]["params"]["requestId"] == ids[-1]  # only the round in flight
            later = [
                m
                for m in received
                if m.get("method") == "tools/call" and m["params"]["arguments"]["n"] == n
            ]
            assert all(position[id(m)] < position[id(notes[0])] for m in later)
        if n in cancelled:
            assert calls[n].cancelled()
        else:
            assert calls[n].result(0).content[0].text == "ok"
