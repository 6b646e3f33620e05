"""The sans-IO lifecycle machine fed by hand: both roles, both eras, every transition and error.

No endpoint, no transport, no thread: each test drives one :class:`Lifecycle` with the calls a
session would make and checks its state and the exact error it raises.
"""

from __future__ import annotations

import mcp_types.jsonrpc
import mcp_types.version
import pytest

from mcp_sync import jsonrpc
from mcp_sync.errors import CapabilityError, McpError, PeerMisbehaved
from mcp_sync.lifecycle import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    LOG_LEVEL_KEY,
    MODERN_VERSIONS,
    PROTOCOL_VERSION_KEY,
    REMOVED_AT_MODERN,
    SUPPORTED_VERSIONS,
    TRANSITIONS,
    Admission,
    Era,
    Lifecycle,
    RequestEnvelope,
    Role,
    State,
    capability_declared,
    era_of_version,
)

MODERN = "2026-07-28"
INIT_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"roots": {"listChanged": True}, "elicitation": {"form": {}}},
    "clientInfo": {"name": "raw", "version": "0"},
}
INIT_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "demo", "version": "1.0.0"},
}


def enveloped(capabilities=None, version=MODERN, **params):
    meta = {PROTOCOL_VERSION_KEY: version, CLIENT_CAPABILITIES_KEY: capabilities or {}}
    return {**params, "_meta": meta}


def server(**options) -> Lifecycle:
    return Lifecycle(Role.SERVER, **options)


def dual_era_server() -> Lifecycle:
    return Lifecycle(Role.SERVER, serve_modern=True)


def client() -> Lifecycle:
    return Lifecycle(Role.CLIENT)


def mcp_error(code: int, call, *args) -> McpError:
    with pytest.raises(McpError) as info:
        call(*args)
    assert info.value.code == code, info.value
    return info.value


# -- the constants ------------------------------------------------------------------------------
def test_versions_agree_with_mcp_types():
    assert set(HANDSHAKE_VERSIONS) == set(mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS)
    assert set(MODERN_VERSIONS) == set(mcp_types.version.MODERN_PROTOCOL_VERSIONS)
    assert LATEST_HANDSHAKE_VERSION == mcp_types.version.LATEST_HANDSHAKE_VERSION == "2025-11-25"
    assert LATEST_MODERN_VERSION == mcp_types.version.LATEST_MODERN_VERSION == MODERN
    assert SUPPORTED_VERSIONS == (MODERN, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert [era_of_version(v) for v in ("2026-07-28", "2024-11-05", "2099-01-01")] == [
        Era.MODERN,
        Era.HANDSHAKE,
        None,
    ]


def test_new_error_codes_agree_with_mcp_types():
    assert jsonrpc.HEADER_MISMATCH == mcp_types.jsonrpc.HEADER_MISMATCH == -32020
    assert (
        jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY
        == mcp_types.jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY
        == -32021
    )
    assert (
        jsonrpc.UNSUPPORTED_PROTOCOL_VERSION
        == mcp_types.jsonrpc.UNSUPPORTED_PROTOCOL_VERSION
        == -32022
    )


def test_removed_methods_are_those_2026_dropped():
    assert {
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "initialize",
        "notifications/initialized",
        "notifications/roots/list_changed",
    } == REMOVED_AT_MODERN


def test_every_transition_is_listed_once_and_close_is_final():
    for role in Role:
        for state in State:
            assert TRANSITIONS[(role, state, "close")] is State.CLOSED
    # nothing leaves CLOSED but the idempotent close
    assert {event for (_, state, event) in TRANSITIONS if state is State.CLOSED} == {"close"}


def test_a_client_operation_on_a_server_machine_is_refused():
    with pytest.raises(RuntimeError, match="client's operation"):
        server().send_initialize()
    with pytest.raises(RuntimeError, match="server's operation"):
        client().admit("tools/list", None)


# -- capability lookup ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "caps,capability,sub,expected",
    [
        ({}, "roots", None, False),
        ({"roots": None}, "roots", None, False),
        ({"roots": {}}, "roots", None, True),
        ({"roots": {}}, "roots", "listChanged", False),
        ({"roots": {"listChanged": True}}, "roots", "listChanged", True),
        ({"elicitation": {"url": {}}}, "elicitation", "url", True),
        ({"elicitation": {"url": False}}, "elicitation", "url", False),
        ({"elicitation": {"url": None}}, "elicitation", "url", False),
        ({"sampling": True}, "sampling", "tools", False),
    ],
)
def test_capability_declared(caps, capability, sub, expected):
    assert capability_declared(caps, capability, sub) is expected


