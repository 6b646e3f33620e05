"""Resources and resource templates over the in-memory pair: reading every result shape,
templates with typed parameters, listing with pagination, not-found errors, subscriptions
(delivered only to subscribed sessions), list_changed, and cancellation of a read."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import threading

import mcp_types
import pytest
from support.messages import notifications, responses_to
from support.probes import Collector
from support.recording import RecordingTransport
from support.sessions import pair
from support.waiting import WAIT, wait_event

from mcp_sync import Client, Context, McpError, Server, memory_pair

RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602


def basic_server(**options) -> Server:
    server = Server("resources", **options)

    @server.resource("config://app", description="The app configuration", mime_type="text/plain")
    def app_config() -> str:
        return "debug=true"

    @server.resource("data://logo", mime_type="image/png")
    def logo() -> bytes:
        return b"\x89PNG\r\n\x1a\n\x00\xff"

    @server.resource("data://raw")
    def raw() -> bytes:
        return b"\x00\x01\x02"

    @server.resource("data://settings")
    def settings() -> dict:
        """Settings as JSON."""
        return {"theme": "dark", "size": 3, "tags": ["a", "é"]}

    @server.resource("users://{user_id}/posts/{post}{?format}", mime_type="text/markdown")
    def user_post(user_id: str, post: int, format: str = "plain") -> str:
        """One post of one user."""
        return f"user={user_id!r} post={post!r} format={format}"

    return server


# -- reading ---------------------------------------------------------------------------------
def test_read_text_resource_with_mime_type():
    with pair(basic_server()) as p:
        result = p.client.read_resource("config://app", timeout=WAIT)
        assert len(result.contents) == 1
        content = result.contents[0]
        assert content.uri == "config://app"
        assert content.text == "debug=true"
        assert content.mime_type == "text/plain"


def test_read_bytes_resource_is_a_base64_blob():
    with pair(basic_server()) as p:
        content = p.client.read_resource("data://logo", timeout=WAIT).contents[0]
        assert base64.b64decode(content.blob) == b"\x89PNG\r\n\x1a\n\x00\xff"
        assert content.mime_type == "image/png"
        assert not hasattr(content, "text") or getattr(content, "text", None) is None
        raw = p.client.read_resource("data://raw", timeout=WAIT).contents[0]
        assert base64.b64decode(raw.blob) == b"\x00\x01\x02"
        assert raw.mime_type == "application/octet-stream"


def test_read_dict_resource_is_json_text():
    with pair(basic_server()) as p:
        content = p.client.read_resource("data://settings", timeout=WAIT).contents[0]
        assert content.mime_type == "application/json"
        assert json.loads(content.text) == {"theme": "dark", "size": 3, "tags": ["a", "é"]}


def test_read_template_passes_typed_parameters_to_the_handler():
    with pair(basic_server()) as p:
        content = p.client.read_resource(
            "users://ann%20lee/posts/7?format=html", timeout=WAIT
        ).contents[0]
        assert content.uri == "users://ann%20lee/posts/7?format=html", (
            "contents carry the URI that was read"
        )
        assert content.text == "user='ann lee' post=7 format=html"
        assert content.mime_type == "text/markdown"
        # the optional query parameter falls back to the function's default
        assert (
            p.client.read_resource("users://bob/posts/1", timeout=WAIT).contents[0].text
            == "user='bob' post=1 format=plain"
        )


def test_read_template_with_an_invalid_parameter_is_invalid_params():
    with pair(basic_server()) as p:
        with pytest.raises(McpError) as info:
            p.client.read_resource("users://bob/posts/notanumber", timeout=WAIT)
        assert info.value.code == INVALID_PARAMS
        assert "post" in info.value.message


def test_several_contents_and_content_dicts_pass_through():
    server = Server("multi")

    @server.resource("bundle://all")
    def bundle() -> list:
        return [
            {"uri": "bundle://all/a", "text": "A", "mimeType": "text/plain"},
            {
                "uri": "bundle://all/b",
                "blob": base64.b64encode(b"B").decode(),
                "mimeType": "application/x-b",
            },
        ]

    @server.resource("bundle://list")
    def plain_list() -> list:
        return [1, 2, 3]

    with pair(server) as p:
        contents = p.client.read_resource("bundle://all", timeout=WAIT).contents
        assert [c.uri for c in contents] == ["bundle://all/a", "bundle://all/b"]
        assert contents[0].text == "A" and base64.b64decode(contents[1].blob) == b"B"
        listed = p.client.read_resource("bundle://list", timeout=WAIT).contents
        assert len(listed) == 1 and json.loads(listed[0].text) == [1, 2, 3]


def test_a_read_resource_result_model_sends_no_2026_members_on_the_2025_wire():
    server = Server("models")

    @server.resource("model://plain")
    def plain() -> mcp_types.ReadResourceResult:
        return mcp_types.ReadResourceResult(
            contents=[mcp_types.TextResourceContents(uri="model://plain", text="hi")]
        )

    @server.resource("model://hinted")
    def hinted() -> mcp_types.ReadResourceResult:
        return mcp_types.ReadResourceResult(contents=[], ttl_ms=5_000, cache_scope="public")

    with pair(server) as p:
        assert p.client.protocol_version == "2025-11-25"
        p.client.read_resource("model://plain", timeout=WAIT)
        p.client.read_resource("model://hinted", timeout=WAIT)
        plain_answer, hinted_answer = [
            m["result"] for m in p.client_wire.received if "contents" in m.get("result", {})
        ]
        assert plain_answer == {"contents": [{"uri": "model://plain", "text": "hi"}]}
        assert hinted_answer == {
            "contents": [],
            "ttlMs": 5_000,
            "cacheScope": "public",
        }  # given explicitly: kept


def test_unknown_resource_is_32002_with_the_uri_in_data():
    with pair(basic_server()) as p:
        with pytest.raises(McpError) as info:
            p.client.read_resource("config://nope", timeout=WAIT)
        assert info.value.code == RESOURCE_NOT_FOUND
        assert info.value.data == {"uri": "config://nope"}
        assert "config://nope" in info.value.message
        # a URI that almost matches a template is not found either
        with pytest.raises(McpError) as info:
            p.client.read_resource("users://bob/posts", timeout=WAIT)
        assert info.value.code == RESOURCE_NOT_FOUND


def test_a_failing_resource_handler_is_an_internal_error_and_the_connection_stays_up():
    server = Server("failing")

    @server.resource("broken://thing")
    def broken() -> str:
        raise RuntimeError("disk on fire")

    with pair(server) as p:
        with pytest.raises(McpError) as info:
            p.client.read_resource("broken://thing", timeout=WAIT)
        assert info.value.code == -32603
        assert "disk on fire" in info.value.message
        p.client.ping(timeout=WAIT)


def test_template_variables_must_be_parameters():
    server = Server("bad")
    with pytest.raises(TypeError, match="city"):
        server.add_resource(lambda: "x", "weather://{city}")


# -- listing and pagination ------------------------------------------------------------------
def test_list_resources_and_templates_separately():
    with pair(basic_server()) as p:
        resources = p.client.list_resources(timeout=WAIT)
        assert [r.uri for r in resources] == [
            "config://app",
            "data://logo",
            "data://raw",
            "data://settings",
        ]
        by_uri = {r.uri: r for r in resources}
        assert by_uri["config://app"].name == "app_config"
        assert by_uri["config://app"].description == "The app configuration"
        assert by_uri["config://app"].mime_type == "text/plain"
        assert by_uri["data://settings"].description == "Settings as JSON."
        templates = p.client.list_resource_templates(timeout=WAIT)
        assert [(t.uri_template, t.name, t.description, t.mime_type) for t in templates] == [
            (
                "users://{user_id}/posts/{post}{?format}",
                "user_post",
                "One post of one user.",
                "text/markdown",
            )
        ]


def paged_server() -> Server:
    server = Server("paged", page_size=2)
    for i in range(5):
        server.add_resource(lambda i=i: f"item {i}", f"item://{i}", name=f"item{i}")
    for i in range(3):
        server.add_resource(lambda key, i=i: f"{i}:{key}", f"tpl{i}://{{key}}", name=f"tpl{i}")
    return server


def test_resources_list_is_paginated_with_an_opaque_cursor():
    with pair(paged_server()) as p:
        first = p.client.list_resources_page(timeout=WAIT)
        assert [r.uri for r in first.resources] == ["item://0", "item://1"]
        assert isinstance(first.next_cursor, str) and first.next_cursor not in ("2", "1")
        second = p.client.list_resources_page(first.next_cursor, timeout=WAIT)
        assert [r.uri for r in second.resources] == ["item://2", "item://3"]
        third = p.client.list_resources_page(second.next_cursor, timeout=WAIT)
        assert [r.uri for r in third.resources] == ["item://4"]
        assert third.next_cursor is None
        assert [r.uri for r in p.client.list_resources(timeout=WAIT)] == [
            f"item://{i}" for i in range(5)
        ]


def test_resource_templates_list_is_paginated():
    with pair(paged_server()) as p:
        first = p.client.list_resource_templates_page(timeout=WAIT)
        assert [t.name for t in first.resource_templates] == ["tpl0", "tpl1"]
        assert first.next_cursor
        second = p.client.list_resource_templates_page(first.next_cursor, timeout=WAIT)
        assert [t.name for t in second.resource_templates] == [
            "tpl2"
        ] and second.next_cursor is None
        assert [t.uri_template for t in p.client.list_resource_templates(timeout=WAIT)] == [
            "tpl0://{key}",
            "tpl1://{key}",
            "tpl2://{key}",
        ]


@pytest.mark.parametrize("method", ["resources/list", "resources/templates/list"])
@pytest.mark.parametrize("cursor", ["not-a-cursor", "2", 17, "eyJ4IjogMX0="])
def test_bad_cursor_is_invalid_params(method, cursor):
    with pair(paged_server()) as p:
        with pytest.raises(McpError) as info:
            p.client.request(method, {"cursor": cursor}, timeout=WAIT)
        assert info.value.code == INVALID_PARAMS
        assert "cursor" in info.value.message.lower()


# -- subscriptions ---------------------------------------------------------------------------
class TwoClients:
    """Two clients of one server, each recording its notifications."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.ends = []
        self.handles = []
        self.clients: list[Client] = []
        self.notes: list[Collector] = []
        self.wires: list[RecordingTransport] = []

    def __enter__(self) -> TwoClients:
        try:
            for _ in range(2):
                client_end, server_end = memory_pair()
                self.ends.append(client_end)
                self.handles.append(self.server.serve_in_thread(server_end))
                notes = Collector()
                wire = RecordingTransport(client_end)
                # resources/subscribe is 2025-11-25's (2026-07-28 has subscriptions/listen)
                self.clients.append(
                    Client.connect(
                        wire, on_notification=notes, init_timeout=WAIT, protocol="legacy"
                    )
                )
                self.notes.append(notes)
                self.wires.append(wire)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for client in self.clients:
            client.close()
        for end in self.ends:
            end.close()
        for handle in self.handles:
            handle.stop()


