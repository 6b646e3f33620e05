"""A plain blocking script that talks to an MCP server over Streamable HTTP, with a timeout.

Run it against any Streamable HTTP server, for example ``examples/flask_app.py``::

    python examples/flask_app.py --port 8000 &
    python examples/http_client.py http://127.0.0.1:8000/mcp
    python examples/http_client.py http://127.0.0.1:8000/mcp --tool slow_report --args '{"seconds": 5}' --timeout 1
    python examples/http_client.py http://127.0.0.1:8000/mcp --tool place_order --args '{"item": "plum"}'
    python examples/http_client.py URL --header 'Authorization=Bearer TOKEN'

It connects (``initialize`` over HTTP; the server's ``Mcp-Session-Id`` is kept), lists the
tools, and calls one tool (``--tool``; by default ``slow_report`` for 3 s if the server has
it) with ``timeout=``:

* the call completes: the result is printed (exit 0);
* the timeout expires: ``call_tool`` POSTs ``notifications/cancelled`` for the request, stops
  waiting, and raises ``RequestTimeout`` (exit 0: a handled outcome here);
* Ctrl-C: a cancellation is sent the same way, then the script exits with 130.

Leaving the ``with`` block ends the session with ``DELETE``. A server that refuses us says so
with an HTTP status (401, 403, 404...): ``HttpError`` carries it (exit 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mcp_sync import Client, ConnectionClosed, McpError, RequestTimeout
from mcp_sync.errors import HttpError


def say(text: str) -> None:
    print(text, flush=True)


def http_status(exc: BaseException) -> int | None:
    """The HTTP status behind a connection failure, if there is one."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, HttpError):
            return seen.status
        seen = seen.__cause__
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("url", help="the MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    parser.add_argument(
        "--tool", help="the tool to call (default: slow_report, if the server has it)"
    )
    parser.add_argument("--args", default=None, help="the tool's arguments as a JSON object")
    parser.add_argument(
        "--timeout", type=float, default=1.0, help="seconds to wait for the call (default 1)"
    )
    parser.add_argument(
        "--header", action="append", default=[], help="NAME=VALUE sent with every request"
    )
    options = parser.parse_args(argv)
    headers = dict(h.split("=", 1) for h in options.header)

    try:
        with Client.http(options.url, headers or None) as client:
            info = client.server_info
            say(f"connected to {info.name} {info.version} (protocol {client.protocol_version})")
            tools = [tool.name for tool in client.list_tools(timeout=10)]
            say(f"tools: {', '.join(tools) or '(none)'}")
            name = options.tool or ("slow_report" if "slow_report" in tools else None)
            if name is None:
                return 0
            arguments: dict[str, Any] = (
                json.loads(options.args)
                if options.args
                else ({"seconds": 3} if name == "slow_report" else {})
            )

            def on_progress(progress: float, total: float | None, message: str | None) -> None:
                say(
                    f"  progress {progress:g}/{total if total is not None else '?'} {message or ''}".rstrip()
                )

            say(f"calling {name}({json.dumps(arguments)}) with timeout={options.timeout:g} s")
            try:
                result = client.call_tool(
                    name, arguments, timeout=options.timeout, on_progress=on_progress
                )
            except RequestTimeout as exc:
                say(f"timed out: {exc}; the server was told to cancel the call")
                return 0
            except KeyboardInterrupt:
                say("interrupted: a cancellation was sent to the server")
                return 130
            except McpError as exc:
                say(f"the server refused the call: {exc}")
                return 1
            for item in result.content:
                say(f"result: {getattr(item, 'text', item)}")
            if result.structured_content is not None:
                say(f"structured: {json.dumps(result.structured_content)}")
            return 1 if result.is_error else 0
    except ConnectionClosed as exc:
        status = http_status(exc)
        say(f"connection failed{f' (HTTP {status})' if status else ''}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