# -- server, handshake era ----------------------------------------------------------------------------
def test_server_handshake_new_initialized_ready_closed():
    lc = server()
    assert (lc.state, lc.era, lc.initialized) == (State.NEW, None, False)
    assert lc.admit("initialize", INIT_PARAMS) == Admission(Era.HANDSHAKE)
    assert lc.receive_initialize(INIT_PARAMS) == "2025-11-25"
    assert (lc.state, lc.era, lc.initialized, lc.peer_confirmed) == (
        State.INITIALIZED,
        Era.HANDSHAKE,
        True,
        False,
    )
    assert lc.peer_capabilities == INIT_PARAMS["capabilities"]
    assert lc.peer_info == {"name": "raw", "version": "0"}
    # requests are served before notifications/initialized (as a 2025 server always did)
    assert lc.admit("tools/list", None) == Admission(Era.HANDSHAKE)
    assert lc.receive_notification("notifications/initialized") is True
    assert (lc.state, lc.peer_confirmed) == (State.READY, True)
    assert lc.receive_notification("notifications/initialized") is False  # a repeat is dropped
    assert lc.admit("tools/call", {"name": "x"}) == Admission(Era.HANDSHAKE)
    lc.close()
    lc.close()
    assert (lc.state, lc.initialized) == (State.CLOSED, True)
    error = mcp_error(-32600, lc.admit, "tools/list", None)
    assert "closed" in error.message


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_server_echoes_a_supported_version(version):
    lc = server()
    assert lc.receive_initialize(dict(INIT_PARAMS, protocolVersion=version)) == version
    assert lc.protocol_version == version


@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28", 20241105, None])
def test_server_answers_its_latest_to_a_version_it_does_not_negotiate(version):
    lc = server()
    assert lc.receive_initialize(dict(INIT_PARAMS, protocolVersion=version)) == "2025-11-25"


def test_server_takes_malformed_capabilities_and_info_as_none():
    lc = server()
    lc.receive_initialize({"protocolVersion": "2025-11-25", "capabilities": [1], "clientInfo": "x"})
    assert lc.peer_capabilities == {} and lc.peer_info == {}
    assert not lc.peer_supports("roots")


@pytest.mark.parametrize(
    "method", ["tools/list", "tools/call", "logging/setLevel", "custom/thing", "server/discover"]
)
def test_server_refuses_requests_before_initialize(method):
    lc = server()
    error = mcp_error(-32600, lc.admit, method, None)
    assert error.message == f"{method} received before initialization completed"
    assert lc.state is State.NEW  # and initialize still works afterwards
    lc.receive_initialize(INIT_PARAMS)
    assert lc.admit(method, None).era is Era.HANDSHAKE


def test_server_refuses_a_second_initialize():
    lc = server()
    lc.receive_initialize(INIT_PARAMS)
    for call in (
        lambda: lc.admit("initialize", INIT_PARAMS),
        lambda: lc.receive_initialize(INIT_PARAMS),
    ):
        with pytest.raises(McpError) as info:
            call()
        assert (info.value.code, info.value.message) == (-32600, "initialize was already received")
    assert lc.protocol_version == "2025-11-25" and lc.state is State.INITIALIZED


def test_notifications_initialized_before_initialize_is_dropped():
    lc = server()
    assert lc.receive_notification("notifications/initialized") is False
    assert lc.state is State.NEW
    assert lc.receive_notification("notifications/roots/list_changed") is True


