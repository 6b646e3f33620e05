#!/usr/bin/env python
"""An mcp_sync stdio server: the peer that the official SDK's client talks to in the
interoperability tests.

    python sync_server.py

It imports mcp_sync from this working tree (not from an installed copy).

Env:
    PEER_EVENTS_FILE  optional path; lifecycle markers are appended there, one per line,
                      flushed and fsynced at once: "STARTED slow <tag>", "FINISHED slow <tag>",
                      "CANCELLED slow <tag>", "TIMEOUT ask_roots_timeout", ...

Tools:
    echo(text), add(a, b)
    place(at, label="pin")           declared 2020-12 input schema ($defs, additionalProperties:
                                     false) and output schema
    slow(seconds, steps=10, tag="")  waits on its cancellation token, reporting progress at each
                                     step; STARTED/FINISHED/CANCELLED markers
    ask_roots()                      ctx.session.list_roots() -> JSON text
    ask_roots_timeout(timeout)       ctx.session.list_roots(timeout=...): on expiry mcp_sync sends
                                     notifications/cancelled and the tool fails (isError)
    ask_sample(prompt)               ctx.session.create_message(...) -> the sampled text
    ask_elicit(message)              ctx.session.elicit(message, {name: string}) -> "action:name"
    ask_elicit_url(url)              ctx.session.elicit(..., url=url, elicitation_id="sync-1") -> action

Resources, prompts, completion:
    resource  memo://readme              text "sync readme"
    template  memo://notes/{name}        text "memo <name>"
    prompt    greet(name, style="plain") "Hello <name> (<style>)"
    completion: prompt greet / style; template memo://notes/{name} / name
"""

from __future__ import annotations

import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from peer_events import event  # noqa: E402

from mcp_sync import Context, RequestTimeout, Server  # noqa: E402
from mcp_sync.wire import model_to_wire  # noqa: E402

server = Server("mcp-sync-peer", version="0.1.0-peer")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


PLACE_INPUT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "point": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
            "additionalProperties": False,
        }
    },
    "properties": {"at": {"$ref": "#/$defs/point"}, "label": {"type": "string"}},
    "required": ["at"],
    "additionalProperties": False,
}
PLACE_OUTPUT = {
    "type": "object",
    "properties": {"label": {"type": "string"}, "x": {"type": "number"}, "y": {"type": "number"}},
    "required": ["label", "x", "y"],
}


@server.tool(input_schema=PLACE_INPUT, output_schema=PLACE_OUTPUT)
def place(at: dict, label: str = "pin") -> dict:
    """Place a labelled pin at a point (hand-written JSON Schema 2020-12)."""
    return {"label": label, "x": at["x"], "y": at["y"]}


SLOW_ONE_AT_A_TIME = threading.Lock()
"""Slow calls run one after another, so markers of consecutive calls are ordered: a call's
STARTED marker can only follow the previous call's CANCELLED (or FINISHED) marker, never race
it from another worker thread."""


@server.tool()
def slow(seconds: float, ctx: Context, steps: int = 10, tag: str = "") -> str:
    """Wait `seconds` in `steps` steps, reporting progress; stops at once when cancelled."""
    if not SLOW_ONE_AT_A_TIME.acquire(timeout=60):
        raise RuntimeError("an earlier slow call never ended")
    try:
        event("STARTED slow", tag)
        steps = max(1, steps)
        for i in range(steps):
            if ctx.wait(seconds / steps):
                event("CANCELLED slow", tag)
                return "stopped"  # discarded: a cancelled request gets no response
            ctx.report_progress(i + 1, steps, f"step {i + 1}/{steps}")
        event("FINISHED slow", tag)
        return f"slept {seconds}"
    finally:
        SLOW_ONE_AT_A_TIME.release()


@server.tool()
def ask_roots(ctx: Context) -> str:
    """Ask the client for its roots and return them as JSON text."""
    return json.dumps([model_to_wire(root) for root in ctx.session.list_roots(timeout=10)])


@server.tool()
def ask_roots_timeout(timeout: float, ctx: Context) -> str:
    """roots/list with a timeout: on expiry the request is cancelled on the wire and the tool fails."""
    event("STARTED ask_roots_timeout")
    try:
        roots = ctx.session.list_roots(timeout=timeout)
    except RequestTimeout as exc:
        event("TIMEOUT ask_roots_timeout")
        raise RuntimeError(f"roots/list timed out: {exc}") from exc
    event("FINISHED ask_roots_timeout")
    return json.dumps([model_to_wire(root) for root in roots])


@server.tool()
def ask_sample(prompt: str, ctx: Context) -> str:
    """Ask the client's LLM and return the text it sampled."""
    result = ctx.session.create_message(
        [{"role": "user", "content": {"type": "text", "text": prompt}}], max_tokens=50, timeout=10
    )
    if not isinstance(result.content, list) and result.content.type == "text":
        return result.content.text
    return json.dumps(model_to_wire(result, result=True))


@server.tool()
def ask_elicit(message: str, ctx: Context) -> str:
    """Ask the user for a name through the client (form-mode elicitation)."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    result = ctx.session.elicit(message, schema, timeout=10)
    if result.action == "accept":
        return f"accept:{(result.content or {}).get('name')}"
    return result.action


@server.tool()
def ask_elicit_url(url: str, ctx: Context) -> str:
    """Send the user to a URL through the client (URL-mode elicitation); returns the action."""
    result = ctx.session.elicit(
        "Please open the page", url=url, elicitation_id="sync-1", timeout=10
    )
    return result.action


NOTE_NAMES = ["alpha", "alps", "beta"]
STYLES = ["plain", "pirate", "poetic", "formal"]


@server.resource(
    "memo://readme", name="readme", description="The sync peer's readme", mime_type="text/plain"
)
def readme() -> str:
    return "sync readme"


@server.resource(
    "memo://notes/{name}", name="note", description="A memo by name", mime_type="text/plain"
)
def note(name: str) -> str:
    return f"memo {name}"


@server.prompt(description="Greet someone")
def greet(name: str, style: str = "plain") -> str:
    return f"Hello {name} ({style})"


@server.completion("prompt:greet", "style")
def complete_style(value: str, context: dict) -> list[str]:
    return [s for s in STYLES if s.startswith(value)]


@server.completion("resource:memo://notes/{name}", "name")
def complete_note(value: str, context: dict) -> list[str]:
    return [n for n in NOTE_NAMES if n.startswith(value)]


if __name__ == "__main__":
    server.run()
