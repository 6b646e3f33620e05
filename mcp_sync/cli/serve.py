"""``mcp-sync serve``: import a :class:`~mcp_sync.server.Server` named ``module:attribute``
and serve it over stdio or Streamable HTTP. Anything but a ``Server`` -- a Flask app, a
module that does not import -- is refused with a one-line message naming what was found.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from typing import Any

from .parser import EXIT_OK, CommandError, UsageError

__all__ = ["load_server", "cmd_serve"]


def load_server(spec: str) -> Any:
    """Import ``package.module:attribute`` (default attribute ``server``) and check that it
    is a :class:`~mcp_sync.server.Server`. Mistakes raise
    :class:`~mcp_sync.cli.parser.UsageError` or :class:`~mcp_sync.cli.parser.CommandError`
    with a one-line message."""
    from ..server import Server

    module_name, _, attribute = spec.partition(":")
    attribute = attribute or "server"
    if (
        not module_name
        or not all(part.isidentifier() for part in module_name.split("."))
        or not attribute.isidentifier()
    ):
        raise UsageError(
            f"bad server {spec!r}: use package.module:attribute, e.g. mypackage.tools:server"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise UsageError(
                f"no module named {exc.name!r} (looked in the current directory and on sys.path)"
            ) from None
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
        also = (
            f"; the Server objects in it: {', '.join(found)}"
            if found
            else "; it defines no mcp_sync.Server"
        )
        raise UsageError(f"{module_name} has no attribute {attribute!r}{also}")
    value = getattr(module, attribute)
    if not isinstance(value, Server):
        kind = type(value)
        raise UsageError(
            f"{module_name}:{attribute} is a {kind.__module__}.{kind.__qualname__}, not an mcp_sync.Server"
        )
    return value


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def cmd_serve(options: argparse.Namespace, command: list[str]) -> int:
    """``mcp-sync serve``."""
    if command:
        raise UsageError("serve takes no -- COMMAND: it is the server (clients run it as theirs)")
    if not options.http:
        given = [
            flag
            for flag, value in (
                ("--host", options.host),
                ("--port", options.port),
                ("--path", options.path),
                ("--allowed-origin", options.allowed_origin),
            )
            if value
        ]
        if given:
            raise UsageError(f"{', '.join(given)} only apply with --http")
    if options.threads is not None and options.threads < 1:
        raise UsageError(f"--threads must be at least 1, not {options.threads}")
    if options.port is not None and not 0 <= options.port <= 65535:
        raise UsageError(f"--port must be from 0 to 65535 (0 picks a free one), not {options.port}")
    if options.path is not None and not options.path.startswith("/"):
        raise UsageError(f"--path must start with /, e.g. /mcp, not {options.path!r}")
    server = load_server(options.server)
    if options.threads is not None:
        server.max_workers = options.threads
    if not options.http:
        server.run()
        return EXIT_OK
    from ..http.embedded_server import serve_http

    host = options.host or "127.0.0.1"
    port = 8000 if options.port is None else options.port
    app = server.wsgi_app(
        path=options.path or "/mcp", allowed_origins=options.allowed_origin or None
    )
    try:
        handle = serve_http(app, host, port, in_thread=False)
    except OSError as exc:
        app.close()
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm) if in_main else None
    try:
        # said only once a Ctrl-C or SIGTERM is a clean stop (a client may stop us at once)
        print(f"mcp_sync: serving {server.name} at {handle.url}", file=sys.stderr, flush=True)
        handle.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        handle.stop()
    return EXIT_OK
