"""Call a slow tool with ``timeout=``, from a plain blocking script; Ctrl-C cancels it too.

Run it::

    python examples/call_with_timeout.py                       # slow(5 s) with timeout=1 s
    python examples/call_with_timeout.py --seconds 1 --timeout 3   # completes in time
    python examples/call_with_timeout.py --seconds 60 --timeout 120  # then press Ctrl-C

It spawns ``slow_server.py`` (next to this file) over stdio and calls its ``slow`` tool:

* the call completes: the result is printed (exit 0);
* ``timeout`` expires: ``call_tool`` sends ``notifications/cancelled`` and raises
  ``RequestTimeout``; the script then asks the server how that run ended (exit 0: the
  timeout is the expected outcome here, handled);
* Ctrl-C: the ``KeyboardInterrupt`` cancels the call on the wire, then propagates; the script
  catches it, shows the server's confirmation, and exits with 130 (128 + SIGINT) like any
  well-behaved command line tool.

Then it calls ``fetch_record``, whose *server-side* deadline (``@server.tool(timeout=0.5)``)
turns a stuck blocking call into a tool error (skip it with ``--no-fetch``).
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from mcp_sync import Client, RequestTimeout

SERVER = Path(__file__).with_name("slow_server.py")


def say(text: str) -> None:
    print(text, flush=True)


def server_report(client: Client) -> str:
    """How the server says the latest ``slow`` run ended (it waits, bounded, for the end)."""
    report: dict[str, Any] = (
        client.call_tool("last_run", {"wait_seconds": 5}, timeout=10).structured_content or {}
    )
    text = f"{report.get('state')} after {report.get('steps_done')} steps"
    if report.get("reason"):
        text += f" (reason: {report['reason']})"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="how long the slow tool works")
    parser.add_argument(
        "--timeout", type=float, default=1.0, help="how long we are willing to wait"
    )
    parser.add_argument(
        "--no-fetch", action="store_true", help="skip the server-side deadline part"
    )
    options = parser.parse_args(argv)

    # --ignore-sigint: Ctrl-C in a terminal goes to the whole process group; we want only this
    # process to see it and cancel on the wire (the server exits when its stdin closes).
    with Client.stdio([sys.executable, str(SERVER), "--ignore-sigint"]) as client:
        say(
            f"connected to {client.server_info.name}; calling slow(seconds={options.seconds:g}) with timeout={options.timeout:g}"
        )
        started = threading.Event()

        def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if not started.is_set():
                started.set()
                say("call started: the server is working (press Ctrl-C to cancel it)")

        try:
            result = client.call_tool(
                "slow",
                {"seconds": options.seconds},
                timeout=options.timeout,
                on_progress=on_progress,
            )
        except RequestTimeout as exc:
            say(f"timed out: {exc}; a cancellation was sent to the server")
            say(f"server confirms: slow {server_report(client)}")
        except KeyboardInterrupt:
            say("interrupted: a cancellation was sent to the server")
            say(f"server confirms: slow {server_report(client)}")
            return 130
        else:
            say(f"completed: {result.content[0].text}")  # type: ignore[union-attr]

        if not options.no_fetch:
            say("calling fetch_record: a blocking backend call with a 0.5 s server-side deadline")
            fetched = client.call_tool(
                "fetch_record", {"key": "k1", "backend_delay": 1.0}, timeout=10
            )
            outcome = "tool error" if fetched.is_error else "result"
            say(f"{outcome}: {fetched.content[0].text}")  # type: ignore[union-attr]
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # before the call started, or a second Ctrl-C
        print("interrupted", file=sys.stderr)
        sys.exit(130)
