"""``mcp-sync check-cancel``: check any MCP server's cancellation behaviour.

Each check sends what the MCP cancellation rules talk about and watches every message the
server sends back. A check passes when the server does what the rules say:

* a ``notifications/cancelled`` for ``initialize`` is ignored: the handshake completes;
* cancellations of an unknown id, of a completed request, and malformed cancellations are
  ignored silently (nothing is sent back) and the server keeps serving;
* with ``--slow-tool``: a call cancelled in flight gets no response at all, and in a race of
  many concurrent calls, cancelled at random moments long before they could finish, no
  cancelled call is ever answered while every call that was not cancelled is.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence, TextIO

from .endpoint import Endpoint, PendingCall
from .errors import McpError
from .jsonrpc import ErrorResponse, Response, decode
from .session import LATEST_PROTOCOL_VERSION
from .transports.base import Transport
from .transports.subprocess import SubprocessTransport

__all__ = ["CheckResult", "CancellationChecker", "run_checks"]


@dataclass
class CheckResult:
    """One row of the report."""

    name: str
    passed: bool
    detail: str


class _Recorder:
    """Wraps a transport and records every message the server sends, with its arrival time."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.lock = threading.Lock()
        self.received: list[tuple[float, Any]] = []
        self.arrived = threading.Condition(self.lock)

    def read_line(self) -> bytes | None:
        line = self.transport.read_line()
        if line is not None and line.strip():
            message = decode(line)
            with self.arrived:
                self.received.append((time.monotonic(), message))
                self.arrived.notify_all()
        return line

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def close(self) -> None:
        self.transport.close()

    def mark(self) -> int:
        with self.lock:
            return len(self.received)

    def since(self, mark: int) -> list[Any]:
        with self.lock:
            return [message for _, message in self.received[mark:]]

    def responses_for(self, request_id: int) -> list[tuple[float, Any]]:
        with self.lock:
            return [
                (at, m)
                for at, m in self.received
                if isinstance(m, (Response, ErrorResponse)) and m.id in (request_id, str(request_id))
            ]


def _describe(messages: list[Any]) -> str:
    parts = []
    for message in messages[:3]:
        parts.append(json.dumps(message.to_json())[:120] if hasattr(message, "to_json") else repr(message)[:120])
    return "; ".join(parts)


