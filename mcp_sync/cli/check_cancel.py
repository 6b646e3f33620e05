"""``mcp-sync check-cancel``: check any MCP server's cancellation behaviour.

Each check sends what the MCP cancellation rules talk about and watches every message the
server sends back. A check passes when the server does what the rules say:

* a ``notifications/cancelled`` for ``initialize`` is ignored: the handshake completes. A
  client must not cancel ``initialize`` and a server *may* act on such a cancellation, so a
  server that drops it gets a ``WARN`` row, not a failure, and every other check runs on a
  fresh connection (the TypeScript SDK's servers do this);
* cancellations of an unknown id, of a completed request, and malformed cancellations are
  ignored silently (nothing is sent back) and the server keeps serving;
* with ``--slow-tool``: a call cancelled in flight gets no response at all, and in a race of
  many concurrent calls, cancelled at random moments long before they could finish, no
  cancelled call is ever answered while every call that was not cancelled is. When a
  cancelled call is answered, the report says what commonly causes it (:data:`ANSWERED_HINT`).
"""

from __future__ import annotations

import json
import random
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from ..endpoint import Endpoint, PendingCall
from ..errors import ConnectionClosed, McpError
from ..jsonrpc import ErrorResponse, Response, decode
from ..lifecycle import LATEST_HANDSHAKE_VERSION
from ..transports.base import Transport
from ..transports.subprocess import SubprocessTransport

__all__ = [
    "CheckResult",
    "CancellationChecker",
    "ServerUnavailable",
    "run_checks",
    "ANSWERED_HINT",
    "INIT_TIMEOUT",
]

INIT_TIMEOUT = 30.0
"""Longest wait, in seconds, for a server to start and answer ``initialize``."""

ANSWERED_HINT = (
    "A cancelled call that is still answered is commonly one of: the server ignores "
    "notifications/cancelled (stopping is a SHOULD, not a MUST: a cancellation is only ever "
    "sent, the peer may ignore it); the tool's handler never checks for cancellation, so "
    "the server answers when it returns; or, over HTTP, a WSGI server with too few threads "
    "queues the POST that carries the cancellation behind the calls it cancels, so it is read "
    "only after they were answered (give the server more threads than concurrent calls)."
)
"""Printed under the table when a cancelled call was answered."""

Status = Literal["PASS", "WARN", "FAIL"]


class ServerUnavailable(ConnectionClosed):
    """The server could not be started or reached, or closed the connection before sending
    anything: there is nothing to check (no table is printed)."""


@dataclass
class CheckResult:
    """One row of the report: ``PASS``, ``WARN`` (allowed by the rules, but worth knowing;
    does not fail the run) or ``FAIL``."""

    name: str
    status: Status
    detail: str
    hint: str | None = None

    @property
    def passed(self) -> bool:
        """True unless the row is a ``FAIL``."""
        return self.status != "FAIL"


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
                if isinstance(m, (Response, ErrorResponse))
                and m.id in (request_id, str(request_id))
            ]


def _describe(messages: list[Any]) -> str:
    parts = []
    for message in messages[:3]:
        parts.append(
            json.dumps(message.to_json())[:120]
            if hasattr(message, "to_json")
            else repr(message)[:120]
        )
    return "; ".join(parts)


