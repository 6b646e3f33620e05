"""The command line's grammar: the ``mcp-sync`` argument parser, its exit codes and its
usage errors (see :mod:`mcp_sync.cli` for what each subcommand does).

Each subcommand parses *intermixed* arguments, so options may come before, between or after
its positional arguments; everything after ``--`` is the server's command. Usage errors exit
with :data:`EXIT_USAGE`, and a server command given without ``--`` gets a hint.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence
from typing import NoReturn

__all__ = [
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_TOOL_ERROR",
    "EXIT_TIMEOUT",
    "EXIT_INTERRUPTED",
    "EXIT_CODES",
    "UsageError",
    "CommandError",
    "double_dash_hint",
    "build_parser",
    "parse_args",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
"""The exit code of a usage error (an unknown option, a missing argument); see :data:`EXIT_CODES`."""
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
def double_dash_hint(usage: str) -> str:
    """The hint for a server command given without ``--``; ``usage`` is the subcommand's
    first usage line (``mcp-sync call TOOL [JSON] [options] -- COMMAND [ARGS...]``)."""
    words = usage.split(" -- ", 1)[0].replace(" [options]", "")
    return f"hint: put the server's command after --, for example: {words} -- python server.py"


class _Parser(argparse.ArgumentParser):
    """Exits with :data:`EXIT_USAGE` and, for commands that talk to a server, points at
    ``--`` when the server's command was given without it."""

    takes_server = False
    command_given = False

    def error(self, message: str) -> NoReturn:
        hint = ""
        if self.takes_server and not self.command_given and "unrecognized arguments" in message:
            hint = "\n" + double_dash_hint(self.usage or "")
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
    if not text.isascii() or any(not c.isprintable() for c in text):
        # what HTTP/1.1 clients send; it failed later as "write failed: 'ascii' codec ..."
        raise argparse.ArgumentTypeError(
            f"a header is printable ASCII, without line breaks: {text!r}"
        )
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
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"mcp-sync {__version__}")
    sub = parser.add_subparsers(
        dest="subcommand", required=True, metavar="COMMAND", parser_class=_Parser
    )
    parsers: dict[str, _Parser] = {}

    def add(name: str, help_text: str, positionals: str, examples: Sequence[str]) -> _Parser:
        p: _Parser = sub.add_parser(
            name,
            help=help_text,
            description=help_text[0].upper() + help_text[1:] + ".",
            usage=_usage(name, positionals),
            epilog=_epilog(examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.takes_server = True
        parsers[name] = p
        return p

    def connection_options(p: argparse.ArgumentParser, *, timeout: bool = True) -> None:
        g = p.add_argument_group("server")
        g.add_argument("--url", help="a Streamable HTTP server instead of a command after --")
        g.add_argument(
            "--header",
            "-H",
            action="append",
            type=_header,
            default=[],
            metavar="NAME:VALUE",
            help="an HTTP header for --url (repeatable), e.g. 'Authorization: Bearer TOKEN'",
        )
        g.add_argument(
            "--oauth",
            action="store_true",
            help="authorize for --url with OAuth (opens a browser; needs the oauth extra)",
        )
        g.add_argument("--client-id", help="a client registered at the authorization server")
        g.add_argument("--client-secret", help="the secret of --client-id")
        g.add_argument("--oauth-scope", metavar="SCOPES", help="scopes to ask for as well")
        if timeout:
            g.add_argument(
                "--timeout", type=_positive, default=None, metavar="SECONDS", help=_TIMEOUT_HELP
            )
        g.add_argument(
            "--trace",
            action="store_true",
            help="print every JSON-RPC message sent and received on stderr",
        )
        g.add_argument(
            "-v", "--verbose", action="store_true", help="show the spawned server's stderr"
        )

    server = "python server.py"
    url = "http://127.0.0.1:8000/mcp"

    p = add(
        "tools",
        "list a server's tools",
        "",
        [f"mcp-sync tools -- {server}", f"mcp-sync tools --url {url}"],
    )
    connection_options(p)
    p.add_argument("--json", action="store_true", help="print the full tool objects as JSON")

    p = add(
        "call",
        "call a tool and print its result",
        "TOOL [JSON]",
        [
            f"mcp-sync call slow '{{\"seconds\": 5}}' --timeout 2 -- {server}",
            f"mcp-sync call get-tiny-image --raw --url {url} -H 'Authorization: Bearer TOKEN'",
        ],
    )
    p.add_argument("tool", help="the tool's name")
    p.add_argument(
        "arguments",
        nargs="?",
        default="{}",
        metavar="JSON",
        help="the arguments as a JSON object (default {})",
    )
    connection_options(p)
    out = p.add_argument_group("output")
    out.add_argument(
        "--no-progress", action="store_true", help="do not ask for progress notifications"
    )
    out.add_argument(
        "--text",
        action="store_true",
        help="print the content blocks even when structured content exists",
    )
    out.add_argument(
        "--raw", action="store_true", help="print the result as JSON, binary data included"
    )

    p = add(
        "ping", "ping a server", "", [f"mcp-sync ping -- {server}", f"mcp-sync ping --url {url}"]
    )
    connection_options(p)

    p = add(
        "resources",
        "list a server's resources and resource templates",
        "",
        [f"mcp-sync resources -- {server}", f"mcp-sync resources --json --url {url}"],
    )
    connection_options(p)
    p.add_argument("--json", action="store_true", help="print the full objects as JSON")

    p = add(
        "read",
        "read a resource and print its contents",
        "URI",
        [
            f"mcp-sync read 'weather://Paris' -- {server}",
            f"mcp-sync read file:///etc/hostname --url {url}",
        ],
    )
    p.add_argument("uri", help="the resource's URI")
    connection_options(p)
    p.add_argument(
        "--raw", action="store_true", help="print the result as JSON, binary data included"
    )

    p = add(
        "prompts",
        "list a server's prompts",
        "",
        [f"mcp-sync prompts -- {server}", f"mcp-sync prompts --url {url}"],
    )
    connection_options(p)
    p.add_argument("--json", action="store_true", help="print the full prompt objects as JSON")

    p = add(
        "prompt",
        "render a prompt and print its messages",
        "NAME [ARGS...]",
        [
            f"mcp-sync prompt greet name=Ada -- {server}",
            f'mcp-sync prompt greet \'{{"name": "Ada"}}\' --url {url}',
        ],
    )
    p.add_argument("name", help="the prompt's name")
    p.add_argument(
        "prompt_arguments", nargs="*", metavar="ARGS", help="KEY=VALUE pairs, or one JSON object"
    )
    connection_options(p)
    p.add_argument("--raw", action="store_true", help="print the result as JSON")

    p = add(
        "serve",
        "serve package.module:server over stdio, or over Streamable HTTP with --http",
        "MODULE:ATTRIBUTE",
        [
            "mcp-sync serve mypackage.tools:server                      (stdio: a -- COMMAND for clients)",
            "mcp-sync serve mypackage.tools:server --http --port 8000   (clients use --url http://127.0.0.1:8000/mcp)",
        ],
    )
    p.usage = "mcp-sync serve MODULE:ATTRIBUTE [--threads N] [--http [--host HOST] [--port PORT] [--path PATH] [--allowed-origin ORIGIN]]"
    p.takes_server = False
    p.add_argument(
        "server",
        help="package.module:attribute naming an mcp_sync Server (attribute default: server)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="handler threads per connection (the Server's max_workers)",
    )
    p.add_argument("--trace", action="store_true", help="print every JSON-RPC message on stderr")
    g = p.add_argument_group("HTTP")
    g.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    g.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    g.add_argument(
        "--port",
        type=int,
        default=None,
        help="port to listen on (default 8000; 0 picks a free one)",
    )
    g.add_argument("--path", default=None, help="the endpoint's path (default /mcp)")
    g.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser Origin allowed besides localhost ones (repeatable; '*' allows any)",
    )

    p = add(
        "demo",
        "start a demo server, cancel a slow call, show the server stopped it",
        "",
        ["mcp-sync demo"],
    )
    p.usage = "mcp-sync demo"
    p.takes_server = False

    p = add(
        "check-cancel",
        "check a server's cancellation behaviour against the MCP rules",
        "",
        [
            f"mcp-sync check-cancel --slow-tool slow --slow-args '{{\"seconds\": 2}}' -- {server}",
            f"mcp-sync check-cancel --url {url}",
        ],
    )
    connection_options(p, timeout=False)
    g = p.add_argument_group("checks")
    g.add_argument("--slow-tool", help="a tool that runs long enough to be cancelled mid-flight")
    g.add_argument(
        "--slow-args", default="{}", metavar="JSON", help="its arguments as a JSON object"
    )
    g.add_argument(
        "--race-calls", type=int, default=40, help="calls in the cancellation race (0: no race)"
    )
    g.add_argument(
        "--grace",
        type=_positive,
        default=1.0,
        metavar="SECONDS",
        help="how long to watch for a forbidden response",
    )
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
    options.usage = chosen.usage if chosen.takes_server else None
    return options, command
