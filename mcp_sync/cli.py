"""The ``mcp-sync`` command line (also ``python -m mcp_sync``).

::

    mcp-sync tools -- python server.py                 list the tools of a server
    mcp-sync call TOOL '{"x": 1}' --timeout 5 -- CMD    call a tool, print the result
    mcp-sync ping -- CMD                                ping a server
    mcp-sync serve package.module:server                serve a Server over stdio
    mcp-sync demo                                       issue, cancel and serve requests
    mcp-sync check-cancel -- CMD                        check a server's cancellation rules

A server is named either by a command after ``--`` (spawned, spoken to over stdio) or by
``--url URL`` (Streamable HTTP).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any, Sequence, TextIO

from .cancel import Cancelled
from .client import Client
from .errors import CapabilityError, ConnectionClosed, McpError, RequestTimeout
from .wire import model_to_wire

__all__ = ["main", "EXIT_ERROR", "EXIT_TOOL_ERROR", "EXIT_TIMEOUT", "EXIT_INTERRUPTED"]

EXIT_ERROR = 1
EXIT_TOOL_ERROR = 2
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    args = list(argv)
    if "--" in args:
        index = args.index("--")
        return args[:index], args[index + 1 :]
    return args, []


def _connect(options: argparse.Namespace, command: list[str], **client_options: Any) -> Client:
    url = getattr(options, "url", None)
    if url:
        client_options.pop("stderr", None)
        return Client.http(url, **client_options)
    if not command:
        raise SystemExit("mcp-sync: name a server: -- COMMAND [ARGS...] or --url URL")
    return Client.stdio(command, **client_options)


class ProgressBar:
    """Draws ``notifications/progress`` on a terminal line (stderr)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.drawn = False

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if total:
            fraction = max(0.0, min(1.0, progress / total))
            filled = int(30 * fraction)
            text = f"[{'#' * filled}{'.' * (30 - filled)}] {fraction * 100:3.0f}%"
        else:
            text = f"progress {progress:g}"
        if message:
            text += f" {message}"
        if self.stream.isatty():
            self.stream.write("\r" + text[:200] + "\x1b[K")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.drawn and self.stream.isatty():
            self.stream.write("\n")
            self.stream.flush()


def _print_json(value: Any, out: TextIO) -> None:
    out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def cmd_tools(options: argparse.Namespace, command: list[str]) -> int:
    with _connect(options, command, stderr="inherit" if options.verbose else "discard") as client:
        tools = client.list_tools(timeout=options.timeout)
        if options.json:
            _print_json([model_to_wire(t) for t in tools], sys.stdout)
        else:
            for tool in tools:
                print(f"{tool.name}: {tool.description or ''}".rstrip())
    return 0


def cmd_ping(options: argparse.Namespace, command: list[str]) -> int:
    import time

    with _connect(options, command, stderr="inherit" if options.verbose else "discard") as client:
        start = time.perf_counter()
        client.ping(timeout=options.timeout)
        print(f"pong from {client.peer_info.get('name', '?')} in {(time.perf_counter() - start) * 1000:.2f} ms")
    return 0


