"""Capability gating: what a server declares follows what it registered, and the client
refuses (locally, before sending anything) what the server did not declare."""

from __future__ import annotations

import pytest
from support.probes import Collector
from support.sessions import pair
from support.waiting import WAIT

from mcp_sync import CapabilityError, McpError, Server

GATED = ("resources/", "prompts/", "completion/")


def tools_only() -> Server:
    server = Server("tools-only")

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


def test_server_declares_only_what_it_registered():
    assert set(tools_only().capabilities()) == {"tools", "logging"}

    with_resources = Server("r")
    with_resources.add_resource(lambda: "x", "r://x")
    caps = with_resources.capabilities()
    assert caps["resources"] == {"subscribe": True, "listChanged": True}
    assert "prompts" not in caps and "completions" in caps

    with_prompts = Server("p")
    with_prompts.add_prompt(lambda: "x", name="x")
    caps = with_prompts.capabilities()
    assert caps["prompts"] == {"listChanged": True}
    assert "resources" not in caps and "completions" in caps


def test_declares_answers_as_the_capabilities_do():
    servers = [
        Server("bare"),
        tools_only(),
        Server("r"),
        Server("p"),
        Server("d", declare={"prompts"}),
    ]
    servers[2].add_resource(lambda: "x", "r://x")
    servers[3].add_prompt(lambda: "x", name="x")
    for server in servers:
        declared = server.capabilities()
        for name in ("tools", "logging", "resources", "prompts", "completions", "tasks", "x"):
            assert server.declares(name) == (name in declared), (server.name, name)


def test_client_refuses_undeclared_server_features_without_sending():
    with pair(tools_only()) as p:
        caps = p.client.server_capabilities
        assert "resources" not in caps and "prompts" not in caps and "completions" not in caps
        calls = [
            lambda: p.client.list_resources(timeout=WAIT),
            lambda: p.client.list_resource_templates(timeout=WAIT),
            lambda: p.client.read_resource("x://y", timeout=WAIT),
            lambda: p.client.subscribe("x://y", timeout=WAIT),
            lambda: p.client.unsubscribe("x://y", timeout=WAIT),
            lambda: p.client.list_prompts(timeout=WAIT),
            lambda: p.client.get_prompt("x", timeout=WAIT),
            lambda: p.client.complete({"type": "ref/prompt", "name": "x"}, "a", "", timeout=WAIT),
        ]
        for call in calls:
            with pytest.raises(CapabilityError):
                call()
        sent = p.client_wire.snapshot()[0]
        assert [m["method"] for m in sent if m.get("method", "").startswith(GATED)] == [], (
            "nothing may be sent"
        )
        # the declared features still work
        assert p.client.call_tool("echo", {"text": "hi"}, timeout=WAIT).content[0].text == "hi"


def test_capability_error_names_the_capability():
    with pair(tools_only()) as p:
        with pytest.raises(CapabilityError, match="prompts"):
            p.client.list_prompts(timeout=WAIT)
        with pytest.raises(CapabilityError, match="resources"):
            p.client.list_resources(timeout=WAIT)


def test_request_for_an_undeclared_server_capability_is_method_not_found():
    with pair(tools_only()) as p:
        for method, params in (
            ("prompts/list", None),
            ("prompts/get", {"name": "x"}),
            ("resources/list", None),
            ("resources/read", {"uri": "x://y"}),
            ("resources/subscribe", {"uri": "x://y"}),
            (
                "completion/complete",
                {
                    "ref": {"type": "ref/prompt", "name": "x"},
                    "argument": {"name": "a", "value": ""},
                },
            ),
        ):
            with pytest.raises(McpError) as info:
                p.client.request(method, params, timeout=WAIT)
            assert info.value.code == -32601, method
            assert method in info.value.message
        p.client.ping(timeout=WAIT)  # the connection stays up


def test_declare_lets_a_server_register_resources_and_prompts_at_run_time():
    server = Server("late", declare=("resources", "prompts"))
    assert "resources" in server.capabilities() and "prompts" in server.capabilities()
    notes = Collector()
    with pair(server, on_notification=notes) as p:
        assert (
            p.client.list_resources(timeout=WAIT) == []
            and p.client.list_prompts(timeout=WAIT) == []
        )
        server.add_resource(lambda: "late text", "late://r")
        server.add_prompt(lambda: "late prompt", name="late")
        notes.wait_for(
            lambda n: n[0] == "notifications/prompts/list_changed", "prompts/list_changed"
        )
        assert [n[0] for n in notes.snapshot()] == [
            "notifications/resources/list_changed",
            "notifications/prompts/list_changed",
        ]
        assert p.client.read_resource("late://r", timeout=WAIT).contents[0].text == "late text"
        assert p.client.get_prompt("late", timeout=WAIT).messages[0].content.text == "late prompt"


def test_client_declares_what_it_offers():
    server = tools_only()
    with pair(server) as p:
        assert p.session.peer_capabilities == {}
    with pair(
        server,
        roots=["file:///x"],
        sampling_handler=lambda params, ctx: {},
        elicitation_handler=lambda params, ctx: {},
    ) as p:
        assert p.session.peer_capabilities == {
            "roots": {"listChanged": True},
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
        }
        assert p.session.peer_supports("elicitation", "url")
        assert p.session.peer_supports("roots", "listChanged")
        assert not p.session.peer_supports("elicitation", "other")
