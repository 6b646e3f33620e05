"""Server tools and the handler Context, over the in-memory pair.

Schemas from type hints, results of every shape, tool errors, pagination, list_changed, and
the Context handed to handlers: cancellation, progress, logging, request id.
"""

from __future__ import annotations

import threading
from typing import Annotated, Any

import mcp_types
import pytest
from pydantic import BaseModel, Field
from support.messages import responses_to, with_method
from support.probes import HandlerProbe
from support.sessions import connected
from support.waiting import WAIT, wait_event

from mcp_sync import Cancelled, CancelToken, Context, McpError, Server
from mcp_sync.server.pagination import decode_cursor, encode_cursor


def tool_by_name(client, name: str) -> mcp_types.Tool:
    tools = {tool.name: tool for tool in client.list_tools(timeout=WAIT)}
    return tools[name]


# -- input schemas ------------------------------------------------------------------------------
def test_input_schema_from_type_hints_docstring_and_annotated():
    server = Server("schemas")

    @server.tool()
    def search(
        query: str,
        limit: Annotated[int, "How many results at most"] = 10,
        exact: bool = False,
        tags: list[str] | None = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> str:
        """Search the catalogue.

        More text that is not part of the summary.

        Args:
            query: What to look for,
                over two lines.
            exact: Match the whole phrase.
        """
        return query

    with connected(server) as conn:
        tool = tool_by_name(conn.client, "search")
        assert tool.description == "Search the catalogue."
        schema = (
            tool.input_schema.model_dump(by_alias=True, exclude_none=True)
            if hasattr(tool.input_schema, "model_dump")
            else dict(tool.input_schema)
        )
        assert schema["type"] == "object"
        props = schema["properties"]
        assert set(props) == {"query", "limit", "exact", "tags"}, (
            "the Context parameter must not be an argument"
        )
        assert props["query"]["type"] == "string"
        assert props["query"]["description"] == "What to look for, over two lines."
        assert props["limit"]["type"] == "integer"
        assert props["limit"]["default"] == 10
        assert props["limit"]["description"] == "How many results at most"
        assert props["exact"]["type"] == "boolean"
        assert props["exact"]["description"] == "Match the whole phrase."
        assert props["exact"]["default"] is False
        assert schema["required"] == ["query"]


def test_pydantic_field_description_and_sphinx_docstring():
    server = Server("schemas")

    @server.tool(
        name="renamed",
        description="Explicit description",
        title="Nice title",
        annotations={"readOnlyHint": True},
    )
    def original(
        count: Annotated[int, Field(description="from Field", ge=0)], label: str = "x"
    ) -> str:
        """Ignored summary.

        :param label: from sphinx
        """
        return label * count

    with connected(server) as conn:
        tools = conn.client.list_tools(timeout=WAIT)
        assert [tool.name for tool in tools] == ["renamed"]
        tool = tools[0]
        assert tool.description == "Explicit description"
        assert tool.title == "Nice title"
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        wire = conn.client.request("tools/list", timeout=WAIT)["tools"][0]
        props = wire["inputSchema"]["properties"]
        assert props["count"]["description"] == "from Field"
        assert props["count"]["minimum"] == 0
        assert props["label"]["description"] == "from sphinx"
        assert wire["inputSchema"]["required"] == ["count"]
        # a Field constraint is enforced: a tool error that names the argument and the bound
        rejected = conn.client.call_tool("renamed", {"count": -1}, timeout=WAIT)
        assert rejected.is_error is True
        assert rejected.content[0].text == (
            "Invalid arguments for tool 'renamed': count: Input should be greater than or equal to 0 (got -1)"
        )
        assert conn.client.call_tool("renamed", {"count": 2}, timeout=WAIT).content[0].text == "xx"


def test_a_tool_without_parameters_has_an_empty_object_schema():
    server = Server("schemas")

    @server.tool()
    def nothing() -> None:
        pass

    with connected(server) as conn:
        wire = conn.client.request("tools/list", timeout=WAIT)["tools"][0]
        assert wire["inputSchema"]["type"] == "object"
        assert wire["inputSchema"]["properties"] == {}
        assert "outputSchema" not in wire
        result = conn.client.call_tool("nothing", timeout=WAIT)
        assert result.content == [] and result.is_error is not True


def test_var_args_are_refused_at_registration():
    server = Server("schemas")
    with pytest.raises(TypeError, match="kwargs"):

        @server.tool()
        def bad(**kwargs: Any) -> str:
            return ""

    with pytest.raises(ValueError):
        server.add_tool(lambda: "", name="bad_timeout", timeout=0)


# -- results -------------------------------------------------------------------------------------
class Weather(BaseModel):
    city: str
    celsius: float


def results_server() -> Server:
    server = Server("results")

    @server.tool()
    def text() -> str:
        return "plain text"

    @server.tool()
    def weather(city: str) -> Weather:
        return Weather(city=city, celsius=21.5)

    @server.tool()
    def count(n: int) -> int:
        return n * 2

    @server.tool()
    def listing() -> list[str]:
        return ["a", "b"]

    @server.tool()
    def mapping() -> dict[str, int]:
        return {"x": 1}

    @server.tool()
    def image() -> dict:
        return {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}

    @server.tool()
    def blocks() -> list[mcp_types.TextContent]:
        return [
            mcp_types.TextContent(type="text", text="one"),
            mcp_types.TextContent(type="text", text="two"),
        ]

    @server.tool(structured_output=False)
    def unstructured() -> int:
        return 7

    @server.tool()
    def raw_result() -> dict:
        return {"content": [{"type": "text", "text": "custom"}], "isError": True}

    @server.tool()
    def fails(why: str) -> str:
        raise RuntimeError(f"it broke: {why}")

    @server.tool()
    def fails_silently() -> str:
        raise KeyError()

    return server


def test_str_becomes_one_text_block():
    with connected(results_server()) as conn:
        result = conn.client.call_tool("text", timeout=WAIT)
        assert [(c.type, c.text) for c in result.content] == [("text", "plain text")]
        assert result.structured_content is None
        assert result.is_error is not True
        assert tool_by_name(conn.client, "text").output_schema is None


def test_pydantic_model_becomes_structured_content_with_output_schema():
    with connected(results_server()) as conn:
        result = conn.client.call_tool("weather", {"city": "Oslo"}, timeout=WAIT)
        assert result.structured_content == {"city": "Oslo", "celsius": 21.5}
        assert '"city": "Oslo"' in result.content[0].text  # the JSON as text, for old clients
        schema = conn.client.request("tools/list", timeout=WAIT)["tools"]
        out = {t["name"]: t.get("outputSchema") for t in schema}["weather"]
        assert out["type"] == "object"
        assert set(out["properties"]) == {"city", "celsius"}
        assert sorted(out["required"]) == ["celsius", "city"]


def test_int_result_is_wrapped_as_result():
    with connected(results_server()) as conn:
        result = conn.client.call_tool("count", {"n": 21}, timeout=WAIT)
        assert result.structured_content == {"result": 42}
        assert result.content[0].text == "42"
        tools = {t["name"]: t for t in conn.client.request("tools/list", timeout=WAIT)["tools"]}
        assert tools["count"]["outputSchema"] == {
            "type": "object",
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
        }
        assert conn.client.call_tool("listing", timeout=WAIT).structured_content == {
            "result": ["a", "b"]
        }
        assert tools["listing"]["outputSchema"]["properties"]["result"]["type"] == "array"
        # structured_output=False: no schema, no structured content
        assert "outputSchema" not in tools["unstructured"]
        plain = conn.client.call_tool("unstructured", timeout=WAIT)
        assert plain.structured_content is None and plain.content[0].text == "7"


def test_dict_result_is_structured_without_wrapping():
    with connected(results_server()) as conn:
        result = conn.client.call_tool("mapping", timeout=WAIT)
        assert result.structured_content == {"x": 1}


def test_content_blocks_are_returned_as_is():
    with connected(results_server()) as conn:
        image = conn.client.call_tool("image", timeout=WAIT)
        assert len(image.content) == 1
        block = image.content[0]
        assert block.type == "image" and block.data == "aGVsbG8=" and block.mime_type == "image/png"
        assert image.structured_content is None
        blocks = conn.client.call_tool("blocks", timeout=WAIT)
        assert [(c.type, c.text) for c in blocks.content] == [("text", "one"), ("text", "two")]
        assert blocks.structured_content is None
        raw = conn.client.call_tool("raw_result", timeout=WAIT)
        assert raw.is_error is True and raw.content[0].text == "custom"


def test_a_tool_that_raises_is_an_error_result():
    with connected(results_server()) as conn:
        result = conn.client.call_tool("fails", {"why": "on purpose"}, timeout=WAIT)
        assert result.is_error is True
        assert result.content[0].text == "it broke: on purpose"
        # an exception without a message still says what happened
        silent = conn.client.call_tool("fails_silently", timeout=WAIT)
        assert silent.is_error is True and silent.content[0].text
        # the connection stays usable
        assert conn.client.call_tool("text", timeout=WAIT).content[0].text == "plain text"


def test_unknown_tool_is_invalid_params():
    with connected(results_server()) as conn:
        with pytest.raises(McpError) as info:
            conn.client.call_tool("no_such_tool", timeout=WAIT)
        assert info.value.code == -32602
        assert "no_such_tool" in info.value.message


@pytest.mark.parametrize(
    "arguments,problem",
    [
        ({}, "city: required argument missing"),
        ({"city": 12}, "city: Input should be a valid string (got 12)"),
        ({"city": None}, "city: Input should be a valid string (got None)"),
    ],
)
def test_invalid_arguments_are_a_tool_error_naming_the_argument(arguments, problem):
    # 2025-11-25 (SEP-1303): the model can read a tool error and correct its call
    with connected(results_server()) as conn:
        result = conn.client.call_tool("weather", arguments, timeout=WAIT)
        assert result.is_error is True
        assert result.content[0].text == f"Invalid arguments for tool 'weather': {problem}"
        assert result.structured_content is None
        [call] = with_method(conn.wire.received, "tools/call")
        [answer] = responses_to(conn.wire.sent, call["id"])
        assert "error" not in answer and answer["result"]["isError"] is True


def test_every_invalid_argument_is_named_in_one_tool_error():
    server = Server("many")

    @server.tool()
    def book(room: int, nights: int, guest: str) -> str:
        return "booked"

    with connected(server) as conn:
        result = conn.client.call_tool("book", {"room": "twelve", "nights": 1.5}, timeout=WAIT)
        assert result.is_error is True
        text = result.content[0].text
        assert "room: Input should be a valid integer" in text and "(got 'twelve')" in text
        assert (
            "nights: Input should be a valid integer, got a number with a fractional part (got 1.5)"
            in text
        )
        assert "guest: required argument missing" in text


def test_a_malformed_call_tool_request_stays_invalid_params():
    with connected(results_server()) as conn:
        with pytest.raises(McpError) as info:
            conn.client.request("tools/call", {"name": "count", "arguments": [1]}, timeout=WAIT)
        assert info.value.code == -32602
        with pytest.raises(McpError) as info:
            conn.client.request("tools/call", {"arguments": {}}, timeout=WAIT)
        assert info.value.code == -32602
        with pytest.raises(McpError) as info:
            conn.client.request("tools/call", {"name": 7, "arguments": {}}, timeout=WAIT)
        assert info.value.code == -32602
        # the connection stays up
        assert conn.client.call_tool("count", {"n": 2}, timeout=WAIT).structured_content == {
            "result": 4
        }


# -- pagination ----------------------------------------------------------------------------------
def five_tools(page_size: int = 2) -> Server:
    server = Server("paged", page_size=page_size)
    for i in range(5):
        server.add_tool(lambda i=i: f"tool {i}", name=f"t{i}")
    return server


def test_list_tools_follows_every_page():
    with connected(five_tools()) as conn:
        tools = conn.client.list_tools(timeout=WAIT)
        assert [t.name for t in tools] == ["t0", "t1", "t2", "t3", "t4"]
        assert len(with_method(conn.wire.received, "tools/list")) == 3


def test_list_tools_page_returns_one_page_and_a_cursor():
    with connected(five_tools()) as conn:
        first = conn.client.list_tools_page(timeout=WAIT)
        assert [t.name for t in first.tools] == ["t0", "t1"]
        assert first.next_cursor
        second = conn.client.list_tools_page(first.next_cursor, timeout=WAIT)
        assert [t.name for t in second.tools] == ["t2", "t3"]
        third = conn.client.list_tools_page(second.next_cursor, timeout=WAIT)
        assert [t.name for t in third.tools] == ["t4"]
        assert third.next_cursor is None


@pytest.mark.parametrize(
    "cursor", ["not a cursor", encode_cursor(0)[:-3] + "###", "eyJvIjogLTF9", "bnVsbA=="]
)
def test_bad_cursor_is_invalid_params(cursor):
    with connected(five_tools()) as conn:
        with pytest.raises(McpError) as info:
            conn.client.list_tools_page(cursor, timeout=WAIT)
        assert info.value.code == -32602


def test_cursor_round_trip():
    assert decode_cursor(encode_cursor(4)) == 4
    assert decode_cursor(None) == 0


def test_exact_page_boundary_has_no_cursor():
    with connected(five_tools(page_size=5)) as conn:
        page = conn.client.list_tools_page(timeout=WAIT)
        assert len(page.tools) == 5 and page.next_cursor is None


# -- list_changed --------------------------------------------------------------------------------
def test_tools_list_changed_when_tools_are_added_and_removed():
    server = Server("dynamic")

    @server.tool()
    def first() -> str:
        return "1"

    seen: list[str] = []
    changed = threading.Event()

    def on_notification(method: str, params: dict) -> None:
        seen.append(method)
        if method == "notifications/tools/list_changed":
            changed.set()

    with connected(server, on_notification=on_notification) as conn:
        assert [t.name for t in conn.client.list_tools(timeout=WAIT)] == ["first"]
        assert not with_method(conn.wire.sent, "notifications/tools/list_changed")

        server.add_tool(lambda: "2", name="second")
        wait_event(changed, "list_changed after add_tool")
        assert [t.name for t in conn.client.list_tools(timeout=WAIT)] == ["first", "second"]
        assert conn.client.call_tool("second", timeout=WAIT).content[0].text == "2"

        changed.clear()
        server.remove_tool("first")
        wait_event(changed, "list_changed after remove_tool")
        assert [t.name for t in conn.client.list_tools(timeout=WAIT)] == ["second"]
        with pytest.raises(McpError) as info:
            conn.client.call_tool("first", timeout=WAIT)
        assert info.value.code == -32602
        assert seen.count("notifications/tools/list_changed") == 2


def test_list_changed_goes_to_every_connected_client():
    server = Server("dynamic")
    events = [threading.Event(), threading.Event()]

    def watcher(event):
        return lambda method, params: (
            event.set() if method == "notifications/tools/list_changed" else None
        )

    with (
        connected(server, on_notification=watcher(events[0])),
        connected(server, on_notification=watcher(events[1])),
    ):
        assert len(server.sessions()) == 2
        server.add_tool(lambda: "x", name="late")
        wait_event(events[0], "list_changed at client 1")
        wait_event(events[1], "list_changed at client 2")
    assert server.sessions() == []


# -- Context: cancellation ------------------------------------------------------------------------
def test_context_sees_the_clients_cancellation():
    server = Server("ctx")
    probe = HandlerProbe()
    callback_calls: list[str] = []
    callback_ran = threading.Event()

    @server.tool()
    def waiter(ctx: Context) -> str:
        def on_cancel() -> None:
            callback_calls.append(threading.current_thread().name)
            callback_ran.set()

        ctx.on_cancel(on_cancel)
        probe.values["before"] = ctx.cancelled
        probe.values["token"] = ctx.cancel_token
        probe.started.set()
        try:
            probe.values["wait"] = ctx.wait(WAIT)
            probe.values["after"] = ctx.cancelled
            try:
                ctx.raise_if_cancelled()
                probe.values["raised"] = None
            except Cancelled as exc:
                probe.values["raised"] = exc
            late: list[bool] = []
            ctx.on_cancel(lambda: late.append(True))  # already cancelled: runs at once
            probe.values["late_callback_ran_at_once"] = late == [True]
            return "ignored"
        finally:
            probe.finished.set()

    with connected(server) as conn:
        pending = conn.client.call_tool_future("waiter")
        wait_event(probe.started, "the handler to start")
        assert probe.values["before"] is False
        assert isinstance(probe.values["token"], CancelToken)
        assert pending.cancel("user pressed stop") is True
        wait_event(probe.finished, "the handler to see the cancellation")
        wait_event(callback_ran, "the on_cancel callback")
        assert probe.values["wait"] is True
        assert probe.values["after"] is True
        assert isinstance(probe.values["raised"], Cancelled)
        assert probe.values["token"].reason == "user pressed stop"
        assert probe.values["late_callback_ran_at_once"] is True
        with pytest.raises(Cancelled):
            pending.result(WAIT)
        conn.barrier()
        assert not responses_to(conn.wire.sent, pending.request_id), (
            "a cancelled request was answered"
        )
    # closing the connection did not run the callback again
    assert len(callback_calls) == 1
    assert "reader" not in callback_calls[0], "on_cancel must not run on the reader thread"


def test_on_cancel_runs_while_every_worker_is_blocked():
    """The callback must not wait for a free worker: it is what unblocks the busy one."""
    server = Server("ctx", max_workers=1)
    started, unblocked = threading.Event(), threading.Event()

    @server.tool()
    def blocking_io(ctx: Context) -> str:
        ctx.on_cancel(unblocked.set)  # e.g. close the socket the handler is blocked on
        started.set()
        unblocked.wait(WAIT)  # blocked in "I/O" that knows nothing of the token
        return "ignored"

    with connected(server) as conn:
        pending = conn.client.call_tool_future("blocking_io")
        wait_event(started, "the only worker to block")
        assert pending.cancel("stop") is True
        wait_event(unblocked, "on_cancel to run while the only worker is busy")


@pytest.mark.parametrize("error", [RuntimeError("cleanup failed"), Cancelled("stopped")])
def test_a_handler_that_raises_after_its_cancellation_gets_no_response(error):
    """The cancellation won: not a result, not a JSON-RPC error, not a tool error."""
    server = Server("raiser", max_workers=1)
    started, finished = threading.Event(), threading.Event()

    @server.tool()
    def raiser(ctx: Context) -> str:
        started.set()
        try:
            ctx.wait(WAIT)
            raise error
        finally:
            finished.set()

    with connected(server) as conn:
        pending = conn.client.call_tool_future("raiser")
        wait_event(started, "the handler to start")
        assert pending.cancel("stop") is True
        wait_event(finished, "the handler to raise")
        conn.barrier()
        assert not responses_to(conn.wire.sent, pending.request_id), (
            "a cancelled request was answered"
        )
        assert conn.client.endpoint.dropped == {}


def test_on_cancel_does_not_run_for_a_request_that_completed():
    server = Server("ctx")
    calls: list[int] = []

    @server.tool()
    def quick(ctx: Context) -> str:
        ctx.on_cancel(lambda: calls.append(1))
        return "done"

    with connected(server) as conn:
        assert conn.client.call_tool("quick", timeout=WAIT).content[0].text == "done"
    assert calls == []


def test_context_request_id_and_method():
    server = Server("ctx")
    seen: dict[str, Any] = {}

    @server.tool()
    def who(ctx: Context) -> str:
        seen["id"], seen["method"], seen["progress_token"] = (
            ctx.request_id,
            ctx.method,
            ctx.progress_token,
        )
        return "ok"

    with connected(server) as conn:
        pending = conn.client.call_tool_future("who")
        pending.result(WAIT)
        assert seen["id"] == pending.request_id and type(seen["id"]) is int
        assert seen["method"] == "tools/call"
        assert seen["progress_token"] is None


# -- Context: progress -----------------------------------------------------------------------------
def progress_server(saved: dict[str, Any]) -> Server:
    server = Server("progress")

    @server.tool()
    def steps(ctx: Context) -> str:
        saved["ctx"] = ctx
        saved["sent"] = [
            ctx.report_progress(1, 3, "one"),
            ctx.report_progress(2, 3),
            ctx.report_progress(3.5, 3, "three and a half"),
        ]
        for bad in (3.5, 1):
            try:
                ctx.report_progress(bad)
            except ValueError as exc:
                saved.setdefault("errors", []).append(str(exc))
        return "ok"

    return server


def test_progress_reaches_the_caller_in_order():
    saved: dict[str, Any] = {}
    received: list[tuple] = []
    all_arrived = threading.Event()

    def on_progress(progress, total, message):
        received.append((progress, total, message))
        if len(received) == 3:
            all_arrived.set()

    with connected(progress_server(saved)) as conn:
        pending = conn.client.call_tool_future("steps", on_progress=on_progress)
        assert pending.result(WAIT).content[0].text == "ok"
        wait_event(all_arrived, "three progress notifications")
        assert received == [(1, 3, "one"), (2, 3, None), (3.5, 3, "three and a half")]
        assert saved["sent"] == [True, True, True]
        assert len(saved["errors"]) == 2 and all("increase" in e for e in saved["errors"])
        notes = with_method(conn.wire.sent, "notifications/progress")
        assert [n["params"]["progress"] for n in notes] == [1, 2, 3.5]
        assert {n["params"]["progressToken"] for n in notes} == {pending.request_id}
        # progress stops when the request ends
        assert saved["ctx"].report_progress(10) is False
        conn.barrier()
        assert len(with_method(conn.wire.sent, "notifications/progress")) == 3


def test_progress_is_not_sent_when_the_caller_did_not_ask():
    saved: dict[str, Any] = {}
    with connected(progress_server(saved)) as conn:
        assert conn.client.call_tool("steps", timeout=WAIT).content[0].text == "ok"
        assert saved["sent"] == [False, False, False]
        assert saved["ctx"].progress_token is None
        assert len(saved["errors"]) == 2, "the increasing check holds even when nothing is sent"
        conn.barrier()
        assert not with_method(conn.wire.sent, "notifications/progress")


# -- Context: logging ------------------------------------------------------------------------------
def test_log_messages_and_set_level():
    server = Server("logs")
    returned: list[bool] = []

    @server.tool()
    def talk(ctx: Context) -> str:
        returned.append(ctx.log("info", {"step": 1}, logger="worker"))
        returned.append(ctx.debug("details"))
        returned.append(ctx.error("bad thing"))
        try:
            ctx.log("loud", "x")
        except ValueError:
            returned.append(None)
        return "ok"

    logs: list[dict] = []
    got_error = threading.Event()

    def on_log(params: dict) -> None:
        logs.append(params)
        if params.get("level") == "error":
            got_error.set()

    with connected(server, on_log=on_log) as conn:
        conn.client.call_tool("talk", timeout=WAIT)
        wait_event(got_error, "the error log")
        assert returned == [True, True, True, None]
        assert logs == [
            {"level": "info", "data": {"step": 1}, "logger": "worker"},
            {"level": "debug", "data": "details"},
            {"level": "error", "data": "bad thing"},
        ]

        logs.clear()
        returned.clear()
        got_error.clear()
        assert conn.client.request("logging/setLevel", {"level": "error"}, timeout=WAIT) == {}
        conn.client.call_tool("talk", timeout=WAIT)
        wait_event(got_error, "the error log after setLevel")
        assert returned == [False, False, True, None]
        assert logs == [{"level": "error", "data": "bad thing"}]
        conn.barrier()
        sent = with_method(conn.wire.sent, "notifications/message")
        assert [m["params"]["level"] for m in sent] == ["info", "debug", "error", "error"]

        with pytest.raises(McpError) as info:
            conn.client.request("logging/setLevel", {"level": "verbose"}, timeout=WAIT)
        assert info.value.code == -32602


def test_custom_request_methods_are_served_after_initialization():
    server = Server("custom")
    seen: list[Any] = []

    def handler(session, request, token):
        seen.append((request.method, request.params, token.cancelled))
        return {"echo": request.params.get("x")}

    server.add_method("acme/echo", handler)
    with connected(server) as conn:
        assert conn.client.request("acme/echo", {"x": 7}, timeout=WAIT) == {"echo": 7}
        with pytest.raises(McpError) as info:
            conn.client.request("acme/unknown", timeout=WAIT)
        assert info.value.code == -32601
    assert seen == [("acme/echo", {"x": 7}, False)]
