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
:data:`~mcp_sync.cli.parser.EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

from pydantic import BaseModel

from ..client import Client
from ..errors import (
    AuthorizationError,
    Cancelled,
    CapabilityError,
    ConnectionClosed,
    McpError,
    RequestTimeout,
    ServerExited,
)
from ..wire import model_to_wire
from .output import ProgressDisplay, content_lines, print_json
from .parser import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_TOOL_ERROR,
    EXIT_USAGE,
    CommandError,
    UsageError,
    double_dash_hint,
    parse_args,
)
from .serve import cmd_serve

# the exit codes (EXIT_*) and the parser are in cli.parser, load_server in cli.serve
__all__ = ["main", "COMMANDS", "HANDSHAKE_TIMEOUT", "CLOSE_GRACE", "ABANDON_GRACE", "STDERR_TAIL"]

CLOSE_GRACE = 2.0
"""Seconds a spawned server has to exit after its stdin is closed, before SIGTERM."""
ABANDON_GRACE = 0.5
"""The same after a timeout or Ctrl-C, when the user is waiting to get the prompt back."""


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


def _transport_options(
    options: argparse.Namespace, command: list[str]
) -> tuple[str | None, dict[str, str]]:
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
    if url:
        _check_url(url)
    return url, headers


def _check_url(url: str) -> None:
    """A usage error for a URL without a host or with a bad port (httpx raised InvalidURL
    with a traceback, or said the scheme was missing)."""
    parts = urllib.parse.urlsplit(url)
    try:
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise UsageError(f"--url has a bad port ({exc}): {url!r}") from None
    if not parts.hostname or any(c.isspace() for c in parts.netloc):
        raise UsageError(f"--url needs a host, as in http://127.0.0.1:8000/mcp: {url!r}")


def _http_transport_class() -> Any:
    try:
        from ..http.client_transport import HttpClientTransport
    except ImportError as exc:
        raise CommandError(
            f"--url needs the http extra: pip install 'mcp-sync-threaded[http]' ({exc})"
        ) from None
    return HttpClientTransport


def _spawn(command: list[str], verbose: bool) -> Any:
    from ..transports.subprocess import SubprocessTransport

    try:
        # without -v the server's stderr is not shown; the transport keeps its end
        # (ServerExited.stderr_tail), to explain a failed start
        return SubprocessTransport(
            command, stderr="inherit" if verbose else "discard", close_grace=CLOSE_GRACE
        )
    except OSError as exc:
        raise CommandError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None


def _handshake_timeout(seconds: float) -> HandshakeTimeout:
    return HandshakeTimeout(
        f"the server did not complete the handshake within {seconds:g} s "
        "(initialize is never cancelled; the connection was closed)"
    )


def _oauth(options: argparse.Namespace) -> Any:
    """The ``mcp_sync.auth.OAuth`` that ``--oauth`` asks for (``None`` without it)."""
    oauth = getattr(options, "oauth", False)
    client_id = getattr(options, "client_id", None)
    secret = getattr(options, "client_secret", None)
    if not oauth:
        if client_id or secret or getattr(options, "oauth_scope", None):
            raise UsageError("--client-id, --client-secret and --oauth-scope go with --oauth")
        return None
    if not getattr(options, "url", None):
        raise UsageError("--oauth is for --url servers")
    if secret and not client_id:
        raise UsageError("--client-secret needs --client-id")
    try:
        from ..auth import OAuth
    except ImportError as exc:
        raise UsageError(
            f"--oauth needs the oauth extra: pip install 'mcp-sync-threaded[oauth]' ({exc})"
        ) from None
    return OAuth(client_id=client_id, client_secret=secret, scope=options.oauth_scope)


def _open(options: argparse.Namespace, command: list[str]) -> Client:
    """Connect and initialize, waiting at most ``--timeout`` (or :data:`HANDSHAKE_TIMEOUT`)."""
    url, headers = _transport_options(options, command)
    limit = getattr(options, "timeout", None) or HANDSHAKE_TIMEOUT
    if url:
        _http_transport_class()
        auth = _oauth(options)
        try:
            return Client.http(  # initialize at once, as over stdio below
                url,
                headers=headers or None,
                auth=auth,
                connect_timeout=min(10.0, limit),
                # the sign-in happens inside the initialize POST: give the user its time too
                init_timeout=limit if auth is None else limit + auth.authorize_timeout,
                protocol="legacy",
            )
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
            raise CommandError(_failed_start(exc, captured=not options.verbose)) from None
        raise
    return client


STDERR_TAIL = 5
"""Lines of a server's stderr shown when it fails during the handshake."""


def _failed_start(exc: ConnectionClosed, *, captured: bool) -> str:
    """What to say when a spawned server closed the connection during the handshake
    (``captured``: its stderr was kept, not shown)."""
    if not isinstance(exc, ServerExited):
        return f"{exc} during the handshake"
    text = f"{exc.what} during the handshake"
    tail = [line for line in exc.stderr_tail.splitlines()[-STDERR_TAIL:] if line.strip()]
    if not tail:
        return text + " (it wrote nothing on stderr)"
    if not captured:
        return text + " (its stderr is above)"
    return text + "; the end of its stderr:\n" + "\n".join(f"  {line}" for line in tail)


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
        raise CommandInterrupted(
            f"interrupted; a cancellation was sent to the server for {what} (it may ignore it)"
        ) from None
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
        name = client.server_info.name
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
        print(
            f"mcp-sync: the tool {options.tool} reported an error (exit {EXIT_TOOL_ERROR})",
            file=sys.stderr,
        )
        return EXIT_TOOL_ERROR
    return EXIT_OK


def cmd_resources(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync resources``."""
    with _connection(options, command, "resources/list") as client:
        resources = client.list_resources(timeout=options.timeout)
        templates = client.list_resource_templates(timeout=options.timeout)
    if options.json:
        print_json(
            {
                "resources": [_as_wire(r) for r in resources],
                "resourceTemplates": [_as_wire(t) for t in templates],
            },
            sys.stdout,
        )
        return EXIT_OK
    for resource in map(_as_wire, resources):
        print(
            f"{resource['uri']}  {resource.get('name', '')}: {resource.get('description', '')}".rstrip(
                ": "
            )
        )
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
        names = [
            a["name"] + ("" if a.get("required") else "?") for a in prompt.get("arguments") or []
        ]
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
            raise UsageError(
                f"prompt arguments are KEY=VALUE pairs or one JSON object, not {word!r}"
            )
        arguments[key] = value
    return arguments


def cmd_prompt(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync prompt``."""
    arguments = _prompt_arguments(options.prompt_arguments)
    with _connection(options, command, "prompts/get") as client:
        result = _as_wire(
            client.get_prompt(options.name, arguments or None, timeout=options.timeout)
        )
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


def cmd_demo(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync demo``."""
    from .demo import run_demo

    return run_demo(sys.stdout)


def cmd_check_cancel(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync check-cancel``."""
    from .check_cancel import run_checks

    slow_args = _load_json_object(options.slow_args, "--slow-args")
    if getattr(options, "oauth", False):
        raise UsageError("check-cancel does not take --oauth (pass a token with --header)")
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


COMMANDS: dict[str, Callable[[argparse.Namespace, list[str]], int]] = {
    "tools": cmd_tools,
    "call": cmd_call,
    "ping": cmd_ping,
    "resources": cmd_resources,
    "read": cmd_read,
    "prompts": cmd_prompts,
    "prompt": cmd_prompt,
    "serve": cmd_serve,
    "demo": cmd_demo,
    "check-cancel": cmd_check_cancel,
}
"""Subcommand -> the function that runs it (the parser is in :mod:`mcp_sync.cli.parser`)."""


def _enable_trace(stream: TextIO) -> None:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    wire = logging.getLogger("mcp_sync.wire")
    wire.addHandler(handler)
    wire.setLevel(logging.DEBUG)
    wire.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (see :data:`~mcp_sync.cli.parser.EXIT_CODES`)."""
    options, command = parse_args(sys.argv[1:] if argv is None else argv)
    if getattr(options, "trace", False):
        _enable_trace(sys.stderr)
    run: Callable[[argparse.Namespace, list[str]], int] = COMMANDS[options.subcommand]
    try:
        return int(run(options, command))
    except UsageError as exc:
        hint = ""
        usage = getattr(options, "usage", None)
        if (
            usage
            and not command
            and not getattr(options, "url", None)
            and "name a server" not in str(exc)
        ):
            hint = "\n" + double_dash_hint(usage)  # its words were likely taken for arguments
        print(f"mcp-sync {options.subcommand}: error: {exc}{hint}", file=sys.stderr)
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
    except (
        CommandError,
        McpError,
        ConnectionClosed,
        CapabilityError,
        AuthorizationError,
        OSError,
    ) as exc:
        print(f"mcp-sync: {exc}", file=sys.stderr)
        return EXIT_ERROR
