"""Server-to-client requests made through ``ctx.session`` (roots, sampling, elicitation in
form and URL modes), their timeouts and capability checks, and cancellation across the
nesting: when the handler's own request is cancelled (or a nested request times out), the
nested request is cancelled on the wire, the client's handler sees its token fire, and the
client writes no response for it.

The "no response was written" checks use one worker on each side (see support.sessions): a
follow-up request is handled only after the cancelled one is completely finished, so once its
answer is back, anything the cancelled request could have written is already recorded.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from support.messages import as_wire, cancels_of, notifications, requests, responses_to
from support.probes import Collector
from support.sessions import pair
from support.waiting import WAIT, wait_event

from mcp_sync import Cancelled, Context, McpError, Server

SAMPLE = {
    "role": "assistant",
    "content": {"type": "text", "text": "sampled!"},
    "model": "test-model",
    "stopReason": "endTurn",
}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class Blocker:
    """Client-side handlers that block the first ``blocking`` times they are called.

    ``roots()`` (no Context) blocks on :attr:`release`; ``handler(params, ctx)`` (sampling or
    elicitation) blocks on ``ctx.wait`` and records whether its token fired.
    """

    def __init__(self, blocking: int = 1) -> None:
        self.blocking = blocking
        self.calls = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()
        self.seen: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _should_block(self) -> bool:
        with self._lock:
            self.calls += 1
            return self.calls <= self.blocking

    def roots(self) -> list[str]:
        if self._should_block():
            self.started.set()
            self.seen["released"] = self.release.wait(WAIT)
            self.finished.set()
        return ["file:///workspace"]

    def handler(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        if self._should_block():
            self.seen["method"] = ctx.method
            self.started.set()
            self.seen["cancelled"] = ctx.wait(WAIT)
            self.seen["reason"] = ctx.cancel_token.reason
            self.finished.set()
        if ctx.method == "elicitation/create":
            return {"action": "accept", "content": {"name": "Ann"}}
        return SAMPLE


def asking_server() -> tuple[Server, dict[str, Any]]:
    """A server whose ``ask`` tool makes one nested request of the given kind."""
    server = Server("asking")
    state: dict[str, Any] = {"tool_saw": []}

    @server.tool()
    def ask(ctx: Context, kind: str, timeout: float | None = None) -> str:
        try:
            if kind == "roots":
                value: Any = ctx.session.list_roots(timeout=timeout)
            elif kind == "sampling":
                value = ctx.session.create_message(
                    [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                    max_tokens=50,
                    system_prompt="be brief",
                    timeout=timeout,
                )
            elif kind == "elicitation":
                value = ctx.session.elicit("Your name?", SCHEMA, timeout=timeout)
            elif kind == "elicitation-url":
                value = ctx.session.elicit(
                    "Sign in",
                    url="https://example.com/auth",
                    elicitation_id="el-1",
                    timeout=timeout,
                )
            else:
                raise ValueError(kind)
        except Exception as exc:  # recorded, then the tool fails with it
            state["tool_saw"].append(type(exc).__name__)
            raise
        state["tool_saw"].append("ok")
        return json.dumps(as_wire(value))  # as_wire: the session returned mcp_types models

    return server, state


def tool_text(result) -> str:
    return result.content[0].text


# -- answered requests -----------------------------------------------------------------------
def test_list_roots_from_a_list_with_paths_turned_into_file_uris(tmp_path):
    spaced = tmp_path / "my project"
    server, _ = asking_server()
    roots = [
        str(spaced),
        spaced / "sub",
        {"uri": "file:///data", "name": "Data"},
        "file://host/repo",
    ]
    with pair(server, roots=roots) as p:
        assert p.session.peer_capabilities["roots"] == {"listChanged": True}
        got = json.loads(
            tool_text(p.client.call_tool("ask", {"kind": "roots", "timeout": WAIT}, timeout=WAIT))
        )
        assert got == [
            {"uri": spaced.as_uri()},
            {"uri": (spaced / "sub").as_uri()},
            {"uri": "file:///data", "name": "Data"},
            {"uri": "file://host/repo"},
        ]
        assert got[0]["uri"].startswith("file:///") and "my%20project" in got[0]["uri"]


def test_list_roots_relative_path_is_made_absolute():
    server, _ = asking_server()
    with pair(server, roots=["relative/dir"]) as p:
        got = json.loads(tool_text(p.client.call_tool("ask", {"kind": "roots"}, timeout=WAIT)))
        assert got == [{"uri": Path(os.path.abspath("relative/dir")).as_uri()}]


def test_list_roots_from_a_callable_and_set_roots_notifies_the_server():
    server, _ = asking_server()
    current = [{"uri": "file:///one", "name": "one"}]
    with pair(server, roots=lambda: list(current)) as p:
        changed = threading.Event()
        p.session.on_roots_changed = changed.set
        assert (
            json.loads(tool_text(p.client.call_tool("ask", {"kind": "roots"}, timeout=WAIT)))
            == current
        )
        current.append({"uri": "file:///two"})  # a callable is asked each time
        assert json.loads(tool_text(p.client.call_tool("ask", {"kind": "roots"}, timeout=WAIT)))[
            -1
        ] == {"uri": "file:///two"}

        p.client.set_roots(["file:///three"])
        wait_event(changed, "the server's on_roots_changed callback")
        assert notifications(p.client_wire.snapshot()[0], "notifications/roots/list_changed") == [
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
        ]
        assert json.loads(
            tool_text(p.client.call_tool("ask", {"kind": "roots"}, timeout=WAIT))
        ) == [{"uri": "file:///three"}]


def test_create_message_is_answered_by_the_sampling_handler():
    server, _ = asking_server()
    calls = []

    def sampling(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        calls.append((params, ctx.method, ctx.cancelled, ctx.request_id))
        return SAMPLE

    with pair(server, sampling_handler=sampling) as p:
        assert "sampling" in p.session.peer_capabilities
        got = json.loads(
            tool_text(
                p.client.call_tool("ask", {"kind": "sampling", "timeout": WAIT}, timeout=WAIT)
            )
        )
        assert got == SAMPLE
        [(params, method, cancelled, request_id)] = calls
        assert params == {
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            "maxTokens": 50,
            "systemPrompt": "be brief",
        }
        assert (method, cancelled) == ("sampling/createMessage", False)
        assert (
            request_id == requests(p.client_wire.snapshot()[1], "sampling/createMessage")[0]["id"]
        )


def test_create_message_sends_extra_params_and_takes_every_call_option():
    """``extra_params`` reach the wire by their own names; ``on_progress`` (one of the call
    options every request takes) adds a progress token and sees the client's progress."""
    server = Server("extra")
    progress: list[tuple[float, Any, Any]] = []
    progress_seen = threading.Event()

    def on_progress(done: float, total: Any, message: Any) -> None:
        progress.append((done, total, message))
        progress_seen.set()

    @server.tool()
    def ask(ctx: Context) -> str:
        ctx.session.ping(timeout=WAIT)
        result = ctx.session.create_message(
            [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            max_tokens=5,
            extra_params={"temperature": 0.25, "stopSequences": ["END"]},
            timeout=None,  # no timeout: waits for ever (the handler's token still ends it)
            on_progress=on_progress,
        )
        # progress callbacks run on the callback thread, perhaps after the answer was read
        wait_event(progress_seen, "the progress callback")
        return result.model

    def sampling(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        assert ctx.report_progress(1, 2, "half")
        return SAMPLE

    with pair(server, sampling_handler=sampling) as p:
        assert tool_text(p.client.call_tool("ask", timeout=WAIT)) == "test-model"
        [sent] = requests(p.client_wire.snapshot()[1], "sampling/createMessage")
        assert sent["params"]["temperature"] == 0.25 and sent["params"]["stopSequences"] == ["END"]
        assert "progressToken" in sent["params"]["_meta"]
        assert progress == [(1, 2, "half")]


def test_elicit_form_mode_is_answered_by_the_elicitation_handler():
    server, _ = asking_server()
    calls = []

    def elicitation(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        calls.append(params)
        return {"action": "accept", "content": {"name": "Ann"}}

    with pair(server, elicitation_handler=elicitation) as p:
        got = json.loads(
            tool_text(
                p.client.call_tool("ask", {"kind": "elicitation", "timeout": WAIT}, timeout=WAIT)
            )
        )
        assert got == {"action": "accept", "content": {"name": "Ann"}}
        assert calls == [{"message": "Your name?", "requestedSchema": SCHEMA}]


def test_elicit_url_mode_is_answered_by_the_elicitation_handler():
    server, _ = asking_server()
    calls = []

    def elicitation(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        calls.append(params)
        return {"action": "accept"}

    with pair(server, elicitation_handler=elicitation) as p:
        assert p.session.peer_capabilities["elicitation"] == {"form": {}, "url": {}}
        result = p.client.call_tool("ask", {"kind": "elicitation-url"}, timeout=WAIT)
        assert not result.is_error, tool_text(result)
        assert json.loads(tool_text(result)) == {"action": "accept"}
        assert calls == [
            {
                "message": "Sign in",
                "mode": "url",
                "url": "https://example.com/auth",
                "elicitationId": "el-1",
            }
        ]


# -- capability checks -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "kind, capability",
    [
        ("roots", "roots"),
        ("sampling", "sampling"),
        ("elicitation", "elicitation"),
        ("elicitation-url", "elicitation"),
    ],
)
def test_undeclared_client_capability_is_a_tool_error_and_nothing_is_sent(kind, capability):
    server, state = asking_server()
    with pair(server) as p:
        assert p.client.capabilities() == {}
        result = p.client.call_tool("ask", {"kind": kind}, timeout=WAIT)
        assert result.is_error
        assert capability in tool_text(result)
        assert state["tool_saw"] == ["CapabilityError"]
        sent = p.server_wire.snapshot()[0]
        assert [
            m
            for m in sent
            if m.get("method") in ("roots/list", "sampling/createMessage", "elicitation/create")
        ] == []


def test_url_mode_needs_the_url_sub_capability():
    """A client declaring only form-mode elicitation cannot be asked in URL mode."""
    server, state = asking_server()
    with pair(server, elicitation_handler=lambda params, ctx: {"action": "decline"}) as p:
        p.session.peer_capabilities = {
            "elicitation": {"form": {}}
        }  # as an older/form-only client would declare
        result = p.client.call_tool("ask", {"kind": "elicitation-url"}, timeout=WAIT)
        assert result.is_error and "url" in tool_text(result).lower()
        assert state["tool_saw"] == ["CapabilityError"]
        # form mode still works
        assert json.loads(
            tool_text(p.client.call_tool("ask", {"kind": "elicitation"}, timeout=WAIT))
        ) == {"action": "decline"}


def test_client_without_a_handler_answers_method_not_found():
    server = Server("raw")
    got: dict[str, Any] = {}

    @server.tool()
    def raw(ctx: Context, method: str) -> str:
        # bypasses the capability check on purpose
        try:
            ctx.session.session.submit(method, {"messages": [], "maxTokens": 1}).result(WAIT)
        except McpError as exc:
            got[method] = exc.code
        return "done"

    with pair(server) as p:
        for method in (
            "roots/list",
            "sampling/createMessage",
            "elicitation/create",
            "unknown/thing",
        ):
            p.client.call_tool("raw", {"method": method}, timeout=WAIT)
        assert got == {
            "roots/list": -32601,
            "sampling/createMessage": -32601,
            "elicitation/create": -32601,
            "unknown/thing": -32601,
        }


# -- timeouts of nested requests -------------------------------------------------------------
@pytest.mark.parametrize("kind", ["roots", "sampling", "elicitation"])
def test_nested_request_timeout_cancels_it_on_the_wire_and_the_client_never_answers(kind):
    server, state = asking_server()
    blocker = Blocker()
    options: dict[str, Any] = {"roots": blocker.roots}
    if kind == "sampling":
        options["sampling_handler"] = blocker.handler
    if kind == "elicitation":
        options["elicitation_handler"] = blocker.handler
    method = {
        "roots": "roots/list",
        "sampling": "sampling/createMessage",
        "elicitation": "elicitation/create",
    }[kind]
    try:
        with pair(server, server_workers=1, max_workers=1, **options) as p:
            result = p.client.call_tool("ask", {"kind": kind, "timeout": 0.3}, timeout=WAIT)
            assert result.is_error
            assert "timed out" in tool_text(result)
            assert state["tool_saw"] == ["RequestTimeout"]
            [nested] = requests(p.client_wire.snapshot()[1], method)
            p.client_wire.wait_for(
                lambda w: cancels_of(w.received, nested["id"]),
                f"notifications/cancelled for the nested {method}",
            )
            if kind == "roots":
                blocker.release.set()  # the roots callable cannot see the cancellation
            wait_event(blocker.finished, "the client handler to finish")
            if kind != "roots":
                assert blocker.seen == {
                    "method": method,
                    "cancelled": True,
                    "reason": blocker.seen["reason"],
                }
                assert "timed out" in blocker.seen["reason"]
            # follow-up nested request: with one client worker it runs after the cancelled one
            assert json.loads(
                tool_text(p.client.call_tool("ask", {"kind": "roots"}, timeout=WAIT))
            ) == [{"uri": "file:///workspace"}]
            assert responses_to(p.client_wire.snapshot()[0], nested["id"]) == [], (
                "the client answered a cancelled request"
            )
            assert p.session.endpoint.dropped["late response after cancellation"] == 0
    finally:
        blocker.release.set()


# -- THE key tests: cancelling the handler's own request cancels the nested one ---------------
def test_cancelling_the_tool_cancels_its_nested_roots_request_on_the_wire():
    server, state = asking_server()
    blocker = Blocker()
    try:
        with pair(server, server_workers=1, max_workers=1, roots=blocker.roots) as p:
            call = p.client.call_tool_future("ask", {"kind": "roots"})
            wait_event(blocker.started, "the client's roots callable to be called")
            [nested] = requests(p.client_wire.snapshot()[1], "roots/list")

            assert call.cancel("no longer needed") is True
            cancel = p.client_wire.wait_for(
                lambda w: cancels_of(w.received, nested["id"]),
                "notifications/cancelled for the nested roots/list",
            )
            assert cancel[0]["params"]["requestId"] == nested["id"]
            with pytest.raises(concurrent.futures.CancelledError):
                call.result(WAIT)

            blocker.release.set()
            wait_event(blocker.finished, "the roots callable to return")
            # one worker on each side: both follow-ups run after the cancelled work is done
            assert json.loads(
                tool_text(p.client.call_tool("ask", {"kind": "roots"}, timeout=WAIT))
            ) == [{"uri": "file:///workspace"}]
            assert state["tool_saw"] == ["Cancelled", "ok"]
            assert responses_to(p.client_wire.snapshot()[0], nested["id"]) == [], (
                "the client answered the cancelled roots/list"
            )
            assert responses_to(p.server_wire.snapshot()[0], call.request_id) == [], (
                "the server answered the cancelled tool call"
            )
            assert p.session.endpoint.dropped["late response after cancellation"] == 0
            assert p.client.endpoint.dropped["late response after cancellation"] == 0
            # the nested request is cancelled exactly once, and never by the client
            assert len(cancels_of(p.client_wire.snapshot()[1], nested["id"])) == 1
            assert cancels_of(p.server_wire.snapshot()[1], call.request_id) != []
    finally:
        blocker.release.set()


@pytest.mark.parametrize("kind", ["sampling", "elicitation"])
def test_cancelling_the_tool_fires_the_client_handlers_token_and_the_client_never_answers(kind):
    server, state = asking_server()
    blocker = Blocker()
    method = "sampling/createMessage" if kind == "sampling" else "elicitation/create"
    options = (
        {"sampling_handler": blocker.handler}
        if kind == "sampling"
        else {"elicitation_handler": blocker.handler}
    )
    with pair(server, server_workers=1, max_workers=1, roots=["file:///workspace"], **options) as p:
        call = p.client.call_tool_future("ask", {"kind": kind})
        wait_event(blocker.started, f"the client's {kind} handler to start")
        [nested] = requests(p.client_wire.snapshot()[1], method)

        assert call.cancel("user pressed stop") is True
        wait_event(blocker.finished, f"the {kind} handler to see its token fire")
        assert blocker.seen["method"] == method
        assert blocker.seen["cancelled"] is True, "the client handler's token must fire"
        assert cancels_of(p.client_wire.snapshot()[1], nested["id"]), (
            "the nested request must be cancelled on the wire"
        )

        assert json.loads(
            tool_text(p.client.call_tool("ask", {"kind": "roots"}, timeout=WAIT))
        ) == [{"uri": "file:///workspace"}]
        assert state["tool_saw"] == ["Cancelled", "ok"]
        assert responses_to(p.client_wire.snapshot()[0], nested["id"]) == [], (
            f"the client answered the cancelled {method}"
        )
        assert responses_to(p.server_wire.snapshot()[0], call.request_id) == []
        assert p.session.endpoint.dropped["late response after cancellation"] == 0


def test_nested_request_with_its_own_cancel_token():
    """A token passed to ctx.session.create_message cancels only that request; the tool
    goes on and answers."""
    from mcp_sync import CancelToken

    server = Server("own-token")
    blocker = Blocker()
    own = CancelToken()

    @server.tool()
    def ask_then_recover(ctx: Context) -> str:
        try:
            ctx.session.create_message(
                [{"role": "user", "content": {"type": "text", "text": "x"}}],
                max_tokens=5,
                cancel_token=own,
            )
        except Cancelled:
            return "recovered"
        return "not cancelled"

    with pair(server, sampling_handler=blocker.handler) as p:
        call = p.client.call_tool_future("ask_then_recover")
        wait_event(blocker.started, "the sampling handler to start")
        own.cancel("changed my mind")
        wait_event(blocker.finished, "the sampling handler to see its token fire")
        assert blocker.seen["cancelled"] is True and blocker.seen["reason"] == "changed my mind"
        result = call.result(WAIT)
        assert result.content[0].text == "recovered"


# -- client callbacks ----------------------------------------------------------------------------
def test_on_notification_sees_list_changes_updates_and_logs():
    server = Server("notifying")

    @server.resource("res://a")
    def a() -> str:
        return "a"

    @server.tool()
    def shout(ctx: Context) -> str:
        ctx.warning("careful")
        return "ok"

    notes, logs = Collector(), Collector()
    with pair(server, on_notification=notes, on_log=logs) as p:
        p.client.subscribe("res://a", timeout=WAIT)
        server.add_tool(lambda: "t", name="new_tool")
        server.notify_resource_updated("res://a")
        p.client.call_tool("shout", timeout=WAIT)
        logs.wait_for(lambda m: m.get("data") == "careful", "the log callback")
        notes.wait_for(lambda n: n[0] == "notifications/message", "the log notification")
        assert [n[0] for n in notes.snapshot()] == [
            "notifications/tools/list_changed",
            "notifications/resources/updated",
            "notifications/message",
        ]
        assert notes.snapshot()[1] == ("notifications/resources/updated", {"uri": "res://a"})
        assert logs.snapshot() == [{"level": "warning", "data": "careful"}]
