"""Prompts over the in-memory pair: arguments from type hints and docstrings, every result
shape of prompts/get, argument errors, pagination, list_changed, Context and cancellation."""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Annotated

import pytest
from support.messages import notifications, responses_to
from support.probes import Collector
from support.sessions import pair
from support.waiting import WAIT, wait_event

from mcp_sync import Context, McpError, Server

INVALID_PARAMS = -32602


def prompt_server(**options) -> Server:
    server = Server("prompts", **options)

    @server.prompt(title="Code review")
    def review(
        code: str, language: str = "python", strict: bool | None = None, ctx: Context = None
    ) -> str:  # type: ignore[assignment]
        """Review a piece of code.

        Args:
            code: The code to review.
            language: The language it is written in.
        """
        return f"Please review this {language} code{' strictly' if strict else ''}:\n{code}"

    @server.prompt()
    def chat(topic: Annotated[str, "What to talk about"]) -> list:
        """Start a conversation."""
        return [
            f"Let's talk about {topic}.",
            {"role": "assistant", "content": f"Sure, {topic} it is."},
            {
                "role": "user",
                "content": {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            },
            {"type": "text", "text": "bare content becomes a user message"},
        ]

    @server.prompt(name="one-message", description="explicit description")
    def one_message() -> dict:
        return {"role": "assistant", "content": {"type": "text", "text": "hello"}}

    @server.prompt()
    def repeat(word: str, times: int) -> str:
        """Repeat a word."""
        return " ".join([word] * times)

    return server


def text_of(message) -> str:
    return message.content.text


# -- listing ---------------------------------------------------------------------------------
def test_prompt_arguments_come_from_type_hints_and_docstring():
    with pair(prompt_server()) as p:
        prompts = {prompt.name: prompt for prompt in p.client.list_prompts(timeout=WAIT)}
        assert list(prompts) == ["review", "chat", "one-message", "repeat"]
        review = prompts["review"]
        assert review.description == "Review a piece of code."
        assert review.title == "Code review"
        args = [(a.name, a.required, a.description) for a in review.arguments]
        assert args == [
            ("code", True, "The code to review."),
            ("language", False, "The language it is written in."),
            ("strict", False, None),
        ], "the Context parameter is not an argument"
        assert [(a.name, a.required, a.description) for a in prompts["chat"].arguments] == [
            ("topic", True, "What to talk about")
        ]
        assert prompts["one-message"].description == "explicit description"
        assert prompts["one-message"].arguments in ([], None)
        assert [(a.name, a.required) for a in prompts["repeat"].arguments] == [
            ("word", True),
            ("times", True),
        ]


def test_prompts_list_is_paginated():
    server = Server("many-prompts", page_size=3)
    for i in range(7):
        server.add_prompt(lambda i=i: f"prompt {i}", name=f"p{i}")
    with pair(server) as p:
        first = p.client.list_prompts_page(timeout=WAIT)
        assert [x.name for x in first.prompts] == ["p0", "p1", "p2"] and first.next_cursor
        second = p.client.list_prompts_page(first.next_cursor, timeout=WAIT)
        assert [x.name for x in second.prompts] == ["p3", "p4", "p5"] and second.next_cursor
        third = p.client.list_prompts_page(second.next_cursor, timeout=WAIT)
        assert [x.name for x in third.prompts] == ["p6"] and third.next_cursor is None
        assert [x.name for x in p.client.list_prompts(timeout=WAIT)] == [f"p{i}" for i in range(7)]
        with pytest.raises(McpError) as info:
            p.client.request("prompts/list", {"cursor": "garbage"}, timeout=WAIT)
        assert info.value.code == INVALID_PARAMS


# -- prompts/get -------------------------------------------------------------------------------
def test_get_prompt_with_a_string_result_is_one_user_message():
    with pair(prompt_server()) as p:
        result = p.client.get_prompt("review", {"code": "x = 1"}, timeout=WAIT)
        assert result.description == "Review a piece of code."
        assert len(result.messages) == 1
        assert result.messages[0].role == "user"
        assert result.messages[0].content.type == "text"
        assert text_of(result.messages[0]) == "Please review this python code:\nx = 1"
        strict = p.client.get_prompt(
            "review", {"code": "y", "language": "rust", "strict": "true"}, timeout=WAIT
        )
        assert text_of(strict.messages[0]) == "Please review this rust code strictly:\ny"


def test_get_prompt_with_a_list_of_messages():
    with pair(prompt_server()) as p:
        result = p.client.get_prompt("chat", {"topic": "tea"}, timeout=WAIT)
        roles = [m.role for m in result.messages]
        assert roles == ["user", "assistant", "user", "user"]
        assert text_of(result.messages[0]) == "Let's talk about tea."
        assert text_of(result.messages[1]) == "Sure, tea it is."
        image = result.messages[2].content
        assert (image.type, image.data, image.mime_type) == ("image", "aGVsbG8=", "image/png")
        assert text_of(result.messages[3]) == "bare content becomes a user message"


def test_get_prompt_with_one_message_dict():
    with pair(prompt_server()) as p:
        result = p.client.get_prompt("one-message", timeout=WAIT)
        assert result.description == "explicit description"
        assert [(m.role, text_of(m)) for m in result.messages] == [("assistant", "hello")]


def test_get_prompt_with_a_result_shaped_dict_and_an_invalid_role():
    server = Server("shapes")

    @server.prompt()
    def shaped() -> dict:
        """Summary."""
        return {
            "description": "own description",
            "messages": ["first", {"role": "assistant", "content": "second"}],
        }

    @server.prompt()
    def bad_role() -> dict:
        return {"role": "system", "content": "not allowed in MCP prompts"}

    with pair(server) as p:
        result = p.client.get_prompt("shaped", timeout=WAIT)
        assert result.description == "own description"
        assert [(m.role, text_of(m)) for m in result.messages] == [
            ("user", "first"),
            ("assistant", "second"),
        ]
        with pytest.raises(McpError) as info:
            p.client.get_prompt("bad_role", timeout=WAIT)
        assert info.value.code == -32603 and "role" in info.value.message


def test_unknown_prompt_is_invalid_params():
    with pair(prompt_server()) as p:
        with pytest.raises(McpError) as info:
            p.client.get_prompt("nope", timeout=WAIT)
        assert info.value.code == INVALID_PARAMS
        assert "nope" in info.value.message


def test_missing_required_argument_is_invalid_params_naming_it():
    with pair(prompt_server()) as p:
        with pytest.raises(McpError) as info:
            p.client.get_prompt("review", {"language": "go"}, timeout=WAIT)
        assert info.value.code == INVALID_PARAMS
        assert "code" in info.value.message
        with pytest.raises(McpError) as info:
            p.client.get_prompt("review", timeout=WAIT)
        assert info.value.code == INVALID_PARAMS and "code" in info.value.message


def test_invalid_argument_is_invalid_params_naming_it():
    with pair(prompt_server()) as p:
        with pytest.raises(McpError) as info:
            p.client.get_prompt("repeat", {"word": "hi", "times": "many"}, timeout=WAIT)
        assert info.value.code == INVALID_PARAMS
        assert "times" in info.value.message and "word" not in info.value.message
        # prompt arguments travel as strings; a numeric string is accepted for an int
        assert (
            text_of(
                p.client.get_prompt("repeat", {"word": "hi", "times": "3"}, timeout=WAIT).messages[
                    0
                ]
            )
            == "hi hi hi"
        )
        with pytest.raises(McpError) as info:
            p.client.request(
                "prompts/get", {"name": "repeat", "arguments": ["hi", 3]}, timeout=WAIT
            )
        assert info.value.code == INVALID_PARAMS


# -- list_changed ----------------------------------------------------------------------------
def test_list_changed_when_prompts_are_added_and_removed():
    server = prompt_server()
    notes = Collector()
    with pair(server, on_notification=notes) as p:
        assert p.client.server_capabilities["prompts"]["listChanged"] is True

        @server.prompt()
        def late() -> str:
            return "I arrived late"

        notes.wait_for(
            lambda n: n[0] == "notifications/prompts/list_changed", "list_changed after add"
        )
        assert "late" in [x.name for x in p.client.list_prompts(timeout=WAIT)]
        assert text_of(p.client.get_prompt("late", timeout=WAIT).messages[0]) == "I arrived late"

        server.remove_prompt("late")
        p.client_wire.wait_for(
            lambda w: len(notifications(w.received, "notifications/prompts/list_changed")) == 2,
            "list_changed after remove",
        )
        assert "late" not in [x.name for x in p.client.list_prompts(timeout=WAIT)]
        with pytest.raises(McpError) as info:
            p.client.get_prompt("late", timeout=WAIT)
        assert info.value.code == INVALID_PARAMS


# -- context and cancellation ----------------------------------------------------------------
def test_cancelled_prompt_get_fires_the_token_and_writes_no_response():
    server = Server("slow-prompt")
    started, stopped = threading.Event(), threading.Event()
    seen = {}

    @server.prompt()
    def slow(topic: str, ctx: Context) -> str:
        seen["method"] = ctx.method
        started.set()
        seen["cancelled"] = ctx.wait(WAIT)
        stopped.set()
        return f"too late for {topic}"

    @server.prompt()
    def quick() -> str:
        return "quick"

    with pair(server, server_workers=1) as p:
        call = p.client.submit("prompts/get", {"name": "slow", "arguments": {"topic": "x"}})
        wait_event(started, "the prompt handler to start")
        assert call.cancel() is True
        wait_event(stopped, "the prompt handler to see its cancellation")
        assert seen == {"method": "prompts/get", "cancelled": True}
        with pytest.raises(concurrent.futures.CancelledError):
            call.result(WAIT)
        # one worker: this answer is written only after the cancelled request is fully done
        assert text_of(p.client.get_prompt("quick", timeout=WAIT).messages[0]) == "quick"
        assert responses_to(p.server_wire.snapshot()[0], call.request_id) == []
        assert p.client.endpoint.dropped["late response after cancellation"] == 0