def updates(wire: RecordingTransport) -> list[str]:
    return [
        m["params"]["uri"]
        for m in notifications(wire.snapshot()[1], "notifications/resources/updated")
    ]


def test_resource_updates_reach_only_subscribed_sessions():
    server = basic_server()
    with TwoClients(server) as two:
        a, b = two.clients
        assert a.server_capabilities["resources"]["subscribe"] is True
        a.subscribe("config://app", timeout=WAIT)
        b.subscribe("data://settings", timeout=WAIT)
        # subscribing to a URI of a template works too
        a.subscribe("users://bob/posts/1", timeout=WAIT)

        server.notify_resource_updated("config://app")
        server.notify_resource_updated("users://bob/posts/1")
        server.notify_resource_updated("data://settings")  # the marker B waits for

        two.notes[0].wait_for(
            lambda n: n == ("notifications/resources/updated", {"uri": "users://bob/posts/1"}),
            "A's template update",
        )
        two.notes[1].wait_for(lambda n: n[0] == "notifications/resources/updated", "B's update")
        # updates for one connection are written in order: B's marker came after the others
        assert updates(two.wires[0]) == ["config://app", "users://bob/posts/1"]
        assert updates(two.wires[1]) == ["data://settings"], (
            "B must not hear about resources it did not subscribe to"
        )


