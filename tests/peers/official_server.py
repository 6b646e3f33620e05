#!/usr/bin/env python
"""A stdio MCP server built with the official MCP Python SDK (mcp 2.3.x): the real peer for
mcp_sync's client in the interoperability tests.

Adapted from the team's reference peer script. Run it with the interpreter that has ``mcp``::

    python official_server.py

Env:
    PEER_EVENTS_FILE  optional path; lifecycle markers are appended there, one per line,
                      flushed and fsynced at once: "STARTED slow <tag>", "FINISHED slow <tag>",
                      "CANCELLED slow <tag>", "TIMEOUT ask_sample_timeout <tag>", ...

Tools:
    echo(text), add(a, b)
    slow(seconds, steps=10, tag="")   async; notifications/progress at each step when the request
                                      carried a progressToken; STARTED/FINISHED/CANCELLED markers
    ask_roots()                       server->client roots/list; the roots as JSON text
    ask_roots_timeout(timeout)        roots/list with the SDK's per-request read timeout
    ask_sample(prompt)                server->client sampling/createMessage; the sampled text
    ask_sample_timeout(prompt, timeout, tag="")
                                      sampling/createMessage with the SDK's per-request read
                                      timeout: on expiry the SDK sends notifications/cancelled for
                                      its own request and the tool returns "TIMEOUT ..." text
    ask_elicit(message)               server->client elicitation/create (form {name: string})
    ask_elicit_url(url)               URL-mode elicitation/create (elicitationId "official-1");
                                      returns the action

Resources, prompts, completion:
    resource  peer://readme               text "official readme"
    template  peer://notes/{name}         text "note <name>"
    prompt    greet(name, style="plain")  one user message "Hello <name> (<style>)"
    completion: prompt greet / argument style -> styles starting with the value;
                template peer://notes/{name} / argument name -> names starting with the value
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.message import ServerMessageMetadata
from peer_events import event
from pydantic import BaseModel

warnings.simplefilter(
    "ignore"
)  # MCPDeprecationWarning for roots/sampling (deprecated at 2026-07-28)


mcp = MCPServer("official-stdio-peer", version="2.3.0-peer", log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
async def slow(seconds: float, ctx: Context, steps: int = 10, tag: str = "") -> str:
    """Sleep `seconds`, reporting progress `steps` times. Logs lifecycle markers."""
    event("STARTED slow", tag)
    try:
        steps = max(1, steps)
        for i in range(steps):
            await anyio.sleep(seconds / steps)
            await ctx.report_progress(i + 1, steps, f"step {i + 1}/{steps}")
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            event("CANCELLED slow", tag)
        raise
    event("FINISHED slow", tag)
    return f"slept {seconds}"


def _roots_text(result: types.ListRootsResult) -> str:
    return json.dumps(
        [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in result.roots]
    )


@mcp.tool()
async def ask_roots(ctx: Context) -> str:
    """Ask the client for its roots (server->client roots/list) and return them as JSON text."""
    return _roots_text(await ctx.session.list_roots())


@mcp.tool()
async def ask_roots_timeout(timeout: float, ctx: Context) -> str:
    """roots/list with a server-side read timeout (the SDK cancels its own request on expiry)."""
    try:
        result = await ctx.session.send_request(
            types.ListRootsRequest(),
            types.ListRootsResult,
            request_read_timeout_seconds=timeout,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_context.request_id),
        )
    except Exception as e:  # MCPError(REQUEST_TIMEOUT=-32001) on timeout
        return f"TIMEOUT {type(e).__name__}: {e}"
    return _roots_text(result)


def _sampling_request(prompt: str) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[
                types.SamplingMessage(
                    role="user", content=types.TextContent(type="text", text=prompt)
                )
            ],
            max_tokens=50,
        )
    )


def _sampled_text(result: types.CreateMessageResult) -> str:
    content = result.content
    if isinstance(content, types.TextContent):
        return content.text
    return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True))


@mcp.tool()
async def ask_sample(prompt: str, ctx: Context) -> str:
    """Ask the client's LLM (sampling/createMessage) and return its text."""
    result = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=50,
        related_request_id=ctx.request_context.request_id,
    )
    return _sampled_text(result)


@mcp.tool()
async def ask_sample_timeout(prompt: str, timeout: float, ctx: Context, tag: str = "") -> str:
    """sampling/createMessage with a server-side read timeout: on expiry the SDK sends
    notifications/cancelled for its own request; the tool then returns "TIMEOUT ..." text."""
    event("STARTED ask_sample_timeout", tag)
    try:
        result = await ctx.session.send_request(
            _sampling_request(prompt),
            types.CreateMessageResult,
            request_read_timeout_seconds=timeout,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_context.request_id),
        )
    except Exception as e:  # MCPError(REQUEST_TIMEOUT=-32001) on timeout
        event("TIMEOUT ask_sample_timeout", tag)
        return f"TIMEOUT {type(e).__name__}: {e}"
    event("FINISHED ask_sample_timeout", tag)
    return _sampled_text(result)


class NameForm(BaseModel):
    name: str


@mcp.tool()
async def ask_elicit(message: str, ctx: Context) -> str:
    """Ask the user (elicitation/create, form {name: string}); returns 'action:name'."""
    result = await ctx.elicit(message, NameForm)
    if result.action == "accept":
        return f"accept:{result.data.name}"
    return result.action


@mcp.tool()
async def ask_elicit_url(url: str, ctx: Context) -> str:
    """URL-mode elicitation (elicitation/create, mode "url"); returns the action."""
    result = await ctx.elicit_url("Please open the page", url, "official-1")
    return result.action


# -- resources, prompts, completion -------------------------------------------------------------
NOTE_NAMES = ["alpha", "alps", "beta"]
STYLES = ["plain", "pirate", "poetic", "formal"]


@mcp.resource(
    "peer://readme", name="readme", description="The peer's readme", mime_type="text/plain"
)
def readme() -> str:
    return "official readme"


@mcp.resource(
    "peer://notes/{name}", name="note", description="A note by name", mime_type="text/plain"
)
def note(name: str) -> str:
    return f"note {name}"


@mcp.prompt(description="Greet someone")
def greet(name: str, style: str = "plain") -> str:
    return f"Hello {name} ({style})"


@mcp.completion()
async def complete(ref, argument, context):  # noqa: ANN001 - the SDK passes its own models
    if isinstance(ref, types.PromptReference) and ref.name == "greet" and argument.name == "style":
        return types.Completion(values=[s for s in STYLES if s.startswith(argument.value)])
    if (
        isinstance(ref, types.ResourceTemplateReference)
        and ref.uri == "peer://notes/{name}"
        and argument.name == "name"
    ):
        return types.Completion(values=[n for n in NOTE_NAMES if n.startswith(argument.value)])
    return None


if __name__ == "__main__":
    print(f"official-stdio-peer starting pid={os.getpid()}", file=sys.stderr, flush=True)
    mcp.run("stdio")
