"""An MCP server with one of everything the ``mcp-sync`` subcommands print, for the CLI and
MCP Inspector tests: text, an image, audio, a tool error, a blob and a text resource, a
resource template, and a prompt with arguments.

    python tests/peers/cli_server.py             # stdio
    mcp-sync serve cli_server:server --http        # from tests/peers, over HTTP
"""

from __future__ import annotations

import base64

from mcp_sync import Context, Server

server = Server("cli-test", version="1.0.0")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG (70 bytes)."""
AUDIO = bytes(range(256)) * 8
"""2 KiB standing in for a WAV file."""


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def fail(message: str) -> str:
    """Raise an error: the caller gets a tool result with isError."""
    raise RuntimeError(message)


@server.tool()
def image() -> list[dict[str, str]]:
    """A caption, a 1x1 PNG and 2 KiB of audio."""
    return [
        {"type": "text", "text": "a tiny picture"},
        {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"},
        {"type": "audio", "data": base64.b64encode(AUDIO).decode(), "mimeType": "audio/wav"},
    ]


@server.tool()
def pool_size(ctx: Context) -> int:
    """The server's handler threads per connection (``mcp-sync serve --threads``)."""
    return server.max_workers


@server.resource("text://motd", mime_type="text/plain")
def motd() -> str:
    """Message of the day."""
    return "hello from the cli test server"


@server.resource("blob://logo", mime_type="image/png")
def logo() -> bytes:
    """The logo as a PNG."""
    return PNG


@server.resource("greeting://{name}")
def greeting(name: str) -> str:
    """A greeting for `name`."""
    return f"hello, {name}"


@server.prompt()
def review(language: str, focus: str = "bugs") -> str:
    """Ask for a code review.

    Args:
        language: the programming language.
        focus: what to look for.
    """
    return f"Review this {language} code, looking for {focus}."


if __name__ == "__main__":
    server.run()