class CancellationChecker:
    """Runs the checks. Use :func:`run_checks` for the command line.

    Args:
        connect: makes a new connection to the server (a transport); called once, and once
            more when the server drops a cancelled ``initialize``.
        grace: seconds to watch for a forbidden response after a cancellation.
        seed: seed of the race's random cancellations (printed in the report).
        init_timeout: longest wait for the server to answer ``initialize``.
    """

    def __init__(
        self,
        connect: Callable[[], Transport],
        *,
        grace: float = 1.0,
        seed: int | None = None,
        init_timeout: float = INIT_TIMEOUT,
    ) -> None:
        self._connect = connect
        self.grace = grace
        self.init_timeout = init_timeout
        self.seed = seed if seed is not None else random.randrange(1 << 30)
        self.random = random.Random(self.seed)
        self.results: list[CheckResult] = []
        self.capabilities: dict[str, Any] = {}
        self.recorder: _Recorder | None = None
        self._endpoint: Endpoint | None = None

    @property
    def endpoint(self) -> Endpoint:
        """The current connection (see :meth:`open`)."""
        if self._endpoint is None:
            raise RuntimeError("not connected: call open() first")
        return self._endpoint

    def open(self) -> Endpoint:
        """Close the current connection, if any, and open a new one."""
        self.close()
        self.recorder = _Recorder(self._connect())
        self._endpoint = Endpoint(self.recorder, name="mcp_sync-check")
        return self._endpoint.start()

    def close(self) -> None:
        """Close the connection (a spawned server process is shut down)."""
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is not None:
            endpoint.close()

    def _add(self, name: str, status: Status | bool, detail: str, hint: str | None = None) -> None:
        if isinstance(status, bool):
            status = "PASS" if status else "FAIL"
        self.results.append(CheckResult(name, status, detail, hint))

    @property
    def _recorder(self) -> _Recorder:
        assert self.recorder is not None, "not connected"
        return self.recorder

    def _ping(self) -> float:
        start = time.perf_counter()
        self.endpoint.request("ping", None, timeout=10)
        return (time.perf_counter() - start) * 1000

    def _silent_after(self, name: str, send: Any) -> None:
        """Send something that must be ignored, then ping: only the ping's answer may come."""
        mark = self._recorder.mark()
        try:
            send()
            ping_ms = self._ping()
        except Exception as exc:
            self._add(name, False, f"the server stopped serving: {exc}")
            return
        # a notification or a request from the server (list_changed, roots/list) answers nothing
        stray = [
            m
            for m in self._recorder.since(mark)
            if isinstance(m, (Response, ErrorResponse)) and not _is_ping_answer(m)
        ]
        if stray:
            self._add(name, False, f"the server answered: {_describe(stray)}")
        else:
            self._add(name, True, f"ignored silently; next ping answered in {ping_ms:.2f} ms")

    # -- the checks -----------------------------------------------------------------------------
    def _initialize_params(self) -> dict[str, Any]:
        return {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcp-sync check-cancel", "version": "1"},
        }

    def _initialized(self, result: Any) -> None:
        self.endpoint.notify("notifications/initialized")
        self.capabilities = result.get("capabilities", {}) if isinstance(result, dict) else {}

    def check_initialize(self) -> bool:
        """Cancel ``initialize`` right after sending it: the handshake should still complete.

        A ``ping`` (allowed before initialization) follows the cancellation; once the server
        has answered it, ``initialize`` gets ``grace`` seconds more. A server that drops the
        cancelled ``initialize`` gets a ``WARN`` row and a fresh connection, initialized
        without a cancellation, for the other checks. Returns False if no connection could
        be initialized.
        """
        name = "cancelled initialize still completes"
        try:
            endpoint = self.open()
        except OSError as exc:
            raise ServerUnavailable(f"cannot start or reach the server: {exc}") from exc
        start = time.perf_counter()
        call = endpoint.submit("initialize", self._initialize_params())
        try:
            endpoint.notify(
                "notifications/cancelled",
                {"requestId": call.request_id, "reason": "conformance check"},
            )
            ping = endpoint.submit("ping", None, timeout=self.init_timeout)
        except ConnectionClosed as exc:
            raise self._unavailable(call, exc) from exc
        end = time.monotonic() + self.init_timeout
        error = ping.exception(timeout=self.init_timeout + 1)
        ping_answered = error is None or isinstance(
            error, McpError
        )  # an error answer shows it read the line too
        if ping_answered:
            end = min(end, time.monotonic() + self.grace)
        try:
            result = call.result(timeout=max(0.0, end - time.monotonic()))
        except McpError as exc:
            dropped = f"answered with an error: {exc}"
        except TimeoutError:
            dropped = (
                "not answered (a ping sent after it was)"
                if ping_answered
                else "not answered (nor a ping)"
            )
        except ConnectionClosed as exc:
            if not self._recorder.mark():
                raise self._unavailable(call, exc) from exc
            self._add(name, False, f"no initialize result: {exc!r}")
            return False
        except Exception as exc:
            self._add(name, False, f"no initialize result: {exc!r}")
            return False
        else:
            elapsed = (time.perf_counter() - start) * 1000
            self._initialized(result)
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            self._add(name, True, f"answered {version} in {elapsed:.1f} ms")
            return True
        self._add(
            name,
            "WARN",
            f"{dropped}: the server acted on the cancellation, as it may (clients must not cancel "
            "initialize); the other checks run on a fresh connection",
        )
        return self._fresh_connection()

    def _unavailable(self, call: PendingCall, closed: ConnectionClosed) -> ServerUnavailable:
        """Why a server that never sent anything is not there (the first failure says best)."""
        reason = call.exception(timeout=1) if call.done() else None
        return ServerUnavailable(
            f"the server closed the connection before sending anything: {reason or closed}"
        )

    def _fresh_connection(self) -> bool:
        endpoint = self.open()
        try:
            result = endpoint.request(
                "initialize", self._initialize_params(), timeout=self.init_timeout
            )
        except Exception as exc:
            self._add("a fresh connection initializes", False, f"no initialize result: {exc!r}")
            return False
        self._initialized(result)
        return True

    def check_unknown_id(self) -> None:
        """A cancellation of an id that was never used."""
        self._silent_after(
            "cancel of an unknown id is ignored",
            lambda: self.endpoint.notify(
                "notifications/cancelled", {"requestId": 987654321, "reason": "check"}
            ),
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
            (
                "requestId null",
                b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":null}}\n',
            ),
            (
                "requestId true",
                b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":true}}\n',
            ),
            (
                "requestId 1.5",
                b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.5}}\n',
            ),
            (
                "requestId object",
                b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}\n',
            ),
        ]
        for label, line in variants:
            self._silent_after(
                f"malformed cancel ({label}) is ignored",
                lambda line=line: self._recorder.write(line),
            )

    def check_in_flight(self, tool: str, arguments: dict[str, Any]) -> float | None:
        """Cancel a slow call in flight: no response may follow. Returns its uncancelled
        duration in seconds (measured first), or None if the tool failed."""
        start = time.monotonic()
        try:
            first = self.endpoint.request(
                "tools/call", {"name": tool, "arguments": arguments}, timeout=120
            )
        except McpError as exc:
            self._add("in-flight cancel gets no response", False, f"{tool} failed: {exc}")
            return None
        duration = time.monotonic() - start
        if isinstance(first, dict) and first.get("isError"):
            self._add(
                "in-flight cancel gets no response",
                False,
                f"{tool} returned an error: {first.get('content')}",
            )
            return None
        progressed = threading.Event()
        submitted_at = time.monotonic()
        call = self.endpoint.submit(
            "tools/call",
            {"name": tool, "arguments": arguments},
            on_progress=lambda *_: progressed.set(),
        )
        # cancel once the server reports progress, or a quarter of the way through
        progressed.wait(duration / 4)
        cancelled_at = time.monotonic()
        call.cancel("conformance check")
        # watch until the call would have ended uncancelled, and ``grace`` beyond: a server that
        # ignores the cancel (or cannot read it yet) answers at the call's natural end
        watch = max(self.grace, submitted_at + duration - time.monotonic() + self.grace)
        self._watch(watch)
        answers = self._recorder.responses_for(call.request_id or -1)
        alive = True
        try:
            self._ping()
        except Exception:
            alive = False
        if answers:
            after = (answers[0][0] - cancelled_at) * 1000
            self._add(
                "in-flight cancel gets no response",
                False,
                f"answered {after:.1f} ms after the cancel (call takes {duration:.2f} s)",
                ANSWERED_HINT,
            )
        elif not alive:
            self._add(
                "in-flight cancel gets no response",
                False,
                "the server stopped serving after the cancel",
            )
        else:
            self._add(
                "in-flight cancel gets no response",
                True,
                f"no response within {watch:.1f} s (the call takes {duration:.2f} s uncancelled)",
            )
        return duration

    def check_race(self, tool: str, arguments: dict[str, Any], calls: int, duration: float) -> None:
        """Many concurrent calls, half cancelled at random moments in the first half of the
        call's duration: no cancelled call may be answered; every other call must be."""
        params = {"name": tool, "arguments": arguments}
        pending: list[tuple[PendingCall, float | None]] = []
        for _ in range(calls):
            delay = self.random.uniform(0, duration / 2) if self.random.random() < 0.5 else None
            pending.append(
                (self.endpoint.submit("tools/call", params, timeout=duration * calls + 60), delay)
            )
        start = time.monotonic()
        for call, delay in sorted(
            (p for p in pending if p[1] is not None), key=lambda p: p[1] or 0
        ):
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
        self._watch(self.grace)
        cancelled = [call for call, delay in pending if delay is not None]
        answered = [
            call for call in cancelled if self._recorder.responses_for(call.request_id or -1)
        ]
        uncancelled = calls - len(cancelled)
        passed = not answered and failed == 0 and completed == uncancelled
        self._add(
            f"race of {calls} calls, {len(cancelled)} cancelled",
            passed,
            f"cancelled answered: {len(answered)}; uncancelled completed: {completed}/{uncancelled}"
            + (f"; failed: {failed}" if failed else ""),
            ANSWERED_HINT if answered else None,
        )

    def _watch(self, seconds: float) -> None:
        """Let ``seconds`` pass while messages are recorded (a forbidden one may come)."""
        end = time.monotonic() + seconds
        with self._recorder.arrived:
            while time.monotonic() < end:
                self._recorder.arrived.wait(end - time.monotonic())

    def run(
        self, slow_tool: str | None, slow_args: dict[str, Any], race_calls: int
    ) -> list[CheckResult]:
        """Run every check; returns the results."""
        try:
            if not self.check_initialize():  # ServerUnavailable goes to the caller
                return self.results
            self.check_unknown_id()
            self.check_completed()
            self.check_malformed()
            if slow_tool:
                duration = self.check_in_flight(slow_tool, slow_args)
                if duration is not None and race_calls > 0:
                    self.check_race(slow_tool, slow_args, race_calls, duration)
        except ServerUnavailable:
            raise
        except Exception as exc:  # e.g. the server died: report it in the table, not instead of it
            self._add("the server keeps serving", False, f"the checks could not go on: {exc}")
        return self.results