def test_handshake_only_server_takes_enveloped_requests_in_the_handshake_era():
    """Without serve_modern (today's servers), an envelope changes nothing."""
    lc = server()
    assert lc.classify("tools/list", enveloped()) is Era.MODERN
    error = mcp_error(-32600, lc.admit, "tools/list", enveloped())
    assert "before initialization" in error.message
    lc.receive_initialize(INIT_PARAMS)
    assert lc.admit("tools/list", enveloped()) == Admission(Era.HANDSHAKE)
    assert lc.era is Era.HANDSHAKE


def test_server_peer_capability_checks_are_local_errors():
    lc = server()
    lc.receive_initialize(INIT_PARAMS)
    assert lc.peer_supports("roots", "listChanged") and lc.peer_supports("elicitation", "form")
    assert not lc.peer_supports("elicitation", "url") and not lc.peer_supports("sampling")
    lc.require_peer_capability("roots", "roots/list")
    with pytest.raises(
        CapabilityError, match="sampling/createMessage needs the peer's 'sampling' capability"
    ):
        lc.require_peer_capability("sampling", "sampling/createMessage")


@pytest.mark.parametrize(
    "method,capability",
    [
        ("tools/list", "tools"),
        ("resources/read", "resources"),
        ("prompts/get", "prompts"),
        ("completion/complete", "completions"),
        ("logging/setLevel", "logging"),
    ],
)
def test_server_methods_of_an_undeclared_feature_are_method_not_found(method, capability):
    Lifecycle.check_served(method, {capability: {}})
    error = mcp_error(-32601, Lifecycle.check_served, method, {})
    assert error.message == f"{method}: this server did not declare the {capability!r} capability"


def test_methods_outside_the_features_need_no_server_capability():
    Lifecycle.check_served("custom/thing", {})
    Lifecycle.check_served("initialize", {})


# -- client, handshake era -------------------------------------------------------------------------------
def test_client_handshake_new_initializing_initialized_ready_closed():
    lc = client()
    lc.check_send_request("initialize")
    lc.check_send_request("ping")
    with pytest.raises(RuntimeError, match="not initialized"):
        lc.check_send_request("tools/list")
    lc.send_initialize()
    assert (lc.state, lc.era) == (State.INITIALIZING, Era.HANDSHAKE)
    with pytest.raises(RuntimeError, match="initialize cannot be sent"):
        lc.send_initialize()
    assert lc.initialize_answered(INIT_RESULT) == "2025-11-25"
    assert (lc.state, lc.initialized) == (State.INITIALIZED, False)
    assert lc.peer_capabilities == {"tools": {"listChanged": True}}
    assert lc.peer_info == {"name": "demo", "version": "1.0.0"}
    with pytest.raises(RuntimeError, match="not initialized"):
        lc.check_send_request("tools/list")  # not before notifications/initialized
    lc.send_initialized()
    assert (lc.state, lc.initialized, lc.protocol_version) == (State.READY, True, "2025-11-25")
    lc.check_send_request("tools/list")
    lc.check_send_request("initialize")  # the server is the one to refuse a second one
    with pytest.raises(RuntimeError, match="'send initialized' is not allowed"):
        lc.send_initialized()
    lc.close()
    assert (lc.state, lc.initialized) == (State.CLOSED, True)
    lc.check_send_request("tools/list")  # the closed connection is for the sender to report


def test_client_closed_before_the_handshake_is_not_initialized():
    lc = client()
    lc.close()
    assert lc.initialized is False
    with pytest.raises(RuntimeError, match="not initialized"):
        lc.check_send_request("tools/list")


@pytest.mark.parametrize(
    "result",
    [
        dict(INIT_RESULT, protocolVersion="2099-01-01"),
        dict(INIT_RESULT, protocolVersion=MODERN),  # not negotiable through initialize
        {"capabilities": {}, "serverInfo": {"name": "x", "version": "0"}},
        "not an object",
    ],
)
def test_client_refuses_an_initialize_answer_it_cannot_speak(result):
    lc = client()
    lc.send_initialize()
    with pytest.raises(PeerMisbehaved, match="does not speak"):
        lc.initialize_answered(result)
    assert lc.state is State.CLOSED and lc.protocol_version is None
    with pytest.raises(RuntimeError):
        lc.send_initialized()


