"""The seam every input-capable request goes through: ``dispatch.run_feature(scope, call)``.

``tools/call``, ``prompts/get`` and ``resources/read`` run their handler through it with the
request's own :class:`~mcp_sync.server.RequestScope`; a handler's ``ctx.session`` is that
scope (bound to the handler's token). Other methods do not go through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.sessions import pair

from mcp_sync import Context, Server
from mcp_sync.server import RequestScope, dispatch


def _server(seen: list[Any]) -> Server:
    server = Server("seam")

    @server.tool()
    def probe(ctx: Context) -> str:
        seen.append(ctx.session)
        return "ok"

    @server.tool(timeout=30)
    def probe_with_deadline(ctx: Context) -> str:
        seen.append(ctx.session)
        return "ok"

    @server.prompt()
    def greet(ctx: Context) -> str:
        seen.append(ctx.session)
        return "hi"

    @server.resource("mem://one")
    def one(ctx: Context) -> str:
        seen.append(ctx.session)
        return "1"

    return server


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, RequestScope]]:
    """Every run_feature call: (method, scope); the call itself is still made."""
    recorded: list[tuple[str, RequestScope]] = []
    real = dispatch.run_feature

    def spy(scope: RequestScope, call: Callable[[], Any]) -> Any:
        assert scope.request is not None
        recorded.append((scope.request.method, scope))
        return real(scope, call)

    monkeypatch.setattr(dispatch, "run_feature", spy)
    return recorded


def test_the_three_input_methods_run_through_run_feature_with_the_requests_scope(calls):
    seen: list[Any] = []
    with pair(_server(seen)) as p:
        p.client.list_tools()
        p.client.list_prompts()
        assert p.client.call_tool("probe").content[0].text == "ok"
        assert p.client.get_prompt("greet").messages[0].content.text == "hi"
        assert p.client.read_resource("mem://one").contents[0].text == "1"
    assert [method for method, _ in calls] == ["tools/call", "prompts/get", "resources/read"]
    assert {"tools/call", "prompts/get", "resources/read"} == dispatch.INPUT_METHODS
    for (_, scope), handler_scope in zip(calls, seen, strict=True):
        # ctx.session is the same request's scope, tied to the handler's token
        assert isinstance(handler_scope, RequestScope)
        assert handler_scope.request is scope.request


def test_a_tool_with_a_deadline_gets_the_scope_bound_to_its_own_token(calls):
    seen: list[Any] = []
    with pair(_server(seen)) as p:
        p.client.call_tool("probe_with_deadline")
    (_, scope), (handler_scope,) = calls[0], seen
    assert handler_scope.request is scope.request
    # the tool's timeout runs on a child token: the scope's requests are tied to that child
    assert handler_scope.token is not scope.token
    scope.token.cancel("parent")
    assert handler_scope.token.cancelled
