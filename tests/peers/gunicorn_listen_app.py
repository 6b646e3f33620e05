"""A WSGI module for the listen-across-workers test (``gunicorn_listen_app:app``).

Every worker process builds the same server on a :class:`~mcp_sync.server.bus.RedisBus`
(``MCP_TEST_REDIS_URL``), so a change raised in one worker reaches the listen streams of
every worker. Its tools report the pid of the worker that ran them, so that a test can tell
the workers apart.
"""

import os

from mcp_sync import Server
from mcp_sync.server.bus import RedisBus

server = Server("gunicorn-listen", version="1.0.0", bus=RedisBus(os.environ["MCP_TEST_REDIS_URL"]))


@server.tool()
def pid() -> int:
    """The pid of the worker process serving this call."""
    return os.getpid()


@server.tool()
def add_tool(name: str) -> int:
    """Register a tool named ``name`` (its list changes) and return this worker's pid."""
    server.add_tool(lambda: name, name=name)
    return os.getpid()


@server.tool()
def add_prompt(name: str) -> int:
    """Register a prompt named ``name`` (the prompt list changes); this worker's pid."""
    server.add_prompt(lambda: f"prompt {name}", name=name)
    return os.getpid()


@server.tool()
def touch(uri: str) -> int:
    """Raise ``notifications/resources/updated`` for ``uri``; this worker's pid."""
    server.notify_resource_updated(uri)
    return os.getpid()


@server.resource("file:///watched")
def watched() -> str:
    """A resource listeners can subscribe to."""
    return "watched"


@server.prompt()
def hello() -> str:
    """A prompt (so that the server has the prompts capability)."""
    return "hello"


app = server.wsgi_app(
    path="/mcp",
    modern_only=True,
    keepalive=0.2,
    modern_json_window=0.2,
    max_listen_streams=int(os.environ.get("MCP_TEST_MAX_LISTEN", "1")),
)