def test_client_failed_initialize_goes_back_to_new():
    lc = client()
    lc.initialize_failed()  # nothing in flight: nothing changes
    assert lc.state is State.NEW
    lc.send_initialize()
    lc.initialize_failed()
    assert (lc.state, lc.era) == (State.NEW, None)
    lc.send_initialize()  # and may try again
    assert lc.initialize_answered(INIT_RESULT) == "2025-11-25"


def test_client_answer_without_capabilities_declares_none():
    lc = client()
    lc.send_initialize()
    lc.initialize_answered({"protocolVersion": "2025-06-18", "capabilities": None})
    assert lc.peer_capabilities == {} and lc.peer_info == {}
    with pytest.raises(CapabilityError, match="'tools'"):
        lc.require_peer_capability("tools", "tools/list")


# -- server, modern era --------------------------------------------------------------------------------------
def test_classify():
    assert Lifecycle.classify("initialize", enveloped()) is Era.HANDSHAKE
    assert Lifecycle.classify("server/discover", None) is Era.MODERN
    assert Lifecycle.classify("tools/list", enveloped()) is Era.MODERN
    assert Lifecycle.classify("tools/list", {"_meta": {PROTOCOL_VERSION_KEY: MODERN}}) is Era.MODERN
    assert Lifecycle.classify("tools/list", {"_meta": {CLIENT_CAPABILITIES_KEY: {}}}) is Era.MODERN
    assert Lifecycle.classify("tools/list", {"_meta": {"progressToken": 1}}) is Era.HANDSHAKE
    assert Lifecycle.classify("tools/list", {"_meta": "junk"}) is Era.HANDSHAKE
    assert Lifecycle.classify("tools/list", None) is Era.HANDSHAKE


def test_an_enveloped_request_pins_the_modern_era():
    lc = dual_era_server()
    caps = {"elicitation": {"form": {}}}
    admission = lc.admit("tools/call", enveloped(caps, name="echo"))
    assert admission.era is Era.MODERN
    assert admission.envelope == RequestEnvelope(MODERN, caps, None, None)
    assert (lc.state, lc.era, lc.initialized) == (State.MODERN, Era.MODERN, False)
    # the next requests stand on their own envelopes
    assert lc.admit("tools/list", enveloped()).envelope == RequestEnvelope(MODERN, {})
    lc.close()
    assert (lc.state, lc.era) == (State.CLOSED, Era.MODERN)


def test_server_discover_does_not_pin():
    lc = dual_era_server()
    assert lc.admit("server/discover", enveloped()).era is Era.MODERN
    assert (lc.state, lc.era) == (State.NEW, None)
    # either era may still follow: the handshake ...
    assert lc.admit("initialize", INIT_PARAMS).era is Era.HANDSHAKE
    lc.receive_initialize(INIT_PARAMS)
    assert lc.era is Era.HANDSHAKE
    # ... or, on another connection, a modern request
    other = dual_era_server()
    other.admit("server/discover", enveloped())
    other.admit("tools/list", enveloped())
    assert other.era is Era.MODERN


def test_a_refused_enveloped_request_does_not_pin():
    lc = dual_era_server()
    mcp_error(-32022, lc.admit, "tools/list", enveloped(version="2099-01-01"))
    mcp_error(-32602, lc.admit, "tools/list", {"_meta": {PROTOCOL_VERSION_KEY: MODERN}})
    assert (lc.state, lc.era) == (State.NEW, None)
    lc.receive_initialize(INIT_PARAMS)
    assert lc.era is Era.HANDSHAKE


@pytest.mark.parametrize(
    "params,missing",
    [
        ({"_meta": {PROTOCOL_VERSION_KEY: MODERN}}, [CLIENT_CAPABILITIES_KEY]),
        ({"_meta": {CLIENT_CAPABILITIES_KEY: {}}}, [PROTOCOL_VERSION_KEY]),
    ],
)
def test_a_missing_envelope_member_is_invalid_params(params, missing):
    error = mcp_error(-32602, dual_era_server().admit, "tools/list", params)
    for key in missing:
        assert key in error.message
    assert error.data is None


