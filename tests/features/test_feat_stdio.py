"""The MCP features over a real stdio subprocess (tests/peers/feature_server.py):
one broad round trip, plus cancellation of a resource read and of a nested sampling request
across the process boundary."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import sys
import threading
from typing import Any

import pytest
from support.messages import cancels_of, requests, responses_to
from support.paths import PEERS, ROOT
from support.probes import Collector
from support.recording import RecordingTransport
from support.waiting import WAIT, wait_event

from mcp_sync import Client, Context, McpError, SubprocessTransport

SERVER = str(PEERS / "feature_server.py")
ENV = {"PYTHONPATH": str(ROOT)}
STDIO_WAIT = 15.0  # first requests pay for the child's imports


def test_features_round_trip_over_stdio(tmp_path):
    notes, logs = Collector(), Collector()
    with Client.stdio(
        [sys.executable, SERVER],
        env=ENV,
        roots=[str(tmp_path)],
        on_notification=notes,
        on_log=logs,
        init_timeout=STDIO_WAIT,
        protocol="legacy",  # subscriptions, logging/setLevel and nested requests are 2025-11-25's
    ) as client:
        assert (client.server_info.name, client.server_info.version) == ("feature-stdio", "2.0.0")
        caps = client.server_capabilities
        assert caps["resources"] == {"subscribe": True, "listChanged": True}
        assert (
            caps["prompts"] == {"listChanged": True} and "completions" in caps and "logging" in caps
        )

        # resources and templates
        assert [r.uri for r in client.list_resources(timeout=STDIO_WAIT)] == [
            "config://app",
            "data://blob",
            "slow://read",
        ]
        assert [t.uri_template for t in client.list_resource_templates(timeout=WAIT)] == [
            "notes://{name}{?upper}"
        ]
        text = client.read_resource("config://app", timeout=WAIT).contents[0]
        assert (text.text, text.mime_type) == ("mode=stdio", "text/plain")
        blob = client.read_resource("data://blob", timeout=WAIT).contents[0]
        assert (
            base64.b64decode(blob.blob) == bytes(range(256))
            and blob.mime_type == "application/x-test"
        )
        templated = client.read_resource("notes://caf%C3%A9?upper=true", timeout=WAIT).contents[0]
        assert (
            json.loads(templated.text) == {"name": "CAFÉ"}
            and templated.mime_type == "application/json"
        )
        with pytest.raises(McpError) as info:
            client.read_resource("nothing://here", timeout=WAIT)
        assert (info.value.code, info.value.data) == (-32002, {"uri": "nothing://here"})

        # prompts and completion
        [greet] = client.list_prompts(timeout=WAIT)
        assert [(a.name, a.required, a.description) for a in greet.arguments] == [
            ("name", True, "Who to greet."),
            ("style", False, None),
        ]
        prompt = client.get_prompt("greet", {"name": "Ann"}, timeout=WAIT)
        assert [(m.role, m.content.text) for m in prompt.messages] == [
            ("user", "Say hello to Ann (plain)."),
            ("assistant", "Hello, Ann!"),
        ]
        with pytest.raises(McpError) as info:
            client.get_prompt("greet", {}, timeout=WAIT)
        assert info.value.code == -32602 and "name" in info.value.message
        assert client.complete(
            {"type": "ref/prompt", "name": "greet"}, "name", "al", timeout=WAIT
        ).completion.values == ["alice", "albert"]

        # subscriptions and list_changed
        client.subscribe("config://app", timeout=WAIT)
        client.call_tool("touch", {"uri": "config://app"}, timeout=WAIT)
        notes.wait_for(
            lambda n: n == ("notifications/resources/updated", {"uri": "config://app"}),
            "the resource update",
        )
        client.call_tool("add_resource", {"uri": "live://x", "text": "live"}, timeout=WAIT)
        notes.wait_for(
            lambda n: n[0] == "notifications/resources/list_changed", "resources/list_changed"
        )
        assert client.read_resource("live://x", timeout=WAIT).contents[0].text == "live"

        # logging
        client.set_logging_level("error", timeout=WAIT)
        assert client.call_tool(
            "emit", {"level": "info", "message": "quiet"}, timeout=WAIT
        ).structured_content == {"result": False}
        assert client.call_tool(
            "emit", {"level": "critical", "message": "loud"}, timeout=WAIT
        ).structured_content == {"result": True}
        logs.wait_for(lambda m: m.get("data") == "loud", "the critical log message")
        assert [m["data"] for m in logs.snapshot()] == ["loud"]
        with pytest.raises(McpError) as info:
            client.set_logging_level("verbose", timeout=WAIT)
        assert info.value.code == -32602

        # roots: a path becomes a file:// URI
        roots = client.call_tool("ask_roots", timeout=WAIT).structured_content["result"]
        assert roots == [{"uri": tmp_path.as_uri()}]


def spawn(**options: Any) -> tuple[Client, RecordingTransport]:
    wire = RecordingTransport(SubprocessTransport([sys.executable, SERVER], env=ENV))
    try:
        return Client.connect(wire, init_timeout=STDIO_WAIT, protocol="legacy", **options), wire
    except BaseException:
        wire.close()
        raise


def test_cancelled_resource_read_over_stdio_stops_the_handler_and_gets_no_response():
    logs = Collector()
    client, wire = spawn(on_log=logs)
    with client:
        call = client.submit("resources/read", {"uri": "slow://read"})
        logs.wait_for(
            lambda m: m.get("data") == "slow read started", "the slow read to start", STDIO_WAIT
        )
        assert call.cancel("reader left") is True
        message = logs.wait_for(
            lambda m: str(m.get("data", "")).startswith("slow read cancelled"),
            "the handler to see its cancellation",
        )
        assert message == {
            "level": "warning",
            "data": "slow read cancelled: reader left",
            "logger": "feature.events",
        }
        with pytest.raises(concurrent.futures.CancelledError):
            call.result(WAIT)
        # the server has one worker: this answer is written only after the cancelled read is
        # completely done, so a response to it would already have arrived
        assert client.read_resource("config://app", timeout=WAIT).contents[0].text == "mode=stdio"
        client.ping(timeout=WAIT)
        assert responses_to(wire.snapshot()[1], call.request_id) == []
        assert client.endpoint.dropped["late response after cancellation"] == 0


@pytest.mark.parametrize("how", ["tool cancelled", "create_message timeout"])
def test_nested_sampling_cancelled_over_stdio_fires_the_client_handler_token_and_gets_no_response(
    how,
):
    started, finished = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def sampling(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        if "blocked" in seen:  # only the first call blocks
            return {"role": "assistant", "content": {"type": "text", "text": "quick"}, "model": "m"}
        seen["blocked"] = ctx.request_id
        started.set()
        seen["cancelled"] = ctx.wait(WAIT)
        seen["reason"] = ctx.cancel_token.reason
        finished.set()
        return {"role": "assistant", "content": {"type": "text", "text": "too late"}, "model": "m"}

    # one client worker: the follow-up sampling request runs only after the cancelled one is done
    client, wire = spawn(sampling_handler=sampling, max_workers=1)
    with client:
        if how == "tool cancelled":
            call = client.call_tool_future("ask_sampling", {})
            wait_event(started, "the sampling handler to start", STDIO_WAIT)
            assert call.cancel() is True
        else:
            call = client.call_tool_future("ask_sampling", {"timeout": 0.5}, timeout=STDIO_WAIT)
        wait_event(finished, "the sampling handler to see its token fire", STDIO_WAIT)
        assert seen["cancelled"] is True
        nested_id = seen["blocked"]
        [nested] = requests(wire.snapshot()[1], "sampling/createMessage")
        assert nested["id"] == nested_id
        assert cancels_of(wire.snapshot()[1], nested_id), (
            "the server must cancel the nested request on the wire"
        )
        if how == "tool cancelled":
            with pytest.raises(concurrent.futures.CancelledError):
                call.result(WAIT)
        else:
            result = call.result(WAIT)
            assert result.is_error is True and "timed out" in result.content[0].text
            assert "timed out" in seen["reason"]

        follow_up = client.call_tool("ask_sampling", {}, timeout=WAIT)
        assert follow_up.structured_content["content"]["text"] == "quick"
        assert responses_to(wire.snapshot()[0], nested_id) == [], (
            "the client answered a cancelled sampling request"
        )
