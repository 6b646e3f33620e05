"""The demo behind ``mcp-sync demo``: negotiate the protocol (MCP 2026-07-28 with this
server), issue, cancel and serve requests, and show the server really stopped the cancelled
work.

The module is also the demo *server* (``python -m mcp_sync.cli.demo --serve``). Its ``slow`` tool
records how each run ended; the ``last_run`` tool waits (bounded) until the current run has
ended and reports it, so the client can show what happened on the other side.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from ..cancel import CancelToken
from ..client import Client
from ..context import Context
from ..errors import Cancelled, RequestTimeout
from ..lifecycle import MODERN_VERSIONS
from ..server import Server

__all__ = ["server", "run_demo"]

server = Server(
    "mcp_sync-demo", version="1.0.0", instructions="A demo server with a slow, cancellable tool."
)

_runs_lock = threading.Lock()
_last_run: dict[str, Any] = {}
_run_ended = threading.Event()


@server.tool()
def slow(seconds: float, ctx: Context) -> str:
    """Work for `seconds` in 50 ms steps, reporting progress; stop at once when cancelled.

    Args:
        seconds: how long to work.
    """
    with _runs_lock:
        _last_run.clear()
        _last_run.update(state="running", request_id=ctx.request_id)
        _run_ended.clear()
    cancelled_at: list[float] = []
    ctx.cancel_token.add_callback(lambda _t: cancelled_at.append(time.perf_counter()))
    steps = max(1, round(seconds / 0.05))  # int() would make 0.3 s five steps, not six
    try:
        for step in range(1, steps + 1):
            if ctx.wait(0.05):
                observed = time.perf_counter()
                lag_ms = (observed - cancelled_at[0]) * 1000 if cancelled_at else 0.0
                with _runs_lock:
                    _last_run.update(
                        state="stopped by cancellation",
                        steps_done=step - 1,
                        reason=ctx.cancel_token.reason,
                        observed_after_ms=round(lag_ms, 3),
                    )
                return "stopped"  # discarded: a cancelled request is never answered
            ctx.report_progress(step, steps, f"step {step} of {steps}")
        with _runs_lock:
            _last_run.update(state="completed", steps_done=steps)
        return f"done after {steps} steps"
    finally:
        _run_ended.set()


@server.tool()
def last_run(wait_seconds: float = 5.0) -> dict[str, Any]:
    """How the most recent `slow` run ended (waits up to `wait_seconds` for it to end).

    Args:
        wait_seconds: longest wait for a running call to end.
    """
    _run_ended.wait(wait_seconds)
    with _runs_lock:
        return dict(_last_run)


def _bar(progress: float, total: float | None, message: str | None, out: TextIO) -> None:
    if not out.isatty():
        return
    if total:
        filled = int(20 * min(1.0, progress / total))
        out.write(f"\r   [{'#' * filled}{'.' * (20 - filled)}] {message or ''}   ")
    else:
        out.write(f"\r   progress {progress:g} {message or ''}   ")
    out.flush()


def _speaking(client: Client) -> str:
    """Which protocol the client negotiated, and how."""
    version = client.protocol_version
    how = "server/discover, no initialize" if version in MODERN_VERSIONS else "initialize handshake"
    return f"speaking MCP {version} ({how})"


def run_demo(out: TextIO = sys.stdout) -> int:
    """Start the demo server, cancel a slow call, time one out, complete one. Returns 0."""

    def say(text: str = "") -> None:
        out.write(text + "\n")
        out.flush()

    say("mcp_sync demo: issuing, cancelling and serving MCP requests from plain threads")
    started = time.perf_counter()
    with Client.stdio([sys.executable, "-m", "mcp_sync.cli.demo", "--serve"]) as client:
        elapsed_ms = (time.perf_counter() - started) * 1000
        say(
            f"1. started {client.server_info.name} over stdio in {elapsed_ms:.0f} ms, {_speaking(client)}"
        )
        say(f"   tools: {', '.join(t.name for t in client.list_tools())}")

        say("2. calling slow(seconds=30) in the background; cancelling it after 5 progress updates")
        five = threading.Event()
        seen: list[float] = []

        def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)
            _bar(progress, total, message, out)
            if len(seen) >= 5:
                five.set()

        call = client.call_tool_future("slow", {"seconds": 30}, on_progress=on_progress)
        if not five.wait(10):
            say("\n   no progress arrived within 10 s")
            return 1
        call.cancel("the demo changed its mind")
        if out.isatty():
            say("")
        say(f"   received {len(seen)} progress notifications")
        say(f"   cancel() -> notifications/cancelled sent for request {call.request_id}")
        try:
            call.result()
        except Cancelled as exc:
            say(f"   result() raised Cancelled({exc.reason!r})")
        report = client.call_tool("last_run", {"wait_seconds": 5}).structured_content or {}
        say(
            f"   server says: {report.get('state')} after {report.get('steps_done')} steps; "
            f"the handler saw it {report.get('observed_after_ms')} ms after its token fired"
        )

        say("3. calling slow(seconds=30) with timeout=0.5")
        try:
            client.call_tool("slow", {"seconds": 30}, timeout=0.5)
        except RequestTimeout as exc:
            say(f"   RequestTimeout: {exc}")
        report = client.call_tool("last_run", {"wait_seconds": 5}).structured_content or {}
        say(f"   server says: {report.get('state')} (reason: {report.get('reason')})")

        say("4. cancelling from another thread with a CancelToken")
        token = CancelToken()
        timer = threading.Thread(
            target=lambda: token.wait(0.3) or token.cancel("cancelled by another thread")
        )
        timer.start()
        try:
            client.call_tool("slow", {"seconds": 30}, cancel_token=token)
        except Cancelled as exc:
            say(f"   Cancelled({exc.reason!r})")
        timer.join()
        report = client.call_tool("last_run", {"wait_seconds": 5}).structured_content or {}
        say(f"   server says: {report.get('state')}")

        say("5. calling slow(seconds=0.5) to completion")
        result = client.call_tool(
            "slow", {"seconds": 0.5}, on_progress=lambda p, t, m: _bar(p, t, m, out)
        )
        if out.isatty():
            say("")
        say(f"   result: {result.content[0].text if result.content else result}")  # type: ignore[union-attr]
        process = client.transport.process  # type: ignore[attr-defined]
    say(f"done: the server process exited with code {process.returncode} after its stdin closed")
    return 0


if __name__ == "__main__":
    if "--serve" in sys.argv[1:]:
        server.run()
    else:
        raise SystemExit(run_demo())
