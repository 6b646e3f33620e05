"""completion/complete and logging (logging/setLevel, ctx.log, the stdlib logging bridge)."""

from __future__ import annotations

import logging

import pytest
from support.messages import notifications
from support.probes import Collector
from support.sessions import pair
from support.waiting import WAIT

from mcp_sync import Context, McpError, Server

INVALID_PARAMS = -32602
LANGUAGES = ["python", "perl", "php", "rust", "ruby", "go"]
POSTS = {"ann": ["1", "2", "10"], "bob": ["7"]}
TEMPLATE = "users://{user_id}/posts/{post}"


def completion_server() -> Server:
    server = Server("completion")

    @server.prompt()
    def review(code: str, language: str = "python") -> str:
        return code

    @server.resource(TEMPLATE)
    def post(user_id: str, post: str) -> str:
        return f"{user_id}/{post}"

    @server.completion("prompt:review", "language")
    def complete_language(value: str, context: dict) -> list[str]:
        return [name for name in LANGUAGES if name.startswith(value)]

    @server.completion(f"resource:{TEMPLATE}", "user_id")
    def complete_user(value: str, context: dict) -> list[str]:
        return [name for name in POSTS if name.startswith(value)]

    @server.completion(f"resource:{TEMPLATE}", "post")
    def complete_post(value: str, context: dict) -> list[str]:
        # uses an argument the client already filled in
        return [p for p in POSTS.get(context.get("user_id", ""), []) if p.startswith(value)]

    @server.completion("prompt:review", "code")
    def complete_code(value: str, context: dict) -> list[str]:
        return [f"{value}{i}" for i in range(250)]

    return server


def test_completion_of_a_prompt_argument():
    with pair(completion_server()) as p:
        assert "completions" in p.client.server_capabilities
        result = p.client.complete(
            {"type": "ref/prompt", "name": "review"}, "language", "p", timeout=WAIT
        )
        assert result.completion.values == ["python", "perl", "php"]
        assert result.completion.total == 3
        assert result.completion.has_more is False
        assert p.client.complete(
            {"type": "ref/prompt", "name": "review"}, "language", "r", timeout=WAIT
        ).completion.values == ["rust", "ruby"]


def test_completion_of_a_resource_template_argument_with_context_arguments():
    with pair(completion_server()) as p:
        ref = {"type": "ref/resource", "uri": TEMPLATE}
        assert p.client.complete(ref, "user_id", "a", timeout=WAIT).completion.values == ["ann"]
        result = p.client.complete(
            ref, "post", "1", context_arguments={"user_id": "ann"}, timeout=WAIT
        )
        assert result.completion.values == ["1", "10"]
        assert p.client.complete(
            ref, "post", "", context_arguments={"user_id": "bob"}, timeout=WAIT
        ).completion.values == ["7"]
        # without the context argument the completer has nothing to go on
        assert p.client.complete(ref, "post", "", timeout=WAIT).completion.values == []


def test_completion_without_a_completer_is_empty():
    with pair(completion_server()) as p:
        result = p.client.complete(
            {"type": "ref/resource", "uri": "other://{x}"}, "x", "a", timeout=WAIT
        )
        assert result.completion.values == [] and not result.completion.has_more
        # a known prompt, an argument without a completer
        server = Server("no-completers")

        @server.prompt()
        def plain(arg: str) -> str:
            return arg

    with pair(server) as p:
        result = p.client.complete(
            {"type": "ref/prompt", "name": "plain"}, "arg", "a", timeout=WAIT
        )
        assert result.completion.values == [] and not result.completion.has_more


def test_more_than_100_values_are_truncated_with_has_more():
    with pair(completion_server()) as p:
        result = p.client.complete(
            {"type": "ref/prompt", "name": "review"}, "code", "v", timeout=WAIT
        )
        assert len(result.completion.values) == 100
        assert (
            result.completion.values[:2] == ["v0", "v1"] and result.completion.values[-1] == "v99"
        )
        assert result.completion.has_more is True
        assert result.completion.total == 250


def test_completer_returning_a_dict_keeps_total_and_has_more():
    server = Server("dict-completer")

    @server.prompt()
    def pick(option: str) -> str:
        return option

    @server.completion("prompt:pick", "option")
    def options(value: str, context: dict) -> dict:
        return {"values": ["a", "b"], "total": 40, "hasMore": True}

    with pair(server) as p:
        result = p.client.complete(
            {"type": "ref/prompt", "name": "pick"}, "option", "", timeout=WAIT
        )
        assert (result.completion.values, result.completion.total, result.completion.has_more) == (
            ["a", "b"],
            40,
            True,
        )