def test_unsubscribe_stops_updates():
    server = basic_server()
    with pair(server, on_notification=Collector()) as p:
        p.client.subscribe("config://app", timeout=WAIT)
        p.client.subscribe("data://settings", timeout=WAIT)
        p.client.unsubscribe("config://app", timeout=WAIT)
        p.client.unsubscribe("never://subscribed", timeout=WAIT)  # harmless
        server.notify_resource_updated("config://app")
        server.notify_resource_updated("data://settings")
        p.client_wire.wait_for(
            lambda w: updates(w) == ["data://settings"] or len(updates(w)) > 1, "the marker update"
        )
        assert updates(p.client_wire) == ["data://settings"]


def test_subscribe_to_an_unknown_resource_is_32002():
    with pair(basic_server()) as p:
        with pytest.raises(McpError) as info:
            p.client.subscribe("config://nope", timeout=WAIT)
        assert info.value.code == RESOURCE_NOT_FOUND
        assert info.value.data == {"uri": "config://nope"}
        assert "config://nope" not in p.session.subscriptions


def test_updates_stop_when_the_session_closes():
    server = basic_server()
    with pair(server) as p:
        p.client.subscribe("config://app", timeout=WAIT)
        session = p.session
    assert session.closed
    server.notify_resource_updated("config://app")  # must not raise for a closed session
    assert session not in server.sessions()


