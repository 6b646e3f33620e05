"""The ``mcp-sync`` command line (also ``python -m mcp_sync``).

::

    mcp-sync tools -- python server.py                  list the tools of a server
    mcp-sync call TOOL '{"x": 1}' --timeout 5 -- CMD     call a tool, print the result
    mcp-sync resources | read URI | prompts | prompt NAME [ARGS]
    mcp-sync ping -- CMD                                 ping a server
    mcp-sync serve package.module:server [--http]        serve a Server over stdio or HTTP
    mcp-sync demo                                        issue, cancel and serve requests
    mcp-sync check-cancel -- CMD                         check a server's cancellation rules

A server is named either by a command after ``--`` (spawned, spoken to over stdio) or by
``--url URL`` (Streamable HTTP, with ``--header NAME:VALUE`` as often as needed). Options
and arguments may come in any order before the ``--``. ``--timeout`` bounds each wait: the
server's start and handshake, then each request (cancelled on expiry); ``--trace`` prints
every JSON-RPC message on stderr (the ``mcp_sync.wire`` logger). The exit codes are in
:data:`EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import signal
import sys
import textwrap
import threading
import time
from typing import Any, Callable, Iterator, NoReturn, Sequence, TextIO

from pydantic import BaseModel

from .cancel import Cancelled
from .cli_output import ProgressDisplay, content_lines, print_json
from .client import Client
from .errors import CapabilityError, ConnectionClosed, McpError, RequestTimeout
from .wire import model_to_wire

__all__ = [
    "main",
    "build_parser",
    "load_server",
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_TOOL_ERROR",
    "EXIT_TIMEOUT",
    "EXIT_INTERRUPTED",
    "EXIT_CODES",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TOOL_ERROR = 3
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success (check-cancel: no check failed)",
    EXIT_ERROR: "error: the server could not be started or reached, answered with an error, "
    "or closed the connection (check-cancel: a check failed)",
    EXIT_USAGE: "usage error: unknown option, missing or malformed argument (JSON, header, "
    "module:attribute)",
    EXIT_TOOL_ERROR: "call: the tool ran and reported an error (isError: true)",
    EXIT_TIMEOUT: "--timeout expired (a cancellation was sent for the request in flight)",
    EXIT_INTERRUPTED: "interrupted by Ctrl-C (a cancellation was sent for the request in flight)",
}
"""Exit status of ``mcp-sync`` -> what it means (also printed by ``--help``)."""

CLOSE_GRACE = 2.0
"""Seconds a spawned server has to exit after its stdin is closed, before SIGTERM."""
ABANDON_GRACE = 0.5
"""The same after a timeout or Ctrl-C: the user is waiting to get the prompt back."""


def _exit_code_text() -> str:
    rows = (
        textwrap.fill(text, width=88, initial_indent=f"  {code:<4} ", subsequent_indent=" " * 7)
        for code, text in EXIT_CODES.items()
    )
    return "exit codes:\n" + "\n".join(rows)


class UsageError(Exception):
    """A mistake on the command line: reported in one line, exit status 2."""


class CommandError(Exception):
    """An expected failure that is not a usage error: one line, exit status 1."""


# -- parsing ---------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """Exits with :data:`EXIT_USAGE` and, for commands that talk to a server, points at
    ``--`` when the server's command was given without it."""

    takes_server = False
    command_given = False

    def error(self, message: str) -> NoReturn:
        hint = ""
        if self.takes_server and not self.command_given and "unrecognized arguments" in message:
            hint = f"\nhint: put the server's command after --, for example: {self.prog} -- python server.py"
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}{hint}\n")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0: {text!r}")
    return value


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        raise argparse.ArgumentTypeError(f"not NAME:VALUE: {text!r}")
    return name.strip(), value.strip()


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    args = list(argv)
    if "--" in args:
        index = args.index("--")
        return args[:index], args[index + 1 :]
    return args, []


_TIMEOUT_HELP = (
    "longest wait, in seconds, for the server to start and complete the handshake, and then "
    "for each request; a request still running then gets a cancellation (default: 30 s for "
    "the handshake, no limit for requests)"
)


def _usage(name: str, positionals: str) -> str:
    words = f"mcp-sync {name} {positionals + ' ' if positionals else ''}[options]"
    return f"{words} -- COMMAND [ARGS...]\n       {words} --url URL"


def _epilog(examples: Sequence[str]) -> str:
    return "examples:\n" + "\n".join(f"  {e}" for e in examples) + "\n\n" + _exit_code_text()