@pytest.mark.parametrize("params", [None, {}, {"_meta": {"progressToken": 1}}, {"name": "x"}])
def test_a_request_without_an_envelope_on_a_modern_connection_is_invalid_params(params):
    lc = dual_era_server()
    lc.admit("tools/list", enveloped())
    error = mcp_error(-32602, lc.admit, "tools/call", params)
    assert PROTOCOL_VERSION_KEY in error.message and CLIENT_CAPABILITIES_KEY in error.message


def test_server_discover_without_an_envelope_is_invalid_params():
    mcp_error(-32602, dual_era_server().admit, "server/discover", None)


@pytest.mark.parametrize(
    "meta,what",
    [
        ({PROTOCOL_VERSION_KEY: 20260728, CLIENT_CAPABILITIES_KEY: {}}, PROTOCOL_VERSION_KEY),
        ({PROTOCOL_VERSION_KEY: MODERN, CLIENT_CAPABILITIES_KEY: []}, CLIENT_CAPABILITIES_KEY),
        (
            {PROTOCOL_VERSION_KEY: MODERN, CLIENT_CAPABILITIES_KEY: {}, CLIENT_INFO_KEY: "me"},
            CLIENT_INFO_KEY,
        ),
        (
            {PROTOCOL_VERSION_KEY: MODERN, CLIENT_CAPABILITIES_KEY: {}, LOG_LEVEL_KEY: 3},
            LOG_LEVEL_KEY,
        ),
    ],
)
def test_a_malformed_envelope_member_is_invalid_params(meta, what):
    error = mcp_error(-32602, dual_era_server().admit, "tools/list", {"_meta": meta})
    assert what in error.message


@pytest.mark.parametrize("version", ["2099-01-01", "2025-11-25", "2026-07-28-draft"])
def test_an_unsupported_version_is_32022_with_supported_and_requested(version):
    error = mcp_error(-32022, dual_era_server().admit, "tools/list", enveloped(version=version))
    assert error.data == {"supported": ["2026-07-28"], "requested": version}


def test_the_envelope_carries_client_info_and_log_level():
    meta = {
        PROTOCOL_VERSION_KEY: MODERN,
        CLIENT_CAPABILITIES_KEY: {"sampling": {}},
        CLIENT_INFO_KEY: {"name": "c", "version": "1"},
        LOG_LEVEL_KEY: "warning",
        "progressToken": 7,
    }
    envelope = dual_era_server().admit("tools/list", {"_meta": meta}).envelope
    assert envelope == RequestEnvelope(
        MODERN, {"sampling": {}}, {"name": "c", "version": "1"}, "warning"
    )


@pytest.mark.parametrize(
    "method",
    sorted(
        REMOVED_AT_MODERN
        - {"initialize", "notifications/initialized", "notifications/roots/list_changed"}
    ),
)
def test_methods_removed_at_2026_are_method_not_found(method):
    lc = dual_era_server()
    lc.admit("tools/list", enveloped())
    error = mcp_error(-32601, lc.admit, method, enveloped())
    assert "2026-07-28" in error.message
    # also as the first request (which then pins nothing)
    fresh = dual_era_server()
    mcp_error(-32601, fresh.admit, method, enveloped())
    assert fresh.era is None


def test_initialize_after_a_modern_pin_names_the_supported_versions():
    lc = dual_era_server()
    lc.admit("tools/list", enveloped())
    error = mcp_error(-32022, lc.admit, "initialize", INIT_PARAMS)
    assert error.data == {"supported": ["2026-07-28"], "requested": "2025-11-25"}
    error = mcp_error(-32022, lc.receive_initialize, INIT_PARAMS)
    assert error.data == {"supported": ["2026-07-28"], "requested": "2025-11-25"}
    error = mcp_error(-32022, lc.admit, "initialize", {"protocolVersion": 7})
    assert error.data == {"supported": ["2026-07-28"]}
    assert lc.era is Era.MODERN and lc.protocol_version is None