# -- list_changed ----------------------------------------------------------------------------
def test_list_changed_when_a_resource_is_added_or_removed_at_run_time():
    server = basic_server()
    notes = Collector()
    with pair(server, on_notification=notes) as p:
        assert p.client.server_capabilities["resources"]["listChanged"] is True
        server.add_resource(lambda: "fresh", "live://new", name="new_one")
        notes.wait_for(
            lambda n: n[0] == "notifications/resources/list_changed", "list_changed after add"
        )
        assert "live://new" in [r.uri for r in p.client.list_resources(timeout=WAIT)]
        assert p.client.read_resource("live://new", timeout=WAIT).contents[0].text == "fresh"

        server.remove_resource("live://new")
        wire = p.client_wire
        wire.wait_for(
            lambda w: len(notifications(w.received, "notifications/resources/list_changed")) == 2,
            "list_changed after remove",
        )
        assert "live://new" not in [r.uri for r in p.client.list_resources(timeout=WAIT)]
        with pytest.raises(McpError) as info:
            p.client.read_resource("live://new", timeout=WAIT)
        assert info.value.code == RESOURCE_NOT_FOUND


# -- context and cancellation ----------------------------------------------------------------
def test_resource_handler_gets_a_context():
    server = Server("ctx")
    seen = {}

    @server.resource("ctx://{name}")
    def with_ctx(name: str, ctx: Context) -> str:
        seen.update(method=ctx.method, request_id=ctx.request_id, cancelled=ctx.cancelled)
        ctx.info(f"reading {name}")
        return name

    logs = Collector()
    with pair(server, on_log=logs) as p:
        pending = p.client.submit("resources/read", {"uri": "ctx://x"}, timeout=WAIT)
        assert pending.result(WAIT).contents[0].text == "x"
        assert seen == {
            "method": "resources/read",
            "request_id": pending.request_id,
            "cancelled": False,
        }
        assert (
            logs.wait_for(lambda m: m.get("data") == "reading x", "the handler's log")["level"]
            == "info"
        )


def test_cancelled_resource_read_fires_the_token_and_writes_no_response():
    server = Server("cancel-read")
    started, stopped = threading.Event(), threading.Event()
    outcome = {}

    @server.resource("slow://thing")
    def slow(ctx: Context) -> str:
        started.set()
        outcome["cancelled"] = ctx.wait(WAIT)
        outcome["reason"] = ctx.cancel_token.reason
        stopped.set()
        return "too late"

    @server.resource("fast://thing")
    def fast() -> str:
        return "fast"

    # one server worker: the follow-up read runs only after the cancelled one is fully done
    with pair(server, server_workers=1) as p:
        call = p.client.submit("resources/read", {"uri": "slow://thing"})
        wait_event(started, "the resource handler to start")
        assert call.cancel("user gave up") is True
        wait_event(stopped, "the handler to see its cancellation")
        assert outcome == {"cancelled": True, "reason": "user gave up"}
        with pytest.raises(concurrent.futures.CancelledError):
            call.result(WAIT)

        assert p.client.read_resource("fast://thing", timeout=WAIT).contents[0].text == "fast"
        sent = p.server_wire.snapshot()[0]
        assert responses_to(sent, call.request_id) == [], "a cancelled read must never be answered"
        assert p.client.endpoint.dropped["late response after cancellation"] == 0
        cancels = [
            m for m in p.client_wire.snapshot()[0] if m.get("method") == "notifications/cancelled"
        ]
        assert cancels == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": call.request_id, "reason": "user gave up"},
            }
        ]