class CancellationChecker:
    """Runs the checks over one connection. Use :func:`run_checks` for the command line."""

    def __init__(self, transport: Transport, *, grace: float = 1.0, seed: int | None = None) -> None:
        self.recorder = _Recorder(transport)
        self.endpoint = Endpoint(self.recorder, name="mcp_sync-check")
        self.grace = grace
        self.seed = seed if seed is not None else random.randrange(1 << 30)
        self.random = random.Random(self.seed)
        self.results: list[CheckResult] = []

    def close(self) -> None:
        """Close the connection (the server process is shut down)."""
        self.endpoint.close()

    def _add(self, name: str, passed: bool, detail: str) -> None:
        self.results.append(CheckResult(name, passed, detail))

    def _ping(self) -> float:
        start = time.perf_counter()
        self.endpoint.call("ping", None, timeout=10)
        return (time.perf_counter() - start) * 1000

    def _silent_after(self, name: str, send: Any) -> None:
        """Send something that must be ignored, then ping: only the ping's answer may come."""
        mark = self.recorder.mark()
        try:
            send()
            ping_ms = self._ping()
        except Exception as exc:
            self._add(name, False, f"the server stopped serving: {exc}")
            return
        stray = [m for m in self.recorder.since(mark) if not _is_ping_answer(m)]
        if stray:
            self._add(name, False, f"the server answered: {_describe(stray)}")
        else:
            self._add(name, True, f"ignored silently; next ping answered in {ping_ms:.2f} ms")

    # -- the checks -----------------------------------------------------------------------------
    def check_initialize(self) -> bool:
        """Cancel ``initialize`` right after sending it: the handshake must still complete."""
        self.endpoint.start()
        start = time.perf_counter()
        call = self.endpoint.submit(
            "initialize",
            {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcp-sync check-cancel", "version": "1"},
            },
        )
        self.endpoint.notify("notifications/cancelled", {"requestId": call.request_id, "reason": "conformance check"})
        try:
            result = call.result(timeout=30)
        except Exception as exc:
            self._add("cancelled initialize still completes", False, f"no initialize result: {exc!r}")
            return False
        elapsed = (time.perf_counter() - start) * 1000
        self.endpoint.notify("notifications/initialized")
        self.capabilities = result.get("capabilities", {}) if isinstance(result, dict) else {}
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        self._add("cancelled initialize still completes", True, f"answered {version} in {elapsed:.1f} ms")
        return True

    def check_unknown_id(self) -> None:
        """A cancellation of an id that was never used."""
        self._silent_after(
            "cancel of an unknown id is ignored",
            lambda: self.endpoint.notify("notifications/cancelled", {"requestId": 987654321, "reason": "check"}),
        )

    def check_completed(self) -> None:
        """A cancellation of a request that already completed."""
        call = self.endpoint.submit("ping", None)
        call.result(timeout=10)
        self._silent_after(
            "cancel of a completed request is ignored",
            lambda: self.endpoint.notify("notifications/cancelled", {"requestId": call.request_id}),
        )

    def check_malformed(self) -> None:
        """Cancellations whose params are missing or wrong."""
        variants: list[tuple[str, bytes]] = [
            ("no params", b'{"jsonrpc":"2.0","method":"notifications/cancelled"}\n'),
            ("no requestId", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}\n'),
            ("requestId null", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":null}}\n'),
            ("requestId true", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":true}}\n'),
            ("requestId 1.5", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.5}}\n'),
            ("requestId object", b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}\n'),
        ]
        for label, line in variants:
            self._silent_after(f"malformed cancel ({label}) is ignored", lambda line=line: self.recorder.write(line))

    def check_in_flight(self, tool: str, arguments: dict[str, Any]) -> float | None:
        """Cancel a slow call in flight: no response may follow. Returns its uncancelled
        duration in seconds (measured first), or None if the tool failed."""
        start = time.monotonic()
        try:
            first = self.endpoint.call("tools/call", {"name": tool, "arguments": arguments}, timeout=120)
        except McpError as exc:
            self._add("in-flight cancel gets no response", False, f"{tool} failed: {exc}")
            return None
        duration = time.monotonic() - start
        if isinstance(first, dict) and first.get("isError"):
            self._add("in-flight cancel gets no response", False, f"{tool} returned an error: {first.get('content')}")
            return None
        progressed = threading.Event()
        call = self.endpoint.submit(
            "tools/call",
            {"name": tool, "arguments": arguments},
            on_progress=lambda *_: progressed.set(),
        )
        # cancel once the server reports progress, or a quarter of the way through
        progressed.wait(duration / 4)
        cancelled_at = time.monotonic()
        call.cancel("conformance check")
        deadline = cancelled_at + self.grace
        with self.recorder.arrived:
            while time.monotonic() < deadline:
                self.recorder.arrived.wait(deadline - time.monotonic())
        answers = self.recorder.responses_for(call.request_id or -1)
        alive = True
        try:
            self._ping()
        except Exception:
            alive = False
        if answers:
            after = (answers[0][0] - cancelled_at) * 1000
            self._add("in-flight cancel gets no response", False, f"answered {after:.1f} ms after the cancel (call takes {duration:.2f} s)")
        elif not alive:
            self._add("in-flight cancel gets no response", False, "the server stopped serving after the cancel")
        else:
            self._add(
                "in-flight cancel gets no response",
                True,
                f"no response within {self.grace:g} s (the call takes {duration:.2f} s uncancelled)",
            )
        return duration

    def check_race(self, tool: str, arguments: dict[str, Any], calls: int, duration: float) -> None:
        """Many concurrent calls, half cancelled at random moments in the first half of the
        call's duration: no cancelled call may be answered; every other call must be."""
        params = {"name": tool, "arguments": arguments}
        pending: list[tuple[PendingCall, float | None]] = []
        for _ in range(calls):
            delay = self.random.uniform(0, duration / 2) if self.random.random() < 0.5 else None
            pending.append((self.endpoint.submit("tools/call", params, timeout=duration * calls + 60), delay))
        start = time.monotonic()
        for call, delay in sorted((p for p in pending if p[1] is not None), key=lambda p: p[1] or 0):
            wait = start + (delay or 0) - time.monotonic()
            if wait > 0:
                threading.Event().wait(wait)
            call.cancel("conformance race")
        completed = failed = 0
        for call, delay in pending:
            if delay is None:
                try:
                    call.result(timeout=duration * calls + 60)
                    completed += 1
                except Exception:
                    failed += 1
        end = time.monotonic() + self.grace
        with self.recorder.arrived:
            while time.monotonic() < end:
                self.recorder.arrived.wait(end - time.monotonic())
        cancelled = [call for call, delay in pending if delay is not None]
        answered = [call for call in cancelled if self.recorder.responses_for(call.request_id or -1)]
        uncancelled = calls - len(cancelled)
        passed = not answered and failed == 0 and completed == uncancelled
        self._add(
            f"race of {calls} calls, {len(cancelled)} cancelled",
            passed,
            f"cancelled answered: {len(answered)}; uncancelled completed: {completed}/{uncancelled}"
            + (f"; failed: {failed}" if failed else ""),
        )

    def run(self, slow_tool: str | None, slow_args: dict[str, Any], race_calls: int) -> list[CheckResult]:
        """Run every check; returns the results."""
        try:
            if not self.check_initialize():
                return self.results
            self.check_unknown_id()
            self.check_completed()
            self.check_malformed()
            if slow_tool:
                duration = self.check_in_flight(slow_tool, slow_args)
                if duration is not None and race_calls > 0:
                    self.check_race(slow_tool, slow_args, race_calls, duration)
        except Exception as exc:  # e.g. the server died: report it in the table, not instead of it
            self._add("the server keeps serving", False, f"the checks could not go on: {exc}")
        return self.results


def _is_ping_answer(message: Any) -> bool:
    return isinstance(message, Response) and message.result == {}


def _table(results: list[CheckResult]) -> str:
    width = max(len(r.name) for r in results)
    lines = [f"{'check'.ljust(width)}  result  measured", f"{'-' * width}  ------  --------"]
    for r in results:
        lines.append(f"{r.name.ljust(width)}  {'PASS' if r.passed else 'FAIL':6}  {r.detail}")
    return "\n".join(lines)


def run_checks(
    *,
    command: Sequence[str] | None,
    url: str | None,
    slow_tool: str | None,
    slow_args: dict[str, Any],
    race_calls: int,
    grace: float,
    verbose: bool,
    out: TextIO,
) -> int:
    """Run the checks against a server command or URL, print the table; 0 if all pass."""
    if url:
        from .transports.http_client import HttpClientTransport

        transport: Transport = HttpClientTransport(url)
        target = url
    else:
        if not command:
            raise SystemExit("mcp-sync check-cancel: name a server: -- COMMAND [ARGS...] or --url URL")
        transport = SubprocessTransport(command, stderr="inherit" if verbose else "discard")
        target = " ".join(command)
    checker = CancellationChecker(transport, grace=grace)
    out.write(f"checking cancellation behaviour of: {target}\n")
    try:
        results = checker.run(slow_tool, slow_args, race_calls)
    finally:
        checker.close()
    out.write(_table(results) + "\n")
    passed = sum(r.passed for r in results)
    out.write(f"{passed} passed, {len(results) - passed} failed (seed {checker.seed})\n")
    if not slow_tool:
        out.write("(give --slow-tool NAME --slow-args JSON to check in-flight cancellation too)\n")
    return 0 if passed == len(results) else 1