def cmd_call(options: argparse.Namespace, command: list[str]) -> int:
    try:
        arguments = json.loads(options.arguments) if options.arguments else {}
    except json.JSONDecodeError as exc:
        print(f"mcp-sync: the arguments are not valid JSON: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if not isinstance(arguments, dict):
        print("mcp-sync: the arguments must be a JSON object", file=sys.stderr)
        return EXIT_ERROR
    bar = ProgressBar(sys.stderr)
    client = _connect(options, command, stderr="inherit" if options.verbose else "discard")
    try:
        try:
            result = client.call_tool(
                options.tool,
                arguments,
                timeout=options.timeout,
                on_progress=None if options.no_progress else bar,
            )
        except KeyboardInterrupt:
            bar.finish()
            print("mcp-sync: interrupted; the call was cancelled on the server", file=sys.stderr)
            return EXIT_INTERRUPTED
        except RequestTimeout:
            bar.finish()
            print(
                f"mcp-sync: {options.tool} timed out after {options.timeout:g} s; the call was cancelled on the server",
                file=sys.stderr,
            )
            return EXIT_TIMEOUT
        except Cancelled as exc:
            bar.finish()
            print(f"mcp-sync: cancelled: {exc}", file=sys.stderr)
            return EXIT_ERROR
        bar.finish()
    finally:
        try:
            client.close()
        except KeyboardInterrupt:
            pass
    if result.structured_content is not None and not options.text:
        _print_json(result.structured_content, sys.stdout)
    else:
        for block in result.content:
            text = getattr(block, "text", None)
            if text is not None:
                print(text)
            else:
                _print_json(model_to_wire(block), sys.stdout)
    if result.is_error:
        print("mcp-sync: the tool reported an error", file=sys.stderr)
        return EXIT_TOOL_ERROR
    return 0


def load_server(spec: str) -> Any:
    """Import ``package.module:attribute`` (default attribute ``server``)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name:
        raise SystemExit(f"mcp-sync: bad server spec {spec!r}; use package.module:server")
    sys.path.insert(0, ".")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute or "server")
    except AttributeError:
        raise SystemExit(f"mcp-sync: {module_name} has no attribute {attribute or 'server'!r}") from None


def cmd_serve(options: argparse.Namespace, command: list[str]) -> int:
    server = load_server(options.server)
    if options.http:
        server.run(transport="http", host=options.host, port=options.port)
    else:
        server.run()
    return 0


def cmd_demo(options: argparse.Namespace, command: list[str]) -> int:
    from .demo import run_demo

    return run_demo(sys.stdout)


def cmd_check_cancel(options: argparse.Namespace, command: list[str]) -> int:
    from .conformance import run_checks

    try:
        slow_args = json.loads(options.slow_args) if options.slow_args else {}
    except json.JSONDecodeError as exc:
        print(f"mcp-sync: --slow-args is not valid JSON: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return run_checks(
        command=command or None,
        url=options.url,
        slow_tool=options.slow_tool,
        slow_args=slow_args,
        race_calls=options.race_calls,
        grace=options.grace,
        verbose=options.verbose,
        out=sys.stdout,
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mcp-sync``."""
    parser = argparse.ArgumentParser(
        prog="mcp-sync",
        description="Talk to MCP servers from the command line; serve and check them.",
        epilog="Name a server with -- COMMAND [ARGS...] (stdio) or --url URL (Streamable HTTP).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def server_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--url", help="a Streamable HTTP server instead of a command")
        p.add_argument("--timeout", type=float, default=None, help="seconds before the call is cancelled")
        p.add_argument("-v", "--verbose", action="store_true", help="show the server's stderr")

    p = sub.add_parser("tools", help="list a server's tools")
    server_options(p)
    p.add_argument("--json", action="store_true", help="print the full tool objects as JSON")
    p.set_defaults(run=cmd_tools)

    p = sub.add_parser("ping", help="ping a server")
    server_options(p)
    p.set_defaults(run=cmd_ping)

    p = sub.add_parser("call", help="call a tool and print its result")
    p.add_argument("tool")
    p.add_argument("arguments", nargs="?", default="{}", help="the arguments as a JSON object")
    server_options(p)
    p.add_argument("--no-progress", action="store_true", help="do not ask for progress")
    p.add_argument("--text", action="store_true", help="print text content even when structured content exists")
    p.set_defaults(run=cmd_call)

    p = sub.add_parser("serve", help="serve package.module:server over stdio (or HTTP)")
    p.add_argument("server", help="package.module:attribute naming a mcp_sync Server")
    p.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.set_defaults(run=cmd_serve)

    p = sub.add_parser("demo", help="start a demo server, cancel a slow call, show the server stopped it")
    p.set_defaults(run=cmd_demo)

    p = sub.add_parser("check-cancel", help="check a server's cancellation behaviour against the MCP rules")
    p.add_argument("--url", help="a Streamable HTTP server instead of a command")
    p.add_argument("--slow-tool", help="a tool that runs long enough to be cancelled mid-flight")
    p.add_argument("--slow-args", default="{}", help="its arguments as a JSON object")
    p.add_argument("--race-calls", type=int, default=40, help="calls in the cancellation race")
    p.add_argument("--grace", type=float, default=1.0, help="seconds to watch for a forbidden response")
    p.add_argument("-v", "--verbose", action="store_true", help="show the server's stderr")
    p.set_defaults(run=cmd_check_cancel)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    ours, command = _split_command(sys.argv[1:] if argv is None else argv)
    options = build_parser().parse_args(ours)
    try:
        return int(options.run(options, command))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (McpError, ConnectionClosed, RequestTimeout, CapabilityError, OSError) as exc:
        print(f"mcp-sync: {exc}", file=sys.stderr)
        return EXIT_TIMEOUT if isinstance(exc, RequestTimeout) else EXIT_ERROR