@pytest.mark.parametrize(
    "params",
    [
        {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x", "value": ""}},
        {
            "ref": {"type": "ref/elsewhere", "name": "review"},
            "argument": {"name": "x", "value": ""},
        },
        {"ref": {"type": "ref/prompt", "name": "review"}},
        {"argument": {"name": "x", "value": ""}},
    ],
)
def test_bad_completion_requests_are_invalid_params(params):
    with pair(completion_server()) as p:
        with pytest.raises(McpError) as info:
            p.client.request("completion/complete", params, timeout=WAIT)
        assert info.value.code == INVALID_PARAMS


def test_completion_decorator_validates_the_ref():
    with pytest.raises(ValueError):
        Server("x").completion("tool:foo", "arg")


# -- logging ---------------------------------------------------------------------------------
def logging_server() -> Server:
    server = Server("logging")

    @server.tool()
    def chatty(ctx: Context) -> list[bool]:
        """Log at four levels; return which were sent."""
        return [
            ctx.debug("d"),
            ctx.info("i"),
            ctx.log("warning", {"w": 1}, logger="custom"),
            ctx.error("e"),
        ]

    return server


def log_messages(wire) -> list[dict]:
    return [m["params"] for m in notifications(wire.snapshot()[1], "notifications/message")]


def test_set_level_filters_ctx_log():
    logs = Collector()
    with pair(logging_server(), on_log=logs) as p:
        assert "logging" in p.client.server_capabilities
        assert p.client.call_tool("chatty", timeout=WAIT).structured_content == {
            "result": [True, True, True, True]
        }
        assert [m["level"] for m in log_messages(p.client_wire)] == [
            "debug",
            "info",
            "warning",
            "error",
        ]

        p.client.set_logging_level("warning", timeout=WAIT)
        assert p.session.log_level == "warning"
        result = p.client.call_tool("chatty", timeout=WAIT)
        assert result.structured_content == {"result": [False, False, True, True]}
        later = log_messages(p.client_wire)[4:]
        assert later == [
            {"level": "warning", "data": {"w": 1}, "logger": "custom"},
            {"level": "error", "data": "e"},
        ]
        # on_log gets the params of each message, in order
        logs.wait_for(lambda m: len(logs.items) == 6, "six log callbacks")
        assert [m["level"] for m in logs.snapshot()] == [
            "debug",
            "info",
            "warning",
            "error",
            "warning",
            "error",
        ]


def test_invalid_log_level_is_invalid_params():
    with pair(logging_server()) as p:
        for level in ("loud", None, 3):
            with pytest.raises(McpError) as info:
                p.client.request("logging/setLevel", {"level": level}, timeout=WAIT)
            assert info.value.code == INVALID_PARAMS
        assert p.session.log_level == "debug", "a rejected level changes nothing"


def test_logging_handler_bridges_stdlib_logging():
    server = logging_server()
    app_logger = logging.getLogger("featuretest.app.worker")
    own_logger = logging.getLogger("mcp_sync.featuretest")
    handler = server.logging_handler()
    app_logger.addHandler(handler)
    own_logger.addHandler(handler)
    old_app, old_own = app_logger.level, own_logger.level
    app_logger.setLevel(logging.DEBUG)
    own_logger.setLevel(logging.DEBUG)
    try:
        with pair(server) as p:
            p.client.set_logging_level("warning", timeout=WAIT)
            app_logger.info("below the client's level")
            app_logger.warning("disk at %d%%", 91)
            own_logger.error("mcp_sync's own records are never forwarded")
            app_logger.error("failed")
            app_logger.critical("marker")
            p.client_wire.wait_for(
                lambda w: any(m["data"] == "marker" for m in log_messages(w)), "the marker record"
            )
            assert log_messages(p.client_wire) == [
                {"level": "warning", "data": "disk at 91%", "logger": "featuretest.app.worker"},
                {"level": "error", "data": "failed", "logger": "featuretest.app.worker"},
                {"level": "critical", "data": "marker", "logger": "featuretest.app.worker"},
            ]
    finally:
        app_logger.removeHandler(handler)
        own_logger.removeHandler(handler)
        app_logger.setLevel(old_app)
        own_logger.setLevel(old_own)


def test_logging_handler_level_and_debug_mapping():
    server = logging_server()
    logger = logging.getLogger("featuretest.levels")
    errors_only = server.logging_handler(logging.ERROR)
    everything = server.logging_handler()
    old = logger.level
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        with pair(server) as p:
            logger.addHandler(errors_only)
            logger.warning("not an error")
            logger.error("an error")
            logger.removeHandler(errors_only)
            logger.addHandler(everything)
            logger.debug("debug record")
            logger.critical("marker")
            p.client_wire.wait_for(
                lambda w: any(m["data"] == "marker" for m in log_messages(w)), "the marker record"
            )
            assert [(m["level"], m["data"]) for m in log_messages(p.client_wire)] == [
                ("error", "an error"),
                ("debug", "debug record"),
                ("critical", "marker"),
            ]
    finally:
        logger.removeHandler(errors_only)
        logger.removeHandler(everything)
        logger.setLevel(old)
        logger.propagate = True
