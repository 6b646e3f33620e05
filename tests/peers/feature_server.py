"""A stdio MCP server exercising resources, prompts, completion, logging and nested requests,
spawned by tests/features/test_feat_stdio.py.

Events inside the process that a test must see (a handler noticing its cancellation) are
reported through the stdlib logging bridge as ``notifications/message`` from the logger
``feature.events``.
"""

from __future__ import annotations

import logging

from mcp_sync import Context, Server

# one worker: requests are handled one after another, so a test can use a follow-up request
# as a barrier ("everything the previous request could write is already on the wire")
server = Server("feature-stdio", version="2.0.0", max_workers=1)
events = logging.getLogger("feature.events")
events.setLevel(logging.DEBUG)
events.propagate = False
events.addHandler(server.logging_handler())


@server.resource("config://app", mime_type="text/plain", description="App configuration")
def config() -> str:
    return "mode=stdio"


@server.resource("data://blob", mime_type="application/x-test")
def blob() -> bytes:
    return bytes(range(256))


@server.resource("notes://{name}{?upper}")
def note(name: str, upper: bool = False) -> dict:
    """A note by name."""
    return {"name": name.upper() if upper else name}


@server.resource("slow://read")
def slow_read(ctx: Context) -> str:
    events.info("slow read started")
    if ctx.wait(10):
        events.warning("slow read cancelled: %s", ctx.cancel_token.reason)
        return "discarded"
    return "finished"


@server.prompt()
def greet(name: str, style: str = "plain") -> list:
    """Greet someone.

    Args:
        name: Who to greet.
    """
    return [f"Say hello to {name} ({style}).", {"role": "assistant", "content": f"Hello, {name}!"}]


@server.completion("prompt:greet", "name")
def complete_name(value: str, context: dict) -> list:
    return [n for n in ("alice", "albert", "bob") if n.startswith(value)]


@server.tool()
def touch(uri: str) -> str:
    """Announce that a resource changed."""
    server.notify_resource_updated(uri)
    return "touched"


@server.tool()
def add_resource(uri: str, text: str) -> str:
    """Add a resource at run time."""
    server.add_resource(lambda: text, uri, name="added")
    return "added"


@server.tool()
def emit(level: str, message: str, ctx: Context) -> bool:
    """Log through ctx.log."""
    return ctx.log(level, message)


@server.tool()
def ask_roots(ctx: Context) -> list:
    return ctx.session.list_roots(timeout=10)


@server.tool()
def ask_sampling(ctx: Context, timeout: float | None = None) -> dict:
    return ctx.session.create_message(
        [{"role": "user", "content": {"type": "text", "text": "hello"}}],
        max_tokens=20,
        timeout=timeout,
    )


if __name__ == "__main__":
    server.run()