def _is_ping_answer(message: Any) -> bool:
    return isinstance(message, Response) and message.result == {}


def _table(results: list[CheckResult]) -> str:
    width = max(len(r.name) for r in results)
    lines = [f"{'check'.ljust(width)}  result  measured", f"{'-' * width}  ------  --------"]
    for r in results:
        lines.append(f"{r.name.ljust(width)}  {r.status:6}  {r.detail}")
    return "\n".join(lines)


def _summary(results: list[CheckResult], seed: int) -> str:
    counts = {
        status: sum(r.status == status for r in results) for status in ("PASS", "WARN", "FAIL")
    }
    return (
        f"{counts['PASS']} passed, {counts['WARN']} warned, {counts['FAIL']} failed (seed {seed})"
    )


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
    headers: dict[str, str] | None = None,
    init_timeout: float = INIT_TIMEOUT,
) -> int:
    """Run the checks against a server command or URL and print the table, then the hints
    of failed rows. Returns 0 when no check failed (``WARN`` rows do not fail), else 1.
    ``init_timeout`` bounds each wait for ``initialize`` (over HTTP also its POST)."""
    connect: Callable[[], Transport]
    if url:
        from ..http.client_transport import HttpClientTransport

        def connect() -> Transport:
            # initialize is POSTed in the checker's thread: bound it, or a silent server hangs us
            return HttpClientTransport(url, headers, handshake_timeout=init_timeout)

        target = url
    else:
        if not command:
            raise ValueError("name a server: a command or a URL")
        argv = list(command)

        def connect() -> Transport:
            return SubprocessTransport(argv, stderr="inherit" if verbose else "discard")

        target = " ".join(argv)
    checker = CancellationChecker(connect, grace=grace, init_timeout=init_timeout)
    out.write(f"checking cancellation behaviour of: {target}\n")
    try:
        results = checker.run(slow_tool, slow_args, race_calls)
    finally:
        checker.close()
    out.write(_table(results) + "\n")
    for hint in dict.fromkeys(r.hint for r in results if r.hint and not r.passed):
        out.write("\n" + textwrap.fill(hint, width=100) + "\n\n")
    out.write(_summary(results, checker.seed) + "\n")
    if not slow_tool:
        out.write("(give --slow-tool NAME --slow-args JSON to check in-flight cancellation too)\n")
    return 0 if all(r.passed for r in results) else 1