def test_an_enveloped_request_after_a_handshake_pin_is_invalid_request():
    lc = dual_era_server()
    lc.admit("initialize", INIT_PARAMS)
    lc.receive_initialize(INIT_PARAMS)
    for method in ("tools/list", "server/discover"):
        error = mcp_error(-32600, lc.admit, method, enveloped())
        assert "2025-11-25" in error.message
    # plain requests go on in the handshake era
    assert lc.admit("tools/list", None) == Admission(Era.HANDSHAKE)


def test_notifications_removed_at_2026_are_dropped_on_a_modern_connection():
    lc = dual_era_server()
    lc.admit("tools/list", enveloped())
    assert lc.receive_notification("notifications/initialized") is False
    assert lc.receive_notification("notifications/roots/list_changed") is False
    assert lc.receive_notification("notifications/cancelled") is True
    assert lc.state is State.MODERN


def test_capabilities_are_per_request_never_inferred():
    lc = dual_era_server()
    first = lc.admit("tools/call", enveloped({"elicitation": {"form": {}}, "roots": {}})).envelope
    second = lc.admit("tools/call", enveloped({})).envelope
    assert first is not None and second is not None
    assert (
        first.declares("elicitation")
        and first.declares("elicitation", "form")
        and first.declares("roots")
    )
    assert not first.declares("elicitation", "url") and not first.declares("sampling")
    assert not second.declares("elicitation") and not second.declares("roots")
    # the connection keeps no client capabilities at all at 2026
    assert lc.peer_capabilities == {} and not lc.peer_supports("elicitation")
    first.require("elicitation", what="elicitation/create")
    error = mcp_error(-32021, lambda: second.require("elicitation", what="elicitation/create"))
    assert error.data == {"requiredCapabilities": {"elicitation": {}}}
    with pytest.raises(McpError) as info:
        first.require("elicitation", "url", what="elicitation/create in URL mode")
    assert info.value.code == -32021
    assert info.value.data == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    assert "elicitation/create in URL mode" in info.value.message


def test_require_names_what_needs_the_capability():
    envelope = RequestEnvelope(MODERN, {})
    with pytest.raises(McpError, match="roots/list needs the client capability 'roots'"):
        envelope.require("roots", what="roots/list")


# -- client, modern era --------------------------------------------------------------------------------------
def test_client_chooses_the_modern_era_and_stamps_every_request():
    lc = client()
    lc.choose_modern()
    assert (lc.state, lc.era, lc.protocol_version) == (State.MODERN, Era.MODERN, MODERN)
    envelope = lc.envelope({"sampling": {}}, {"name": "mcp_sync", "version": "1"})
    params = {"name": "echo", "_meta": {"progressToken": 3}}
    stamped = lc.stamp(params, envelope)
    assert stamped == {
        "name": "echo",
        "_meta": {
            "progressToken": 3,
            PROTOCOL_VERSION_KEY: MODERN,
            CLIENT_CAPABILITIES_KEY: {"sampling": {}},
            CLIENT_INFO_KEY: {"name": "mcp_sync", "version": "1"},
        },
    }
    assert params == {"name": "echo", "_meta": {"progressToken": 3}}  # not changed in place
    assert lc.stamp(None, lc.envelope({}, log_level="info")) == {
        "_meta": {PROTOCOL_VERSION_KEY: MODERN, CLIENT_CAPABILITIES_KEY: {}, LOG_LEVEL_KEY: "info"}
    }
    # what a client stamps, a server reads back unchanged
    assert dual_era_server().admit("tools/call", stamped).envelope == envelope


def test_client_modern_refuses_removed_methods_locally_naming_the_era():
    lc = client()
    lc.choose_modern()
    lc.check_send_request("tools/list")
    lc.check_send_request("server/discover")
    for method in (
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "initialize",
    ):
        with pytest.raises(RuntimeError, match=f"{method} does not exist in protocol 2026-07-28"):
            lc.check_send_request(method)
    lc.close()
    with pytest.raises(RuntimeError, match="ping does not exist"):
        lc.check_send_request("ping")