def _build() -> tuple[argparse.ArgumentParser, dict[str, _Parser]]:
    parser = _Parser(
        prog="mcp-sync",
        description="Talk to MCP servers from the command line; serve and check them.",
        epilog="Name a server with -- COMMAND [ARGS...] (spawned, over stdio) or --url URL "
        "(Streamable HTTP). Each command's --help shows examples.\n\n" + _exit_code_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"mcp-sync {__version__}")
    sub = parser.add_subparsers(dest="subcommand", required=True, metavar="COMMAND", parser_class=_Parser)
    parsers: dict[str, _Parser] = {}

    def add(name: str, help_text: str, run: Callable[..., int], positionals: str, examples: Sequence[str]) -> _Parser:
        p: _Parser = sub.add_parser(
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            usage=_usage(name, positionals),
            epilog=_epilog(examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.takes_server = True
        p.set_defaults(run=run)
        parsers[name] = p
        return p

    def connection_options(p: argparse.ArgumentParser, *, timeout: bool = True) -> None:
        g = p.add_argument_group("server")
        g.add_argument("--url", help="a Streamable HTTP server instead of a command after --")
        g.add_argument(
            "--header", "-H", action="append", type=_header, default=[], metavar="NAME:VALUE",
            help="an HTTP header for --url (repeatable), e.g. 'Authorization: Bearer TOKEN'",
        )
        if timeout:
            g.add_argument("--timeout", type=_positive, default=None, metavar="SECONDS", help=_TIMEOUT_HELP)
        g.add_argument("--trace", action="store_true", help="print every JSON-RPC message sent and received on stderr")
        g.add_argument("-v", "--verbose", action="store_true", help="show the spawned server's stderr")

    server = "python server.py"
    url = "http://127.0.0.1:8000/mcp"

    p = add("tools", "list a server's tools", cmd_tools, "", [f"mcp-sync tools -- {server}", f"mcp-sync tools --url {url}"])
    connection_options(p)
    p.add_argument("--json", action="store_true", help="print the full tool objects as JSON")

    p = add(
        "call",
        "call a tool and print its result",
        cmd_call,
        "TOOL [JSON]",
        [
            f"mcp-sync call slow '{{\"seconds\": 5}}' --timeout 2 -- {server}",
            f"mcp-sync call get-tiny-image --raw --url {url} -H 'Authorization: Bearer TOKEN'",
        ],
    )
    p.add_argument("tool", help="the tool's name")
    p.add_argument("arguments", nargs="?", default="{}", metavar="JSON", help="the arguments as a JSON object (default {})")
    connection_options(p)
    out = p.add_argument_group("output")
    out.add_argument("--no-progress", action="store_true", help="do not ask for progress notifications")
    out.add_argument("--text", action="store_true", help="print the content blocks even when structured content exists")
    out.add_argument("--raw", action="store_true", help="print the result as JSON, binary data included")

    p = add("ping", "ping a server", cmd_ping, "", [f"mcp-sync ping -- {server}", f"mcp-sync ping --url {url}"])
    connection_options(p)

    p = add("resources", "list a server's resources and resource templates", cmd_resources, "",
            [f"mcp-sync resources -- {server}", f"mcp-sync resources --json --url {url}"])
    connection_options(p)
    p.add_argument("--json", action="store_true", help="print the full objects as JSON")

    p = add("read", "read a resource and print its contents", cmd_read, "URI",
            [f"mcp-sync read 'weather://Paris' -- {server}", f"mcp-sync read file:///etc/hostname --url {url}"])
    p.add_argument("uri", help="the resource's URI")
    connection_options(p)
    p.add_argument("--raw", action="store_true", help="print the result as JSON, binary data included")

    p = add("prompts", "list a server's prompts", cmd_prompts, "",
            [f"mcp-sync prompts -- {server}", f"mcp-sync prompts --url {url}"])
    connection_options(p)
    p.add_argument("--json", action="store_true", help="print the full prompt objects as JSON")

    p = add("prompt", "render a prompt and print its messages", cmd_prompt, "NAME [ARGS...]",
            [f"mcp-sync prompt greet name=Ada -- {server}", f"mcp-sync prompt greet '{{\"name\": \"Ada\"}}' --url {url}"])
    p.add_argument("name", help="the prompt's name")
    p.add_argument("prompt_arguments", nargs="*", metavar="ARGS", help="KEY=VALUE pairs, or one JSON object")
    connection_options(p)
    p.add_argument("--raw", action="store_true", help="print the result as JSON")

    p = add(
        "serve",
        "serve package.module:server over stdio, or over Streamable HTTP with --http",
        cmd_serve,
        "MODULE:ATTRIBUTE",
        [
            "mcp-sync serve mypackage.tools:server                      (stdio: a -- COMMAND for clients)",
            "mcp-sync serve mypackage.tools:server --http --port 8000   (clients use --url http://127.0.0.1:8000/mcp)",
        ],
    )
    p.usage = "mcp-sync serve MODULE:ATTRIBUTE [--threads N] [--http [--host HOST] [--port PORT] [--path PATH] [--allowed-origin ORIGIN]]"
    p.takes_server = False
    p.add_argument("server", help="package.module:attribute naming an mcp_sync Server (attribute default: server)")
    p.add_argument("--threads", type=int, default=None, metavar="N", help="handler threads per connection (the Server's max_workers)")
    p.add_argument("--trace", action="store_true", help="print every JSON-RPC message on stderr")
    g = p.add_argument_group("HTTP")
    g.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    g.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    g.add_argument("--port", type=int, default=None, help="port to listen on (default 8000; 0 picks a free one)")
    g.add_argument("--path", default=None, help="the endpoint's path (default /mcp)")
    g.add_argument(
        "--allowed-origin", action="append", default=[], metavar="ORIGIN",
        help="a browser Origin allowed besides localhost ones (repeatable; '*' allows any)",
    )

    p = add("demo", "start a demo server, cancel a slow call, show the server stopped it", cmd_demo, "", ["mcp-sync demo"])
    p.usage = "mcp-sync demo"
    p.takes_server = False

    p = add(
        "check-cancel",
        "check a server's cancellation behaviour against the MCP rules",
        cmd_check_cancel,
        "",
        [
            f"mcp-sync check-cancel --slow-tool slow --slow-args '{{\"seconds\": 2}}' -- {server}",
            f"mcp-sync check-cancel --url {url}",
        ],
    )
    connection_options(p, timeout=False)
    g = p.add_argument_group("checks")
    g.add_argument("--slow-tool", help="a tool that runs long enough to be cancelled mid-flight")
    g.add_argument("--slow-args", default="{}", metavar="JSON", help="its arguments as a JSON object")
    g.add_argument("--race-calls", type=int, default=40, help="calls in the cancellation race (0: no race)")
    g.add_argument("--grace", type=_positive, default=1.0, metavar="SECONDS", help="how long to watch for a forbidden response")
    return parser, parsers


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mcp-sync`` (its subcommands' parsers parse intermixed
    arguments: see :func:`parse_args`)."""
    return _build()[0]


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """Parse a command line (without the program name) into options and the server command
    after ``--``. Options and positional arguments may come in any order. Usage errors exit
    with :data:`EXIT_USAGE`."""
    ours, command = _split_command(argv)
    parser, parsers = _build()
    chosen = parsers.get(ours[0]) if ours else None
    if chosen is None:  # no or unknown subcommand, --help, --version: argparse says what to do
        return parser.parse_args(ours), command
    chosen.command_given = bool(command)
    options = chosen.parse_intermixed_args(ours[1:])
    options.subcommand = ours[0]
    return options, command


# -- connecting ------------------------------------------------------------------------------
HANDSHAKE_TIMEOUT = 30.0
"""Longest wait for the handshake when no ``--timeout`` is given."""


class HandshakeTimeout(RequestTimeout):
    """``--timeout`` expired before the server answered ``initialize``."""


def _load_json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} are not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a JSON object, not {type(value).__name__}: {text!r}")
    return value


def _describe_server_missing(name: str) -> str:
    return (
        f"name a server: mcp-sync {name} [options] -- COMMAND [ARGS...]  or  mcp-sync {name} [options] --url URL\n"
        f"  for example: mcp-sync {name} -- python server.py"
    )


def _transport_options(options: argparse.Namespace, command: list[str]) -> tuple[str | None, dict[str, str]]:
    """Check that exactly one server is named; returns (url, headers)."""
    url = getattr(options, "url", None)
    headers = dict(getattr(options, "header", None) or [])
    if url and command:
        raise UsageError("name one server: either --url URL or -- COMMAND, not both")
    if not url and not command:
        raise UsageError(_describe_server_missing(options.subcommand))
    if headers and not url:
        raise UsageError("--header is sent with --url requests; a server command gets no headers")
    if url and not url.startswith(("http://", "https://")):
        raise UsageError(f"--url must start with http:// or https://: {url!r}")
    return url, headers


def _http_transport_class() -> Any:
    try:
        from .transports.http_client import HttpClientTransport
    except ImportError as exc:
        raise CommandError(f"--url needs the http extra: pip install 'mcp-sync-threaded[http]' ({exc})") from None
    return HttpClientTransport


def _spawn(command: list[str], verbose: bool) -> Any:
    from .transports.subprocess import SubprocessTransport

    try:
        # without -v the server's stderr is kept (its last lines), to explain a failed start
        return SubprocessTransport(command, stderr="inherit" if verbose else "capture", close_grace=CLOSE_GRACE)
    except OSError as exc:
        raise CommandError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None


def _handshake_timeout(seconds: float) -> HandshakeTimeout:
    return HandshakeTimeout(
        f"the server did not complete the handshake within {seconds:g} s "
        "(initialize is never cancelled; the connection was closed)"
    )


def _open(options: argparse.Namespace, command: list[str]) -> Client:
    """Connect and initialize, waiting at most ``--timeout`` (or :data:`HANDSHAKE_TIMEOUT`)."""
    url, headers = _transport_options(options, command)
    limit = getattr(options, "timeout", None) or HANDSHAKE_TIMEOUT
    if url:
        _http_transport_class()
        try:
            return Client.http(url, headers=headers or None, connect_timeout=min(10.0, limit), init_timeout=limit)
        except RequestTimeout:
            raise _handshake_timeout(limit) from None
    transport = _spawn(command, options.verbose)
    client = Client(transport)
    client.endpoint.start()
    try:
        client.initialize(timeout=limit)
    except BaseException as exc:
        transport.close_grace = 0.0  # it never became a session: stop it now
        client.close()
        if isinstance(exc, RequestTimeout):
            raise _handshake_timeout(limit) from None
        if isinstance(exc, KeyboardInterrupt):
            raise CommandInterrupted("interrupted during the handshake") from None
        if isinstance(exc, ConnectionClosed):
            raise CommandError(_failed_start(exc, transport, captured=not options.verbose)) from None
        raise
    return client


STDERR_TAIL = 5
"""Lines of a server's stderr shown when it fails during the handshake."""


def _failed_start(exc: ConnectionClosed, transport: Any, *, captured: bool) -> str:
    """What to say when a spawned server closed the connection during the handshake
    (``captured``: its stderr was kept, not shown)."""
    text = f"{exc} during the handshake"
    status = transport.process.poll()
    if status is not None and "exit" not in text:
        text += f" (the server exited with status {status})"
    tail = [line for line in list(transport.stderr_lines)[-STDERR_TAIL:] if line.strip() and line not in text]
    if tail:
        text += "; the end of its stderr:\n" + "\n".join(f"  {line}" for line in tail)
    elif captured and not transport.stderr_lines and status is not None:
        text += "; it wrote nothing on stderr"
    elif not captured:
        text += " (its stderr is above)"
    return text


class CommandInterrupted(Exception):
    """Ctrl-C with nothing to cancel: exit status 130 with this message."""


@contextlib.contextmanager
def _connection(options: argparse.Namespace, command: list[str], what: str) -> Iterator[Client]:
    """A connected client; the request run inside gets honest timeout and Ctrl-C messages."""
    client = _open(options, command)
    abandoned = False
    try:
        yield client
    except RequestTimeout as exc:
        abandoned = True
        raise RequestTimeout(
            f"{what} timed out after {options.timeout:g} s; a cancellation was sent to the server (it may ignore it)"
        ) from exc
    except KeyboardInterrupt:
        abandoned = True
        raise CommandInterrupted(f"interrupted; a cancellation was sent to the server for {what} (it may ignore it)") from None
    finally:
        transport = client.transport
        if abandoned and hasattr(transport, "close_grace"):
            transport.close_grace = ABANDON_GRACE
        try:
            client.close()
        except KeyboardInterrupt:
            pass


def _as_wire(value: Any) -> Any:
    """A result model (or dict) as the JSON object the server sent."""
    return model_to_wire(value, result=True) if isinstance(value, BaseModel) else value


def _server_name(client: Client) -> str:
    info = client.server_info
    name = info.get("name") if isinstance(info, dict) else getattr(info, "name", None)
    return str(name or "?")


def _print_lines(blocks: Sequence[Any], out: TextIO) -> None:
    for block in blocks:
        for line in content_lines(_as_wire(block)):
            out.write(line + "\n")


# -- commands --------------------------------------------------------------------------------
def cmd_tools(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync tools``."""
    with _connection(options, command, "tools/list") as client:
        tools = client.list_tools(timeout=options.timeout)
    if options.json:
        print_json([_as_wire(t) for t in tools], sys.stdout)
    else:
        for tool in tools:
            print(f"{tool.name}: {tool.description or ''}".rstrip())
    return EXIT_OK


def cmd_ping(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync ping``."""
    with _connection(options, command, "ping") as client:
        start = time.perf_counter()
        client.ping(timeout=options.timeout)
        elapsed = (time.perf_counter() - start) * 1000
        name = _server_name(client)
    print(f"pong from {name} in {elapsed:.2f} ms")
    return EXIT_OK


def cmd_call(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync call``."""
    arguments = _load_json_object(options.arguments, "the arguments")
    progress: ProgressDisplay | None = None
    try:
        with _connection(options, command, options.tool) as client:
            progress = ProgressDisplay(sys.stderr)  # elapsed time counts from the call
            result = _as_wire(
                client.call_tool(
                    options.tool,
                    arguments,
                    timeout=options.timeout,
                    on_progress=None if options.no_progress else progress,
                )
            )
    except Cancelled as exc:
        raise CommandError(f"cancelled: {exc}") from None
    finally:
        if progress is not None:
            progress.finish()
    if options.raw:
        print_json(result, sys.stdout)
    elif result.get("structuredContent") is not None and not options.text:
        print_json(result["structuredContent"], sys.stdout)
    else:
        _print_lines(result.get("content") or [], sys.stdout)
    if result.get("isError"):
        print(f"mcp-sync: the tool {options.tool} reported an error (exit {EXIT_TOOL_ERROR})", file=sys.stderr)
        return EXIT_TOOL_ERROR
    return EXIT_OK


def cmd_resources(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync resources``."""
    with _connection(options, command, "resources/list") as client:
        resources = client.list_resources(timeout=options.timeout)
        templates = client.list_resource_templates(timeout=options.timeout)
    if options.json:
        print_json({"resources": [_as_wire(r) for r in resources], "resourceTemplates": [_as_wire(t) for t in templates]}, sys.stdout)
        return EXIT_OK
    for resource in map(_as_wire, resources):
        print(f"{resource['uri']}  {resource.get('name', '')}: {resource.get('description', '')}".rstrip(": "))
    for template in map(_as_wire, templates):
        text = f"{template['uriTemplate']}  (template) {template.get('name', '')}: {template.get('description', '')}"
        print(text.rstrip(": "))
    return EXIT_OK


def cmd_read(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync read``."""
    with _connection(options, command, "resources/read") as client:
        result = _as_wire(client.read_resource(options.uri, timeout=options.timeout))
    if options.raw:
        print_json(result, sys.stdout)
    else:
        _print_lines(result.get("contents") or [], sys.stdout)
    return EXIT_OK


def cmd_prompts(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync prompts``."""
    with _connection(options, command, "prompts/list") as client:
        prompts = [_as_wire(p) for p in client.list_prompts(timeout=options.timeout)]
    if options.json:
        print_json(prompts, sys.stdout)
        return EXIT_OK
    for prompt in prompts:
        names = [a["name"] + ("" if a.get("required") else "?") for a in prompt.get("arguments") or []]
        print(f"{prompt['name']}({', '.join(names)}): {prompt.get('description', '')}".rstrip(": "))
    return EXIT_OK


def _prompt_arguments(words: Sequence[str]) -> dict[str, str]:
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        values = _load_json_object(words[0], "the prompt arguments")
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    arguments: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise UsageError(f"prompt arguments are KEY=VALUE pairs or one JSON object, not {word!r}")
        arguments[key] = value
    return arguments


def cmd_prompt(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync prompt``."""
    arguments = _prompt_arguments(options.prompt_arguments)
    with _connection(options, command, "prompts/get") as client:
        result = _as_wire(client.get_prompt(options.name, arguments or None, timeout=options.timeout))
    if options.raw:
        print_json(result, sys.stdout)
        return EXIT_OK
    if result.get("description"):
        print(f"# {result['description']}")
    for message in result.get("messages") or []:
        lines = list(content_lines(message.get("content") or {}))
        print(f"{message.get('role', '?')}: {lines[0] if lines else ''}")
        for line in lines[1:]:
            print(line)
    return EXIT_OK


def load_server(spec: str) -> Any:
    """Import ``package.module:attribute`` (default attribute ``server``) and check that it
    is an :class:`mcp_sync.Server`. Mistakes raise :class:`UsageError` or
    :class:`CommandError` with a one-line message."""
    from .server import Server

    module_name, _, attribute = spec.partition(":")
    attribute = attribute or "server"
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")) or not attribute.isidentifier():
        raise UsageError(f"bad server {spec!r}: use package.module:attribute, e.g. mypackage.tools:server")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise UsageError(f"no module named {exc.name!r} (looked in the current directory and on sys.path)") from None
        raise CommandError(f"importing {module_name} failed: {exc}") from None
    except Exception as exc:
        where = ""
        if isinstance(exc, SyntaxError) and exc.filename:
            where = f" ({exc.filename}, line {exc.lineno})"
        raise CommandError(
            f"importing {module_name} failed: {type(exc).__name__}: {exc}{where}; "
            f"run python -c 'import {module_name}' to see the traceback"
        ) from None
    if not hasattr(module, attribute):
        found = [name for name, value in vars(module).items() if isinstance(value, Server)]
        also = f"; the Server objects in it: {', '.join(found)}" if found else "; it defines no mcp_sync.Server"
        raise UsageError(f"{module_name} has no attribute {attribute!r}{also}")
    value = getattr(module, attribute)
    if not isinstance(value, Server):
        kind = type(value)
        raise UsageError(f"{module_name}:{attribute} is a {kind.__module__}.{kind.__qualname__}, not an mcp_sync.Server")
    return value


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def cmd_serve(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync serve``."""
    if command:
        raise UsageError("serve takes no -- COMMAND: it is the server (clients run it as theirs)")
    if not options.http:
        given = [flag for flag, value in (("--host", options.host), ("--port", options.port), ("--path", options.path),
                                          ("--allowed-origin", options.allowed_origin)) if value]
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --http")
    if options.threads is not None and options.threads < 1:
        raise UsageError(f"--threads must be at least 1, not {options.threads}")
    server = load_server(options.server)
    if options.threads is not None:
        server.max_workers = options.threads
    if not options.http:
        server.run()
        return EXIT_OK
    from .http_app import serve_http

    host = options.host or "127.0.0.1"
    port = 8000 if options.port is None else options.port
    app = server.wsgi_app(path=options.path or "/mcp", allowed_origins=options.allowed_origin or None)
    try:
        handle = serve_http(app, host, port, in_thread=False)
    except OSError as exc:
        app.close()
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    print(f"mcp_sync: serving {server.name} at {handle.url}", file=sys.stderr, flush=True)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm) if in_main else None
    try:
        handle.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        handle.stop()
    return EXIT_OK


def cmd_demo(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync demo``."""
    from .demo import run_demo

    return run_demo(sys.stdout)


def cmd_check_cancel(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync check-cancel``."""
    from .conformance import run_checks

    slow_args = _load_json_object(options.slow_args, "--slow-args")
    url, headers = _transport_options(options, command)
    if url:
        _http_transport_class()
    return run_checks(
        command=command or None,
        url=url,
        headers=headers or None,
        slow_tool=options.slow_tool,
        slow_args=slow_args,
        race_calls=options.race_calls,
        grace=options.grace,
        verbose=options.verbose,
        out=sys.stdout,
    )


def _enable_trace(stream: TextIO) -> None:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    wire = logging.getLogger("mcp_sync.wire")
    wire.addHandler(handler)
    wire.setLevel(logging.DEBUG)
    wire.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see :data:`EXIT_CODES`)."""
    options, command = parse_args(sys.argv[1:] if argv is None else argv)
    if getattr(options, "trace", False):
        _enable_trace(sys.stderr)
    try:
        return int(options.run(options, command))
    except UsageError as exc:
        print(f"mcp-sync {options.subcommand}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RequestTimeout as exc:
        print(f"mcp-sync: {exc}", file=sys.stderr)
        return EXIT_TIMEOUT
    except CommandInterrupted as exc:
        print(f"mcp-sync: {exc}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("mcp-sync: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (CommandError, McpError, ConnectionClosed, CapabilityError, OSError) as exc:
        print(f"mcp-sync: {exc}", file=sys.stderr)
        return EXIT_ERROR
