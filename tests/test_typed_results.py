"""Typed results on every path: a future resolves to exactly what the blocking call returns.

Client side: ``submit()`` for each method of the protocol and ``call_tool_future()`` give the
same ``mcp_types`` model as the blocking method; ``request()``, ``raw=True`` and custom
methods stay raw dicts. Server side: ``ctx.session.list_roots()`` / ``create_message()`` /
``elicit()`` return models; ``client.server_info`` is an ``Implementation``.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

import mcp_types
import pydantic
import pytest
from support.messages import as_wire
from support.sessions import FakeServer, connected
from support.waiting import WAIT, wait_event

from mcp_sync import Client, Context, Server
from mcp_sync.results import CLIENT_REQUEST_RESULTS, SERVER_REQUEST_RESULTS


def full_server() -> Server:
    server = Server("typed", version="3.1")

    @server.tool()
    def square(n: int) -> int:
        return n * n

    @server.resource("memo://readme")
    def readme() -> str:
        return "read me"

    @server.resource("memo://notes/{name}")
    def note(name: str) -> str:
        return f"note {name}"

    @server.prompt()
    def greet(name: str) -> str:
        return f"Hello {name}"

    @server.completion("prompt:greet", "name")
    def names(value: str, context: dict[str, str]) -> list[str]:
        return [n for n in ("ann", "anna", "bob") if n.startswith(value)]

    return server


BlockingCall = Callable[[Client], Any]

TYPED_METHODS: dict[str, tuple[dict[str, Any] | None, BlockingCall]] = {
    "tools/list": (None, lambda c: c.list_tools_page(timeout=WAIT)),
    "tools/call": (
        {"name": "square", "arguments": {"n": 7}},
        lambda c: c.call_tool("square", {"n": 7}, timeout=WAIT),
    ),
    "resources/list": (None, lambda c: c.list_resources_page(timeout=WAIT)),
    "resources/templates/list": (None, lambda c: c.list_resource_templates_page(timeout=WAIT)),
    "resources/read": (
        {"uri": "memo://notes/x"},
        lambda c: c.read_resource("memo://notes/x", timeout=WAIT),
    ),
    "prompts/list": (None, lambda c: c.list_prompts_page(timeout=WAIT)),
    "prompts/get": (
        {"name": "greet", "arguments": {"name": "Ann"}},
        lambda c: c.get_prompt("greet", {"name": "Ann"}, timeout=WAIT),
    ),
    "completion/complete": (
        {
            "ref": {"type": "ref/prompt", "name": "greet"},
            "argument": {"name": "name", "value": "an"},
        },
        lambda c: c.complete({"type": "ref/prompt", "name": "greet"}, "name", "an", timeout=WAIT),
    ),
}
"""Each method with a typed blocking call: the params that call sends, and the call."""

EMPTY_METHODS: dict[str, tuple[dict[str, Any] | None, BlockingCall]] = {
    "ping": (None, lambda c: c.ping(timeout=WAIT)),
    "resources/subscribe": (
        {"uri": "memo://readme"},
        lambda c: c.subscribe("memo://readme", timeout=WAIT),
    ),
    "resources/unsubscribe": (
        {"uri": "memo://readme"},
        lambda c: c.unsubscribe("memo://readme", timeout=WAIT),
    ),
    "logging/setLevel": ({"level": "info"}, lambda c: c.set_logging_level("info", timeout=WAIT)),
}
"""Methods whose blocking call returns ``None``: their future resolves to ``EmptyResult``."""


def test_every_known_method_is_covered_here():
    assert set(TYPED_METHODS) | set(EMPTY_METHODS) | {"initialize"} == set(CLIENT_REQUEST_RESULTS)


@pytest.mark.parametrize("method", sorted(TYPED_METHODS))
def test_a_future_resolves_to_exactly_what_the_blocking_call_returns(method):
    params, blocking_call = TYPED_METHODS[method]
    with connected(full_server()) as conn:
        blocking = blocking_call(conn.client)
        future = conn.client.submit(method, params, timeout=WAIT).result(WAIT)
        model = getattr(mcp_types, CLIENT_REQUEST_RESULTS[method])
        assert type(blocking) is model
        assert type(future) is model
        assert future == blocking
        raw = conn.client.request(method, params, timeout=WAIT)
        assert type(raw) is dict and model.model_validate(raw) == blocking


def test_call_tool_future_resolves_to_what_call_tool_returns():
    with connected(full_server()) as conn:
        blocking = conn.client.call_tool("square", {"n": 5}, timeout=WAIT)
        future = conn.client.call_tool_future("square", {"n": 5}, timeout=WAIT).result(WAIT)
        assert type(future) is type(blocking) is mcp_types.CallToolResult
        assert future == blocking and future.structured_content == {"result": 25}


@pytest.mark.parametrize("method", sorted(EMPTY_METHODS))
def test_methods_without_a_result_resolve_to_an_empty_result(method):
    params, blocking_call = EMPTY_METHODS[method]
    with connected(full_server()) as conn:
        assert blocking_call(conn.client) is None
        assert (
            type(conn.client.submit(method, params, timeout=WAIT).result(WAIT))
            is mcp_types.EmptyResult
        )


def test_raw_access_stays_raw():
    server = full_server()
    server.add_method(
        "acme/echo", lambda session, request, token: {"echo": request.params.get("x")}
    )
    with connected(server) as conn:
        assert conn.client.submit("acme/echo", {"x": 1}, timeout=WAIT).result(WAIT) == {"echo": 1}
        assert conn.client.request("acme/echo", {"x": 2}, timeout=WAIT) == {"echo": 2}
        raw = conn.client.submit(
            "tools/call", {"name": "square", "arguments": {"n": 3}}, raw=True
        ).result(WAIT)
        assert raw == {
            "content": [{"type": "text", "text": "9"}],
            "structuredContent": {"result": 9},
        }


def test_the_parsed_result_is_one_object_for_every_waiter_and_callback(fast_switching):
    server = full_server()
    release = threading.Semaphore(0)

    @server.tool()
    def gated(n: int) -> int:
        assert release.acquire(timeout=WAIT), "never released"
        return n

    waiters = 6
    with connected(server) as conn:
        for round_ in range(20):  # waiters blocked in result() race to parse the answer
            seen: list[Any] = []
            settled = threading.Event()
            future = conn.client.call_tool_future("gated", {"n": round_})

            def callback(f: concurrent.futures.Future) -> None:
                seen.append(f.result())
                settled.set()

            future.add_done_callback(callback)
            barrier = threading.Barrier(waiters + 1)
            results: list[Any] = [None] * waiters

            def wait(i: int) -> None:
                barrier.wait(WAIT)
                results[i] = future.result(WAIT)

            threads = [threading.Thread(target=wait, args=(i,)) for i in range(waiters)]
            for thread in threads:
                thread.start()
            barrier.wait(WAIT)
            release.release()
            for thread in threads:
                thread.join(WAIT)
            wait_event(settled, "the done-callback")
            first = future.result(0)
            assert isinstance(first, mcp_types.CallToolResult) and first.structured_content == {
                "result": round_
            }
            assert all(r is first for r in results) and seen[0] is first
            assert next(concurrent.futures.as_completed([future], timeout=WAIT)).result() is first


def test_a_result_that_does_not_fit_its_model_is_a_validation_error_on_both_paths():
    def handler(request: Any) -> Any:
        if request.method == "initialize":
            return {**fake.init_result, "capabilities": {"tools": {}}}
        return {"tools": "not a list"}

    with (
        FakeServer(handler) as fake,
        Client.connect(fake.client_transport, init_timeout=WAIT) as client,
    ):
        with pytest.raises(pydantic.ValidationError):
            client.list_tools_page(timeout=WAIT)
        future = client.submit("tools/list", timeout=WAIT)
        assert isinstance(future.exception(WAIT), pydantic.ValidationError)
        with pytest.raises(pydantic.ValidationError):
            future.result(WAIT)
        assert client.request("tools/list", timeout=WAIT) == {"tools": "not a list"}
        client.ping(timeout=WAIT)  # the connection is fine


def test_server_info_is_an_implementation_model():
    with connected(full_server()) as conn:
        info = conn.client.server_info
        assert isinstance(info, mcp_types.Implementation)
        assert (info.name, info.version) == ("typed", "3.1")
        assert conn.client.server_info is info
        assert conn.client.peer_info == {"name": "typed", "version": "3.1"}


# -- server side -----------------------------------------------------------------------------------
def asking_server(seen: dict[str, Any]) -> Server:
    server = Server("asking")

    @server.tool()
    def ask(ctx: Context) -> str:
        seen["roots"] = ctx.session.list_roots(timeout=WAIT)
        seen["sample"] = ctx.session.create_message(
            [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            max_tokens=5,
            timeout=WAIT,
        )
        seen["elicit"] = ctx.session.elicit(
            "name?", {"type": "object", "properties": {"name": {"type": "string"}}}, timeout=WAIT
        )
        return "asked"

    return server


def test_server_side_requests_return_models():
    seen: dict[str, Any] = {}
    options = dict(
        roots=[{"uri": "file:///work", "name": "work"}],
        sampling_handler=lambda params, ctx: {
            "role": "assistant",
            "content": {"type": "text", "text": "ok"},
            "model": "m",
        },
        elicitation_handler=lambda params, ctx: {"action": "accept", "content": {"name": "Ann"}},
    )
    with connected(asking_server(seen), **options) as conn:
        assert conn.client.call_tool("ask", timeout=WAIT).content[0].text == "asked"
        [root] = seen["roots"]
        assert isinstance(root, mcp_types.Root) and (str(root.uri), root.name) == (
            "file:///work",
            "work",
        )
        assert (
            type(seen["sample"]) is mcp_types.CreateMessageResult
            and seen["sample"].content.text == "ok"
        )
        assert type(seen["elicit"]) is mcp_types.ElicitResult
        assert (seen["elicit"].action, seen["elicit"].content) == ("accept", {"name": "Ann"})
        # the session itself (outside a handler) answers with the same models
        assert as_wire(conn.handle.session.list_roots(timeout=WAIT)) == [
            {"uri": "file:///work", "name": "work"}
        ]


def test_a_sampling_answer_with_a_list_of_content_is_a_result_with_tools():
    seen: dict[str, Any] = {}
    content = [
        {"type": "text", "text": "calling"},
        {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}},
    ]
    options = dict(
        roots=["/r"],
        sampling_handler=lambda params, ctx: {
            "role": "assistant",
            "content": content,
            "model": "m",
            "stopReason": "toolUse",
        },
        elicitation_handler=lambda params, ctx: {"action": "decline"},
    )
    with connected(asking_server(seen), **options) as conn:
        conn.client.call_tool("ask", timeout=WAIT)
        assert type(seen["sample"]) is mcp_types.CreateMessageResultWithTools
        assert [block.type for block in seen["sample"].content] == ["text", "tool_use"]
        assert seen["elicit"].action == "decline" and seen["elicit"].content is None


def test_every_server_request_result_names_a_model():
    for name in {*SERVER_REQUEST_RESULTS.values(), *CLIENT_REQUEST_RESULTS.values()}:
        assert issubclass(getattr(mcp_types, name), pydantic.BaseModel), name