def test_client_cannot_mix_the_eras():
    lc = client()
    lc.choose_modern()
    with pytest.raises(RuntimeError, match="initialize cannot be sent"):
        lc.send_initialize()
    with pytest.raises(RuntimeError, match="'choose modern' is not allowed"):
        lc.choose_modern()
    other = client()
    other.send_initialize()
    with pytest.raises(RuntimeError, match="'choose modern' is not allowed"):
        other.choose_modern()
    with pytest.raises(RuntimeError, match="no modern protocol version"):
        other.envelope({})


def test_client_refuses_a_version_that_is_not_modern():
    lc = client()
    with pytest.raises(ValueError, match="2025-11-25"):
        lc.choose_modern("2025-11-25")
    assert lc.state is State.NEW


@pytest.mark.parametrize(
    "data,expected",
    [
        ({"supported": ["2026-07-28"], "requested": "2027-01-01"}, "2026-07-28"),
        ({"supported": ["2027-01-01", "2026-07-28"], "requested": "x"}, "2026-07-28"),
        ({"supported": ["2027-01-01"], "requested": "2026-07-28"}, None),
        ({"supported": "2026-07-28"}, None),
        (None, None),
    ],
)
def test_client_retry_version_after_32022(data, expected):
    lc = client()
    assert lc.retry_version(data) == expected


def test_client_retry_version_never_repeats_the_refused_one():
    lc = client()
    lc.choose_modern()
    assert lc.retry_version({"supported": ["2026-07-28"], "requested": "2026-07-28"}) is None


@pytest.mark.parametrize(
    "offered,era,version",
    [
        (["2026-07-28", "2025-11-25"], Era.MODERN, MODERN),
        (["2027-01-01", "2026-07-28"], Era.MODERN, MODERN),
        (["2025-11-25", "2025-06-18"], Era.HANDSHAKE, None),
        (["2027-01-01"], Era.HANDSHAKE, None),
        ("2026-07-28", Era.HANDSHAKE, None),
    ],
)
def test_client_discover_answer_decides_the_era(offered, era, version):
    lc = client()
    assert lc.discover_answered({"supportedVersions": offered, "capabilities": {}}) is era
    assert lc.protocol_version == version
    assert lc.state is (State.MODERN if era is Era.MODERN else State.NEW)


def test_client_discover_answer_that_is_not_an_object_falls_back():
    lc = client()
    assert lc.discover_answered(None) is Era.HANDSHAKE
    lc.send_initialize()  # the fallback is still open


@pytest.mark.parametrize("code", [-32601, -32602, -32600, -32603, -32000, -32002])
def test_client_discover_refused_by_a_legacy_server_falls_back_whatever_the_code(code):
    lc = client()
    assert lc.discover_refused(McpError(code, "nope")) is Era.HANDSHAKE
    assert (lc.state, lc.era) == (State.NEW, None)
    lc.send_initialize()


def test_client_discover_refused_with_32022_picks_a_mutual_version_and_stays_modern():
    lc = client()
    error = McpError(
        -32022,
        "Unsupported protocol version",
        {"supported": ["2026-07-28"], "requested": "2027-01-01"},
    )
    assert lc.discover_refused(error) is Era.MODERN
    assert (lc.state, lc.protocol_version) == (State.MODERN, MODERN)


def test_client_discover_refused_with_32022_and_no_mutual_version_surfaces_the_error():
    lc = client()
    error = McpError(
        -32022, "Unsupported protocol version", {"supported": ["2027-01-01"], "requested": MODERN}
    )
    with pytest.raises(McpError) as info:
        lc.discover_refused(error)
    assert info.value is error
    assert lc.state is State.NEW


@pytest.mark.parametrize("code", [-32020, -32021])
def test_client_discover_refused_with_another_modern_error_stays_modern(code):
    lc = client()
    assert lc.discover_refused(McpError(code, "modern")) is Era.MODERN
    assert lc.protocol_version == LATEST_MODERN_VERSION


def test_repr_names_role_state_and_version():
    lc = client()
    assert repr(lc) == "<Lifecycle client new>"
    lc.choose_modern()
    assert repr(lc) == "<Lifecycle client modern 2026-07-28>"
