"""stdio and subprocess transports, against child scripts in tests/peers/ run with sys.executable."""

from __future__ import annotations

import json
import logging
import os
import queue
import select
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from support.paths import PEERS
from support.waiting import WAIT, wait_until

from mcp_sync.endpoint import Endpoint
from mcp_sync.errors import Cancelled, ConnectionClosed
from mcp_sync.transports.base import FdLineReader, Transport, as_caller_read, as_routing
from mcp_sync.transports.memory import MemoryTransport, memory_pair
from mcp_sync.transports.stdio import StdioTransport
from mcp_sync.transports.subprocess import SubprocessTransport

ECHO = str(PEERS / "echo_peer.py")
ENDPOINT_PEER = str(PEERS / "endpoint_peer.py")
UNICODE = "h\u00e9llo w\u00f6rld \u2713 \u65e5\u672c \U0001f600 \u00df"


def read_line_within(transport, timeout: float = WAIT) -> bytes | None:
    """``transport.read_line()`` with a bound: on expiry the transport is closed and the test fails."""
    box: queue.SimpleQueue = queue.SimpleQueue()
    thread = threading.Thread(
        target=lambda: box.put(transport.read_line()), name="test-read", daemon=True
    )
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        transport.close()
        thread.join(WAIT)
        pytest.fail(f"no line from the transport within {timeout} s")
    return box.get_nowait()


def read_bytes(stream, count: int, timeout: float = WAIT) -> bytes:
    """Read ``count`` bytes from a pipe, failing (not hanging) if they do not arrive in time."""
    data = b""
    end = time.monotonic() + timeout
    while len(data) < count:
        remaining = end - time.monotonic()
        if remaining <= 0 or not select.select([stream], [], [], remaining)[0]:
            pytest.fail(f"got {len(data)} of {count} bytes within {timeout} s")
        chunk = stream.read(min(1 << 16, count - len(data)))
        if not chunk:
            pytest.fail(f"end of stream after {len(data)} of {count} bytes")
        data += chunk
    return data


class ReadLog:
    """Wraps a transport and keeps the raw bytes of every line read."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.lines: list[bytes] = []

    def read_line(self):
        line = self.inner.read_line()
        if line is not None:
            self.lines.append(line)
        return line

    def write(self, data: bytes) -> None:
        self.inner.write(data)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def spawn():
    """Start SubprocessTransports; every one is closed (and its child reaped) at the end."""
    made: list[SubprocessTransport] = []

    def make(*args: str, **options) -> SubprocessTransport:
        transport = SubprocessTransport([sys.executable, *args], **options)
        made.append(transport)
        return transport

    yield make
    for transport in made:
        transport.close()
        assert transport.process.returncode is not None, "a child was not reaped"


class Started:
    """A stderr callback that records lines and signals "started <id>" lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()

    def __call__(self, line: str) -> None:
        with self._cond:
            self.lines.append(line)
            self._cond.notify_all()

    def wait_for(self, text: str, timeout: float = WAIT) -> None:
        end = time.monotonic() + timeout
        with self._cond:
            while text not in self.lines:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    pytest.fail(f"the child never wrote {text!r} on stderr (got {self.lines})")
                self._cond.wait(remaining)


# =========================================================================================
# transports satisfy the interface
# =========================================================================================
def test_transports_implement_the_protocol(tmp_path):
    a, b = memory_pair()
    assert isinstance(a, Transport) and isinstance(b, MemoryTransport)
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as rf, os.fdopen(w, "wb", buffering=0) as wf:
        stdio = StdioTransport(stdin=rf, stdout=wf)
        assert isinstance(stdio, Transport)
        stdio.close()
        assert stdio.read_line() is None
    a.close()


# =========================================================================================
# SubprocessTransport
# =========================================================================================
def test_subprocess_echo_round_trip(spawn):
    transport = spawn(ECHO, stderr="discard")
    assert read_line_within(transport) == b"ready"
    lines = [
        b'{"jsonrpc":"2.0","method":"x"}',
        UNICODE.encode("utf-8"),
        b"",
        b"\xff\xfe raw bytes",
        b"x" * 200_000,
    ]
    for line in lines:
        transport.write(line + b"\n")
    for line in lines:
        assert read_line_within(transport) == line
    transport.close()
    assert transport.process.returncode == 0, "a well-behaved child exits by itself on stdin EOF"
    assert transport.read_line() is None


def test_closing_stdin_makes_a_well_behaved_child_exit(spawn):
    transport = spawn(ECHO, stderr="discard", close_grace=10, terminate_grace=10)
    assert read_line_within(transport) == b"ready"
    start = time.monotonic()
    transport.close()
    assert time.monotonic() - start < 5, "close waited for the SIGTERM grace period"
    assert transport.process.returncode == 0  # exited by itself, not signalled
    transport.close()  # idempotent
    with pytest.raises(BrokenPipeError):
        transport.write(b"after close\n")


def test_child_ignoring_stdin_eof_gets_sigterm(spawn, caplog):
    transport = spawn(ECHO, "ignore-eof", stderr="discard", close_grace=0.3, terminate_grace=10)
    assert read_line_within(transport) == b"ready"
    start = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="mcp_sync.subprocess"):
        transport.close()
    elapsed = time.monotonic() - start
    assert transport.process.returncode == -signal.SIGTERM
    assert 0.25 <= elapsed < 5, elapsed
    assert any("terminating" in r.getMessage() for r in caplog.records)


def test_child_ignoring_sigterm_gets_sigkill(spawn, caplog):
    transport = spawn(ECHO, "ignore-term", stderr="discard", close_grace=0.2, terminate_grace=0.3)
    assert read_line_within(transport) == b"ready"  # SIGTERM is ignored from here on
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="mcp_sync.subprocess"):
        transport.close()
    elapsed = time.monotonic() - start
    assert transport.process.returncode == -signal.SIGKILL
    assert 0.45 <= elapsed < 5, elapsed
    assert any("ignored SIGTERM" in r.getMessage() for r in caplog.records)


def test_stderr_capture(spawn):
    transport = spawn(ECHO, stderr="capture")
    assert read_line_within(transport) == b"ready"
    wait_until(lambda: len(transport.stderr_lines) >= 2, "two stderr lines to be captured")
    transport.close()
    assert list(transport.stderr_lines) == ["peer ready", "st\u00f6rr \u65e5\u672c"]


def test_stderr_callback_and_discard(spawn):
    got = Started()
    transport = spawn(ECHO, stderr=got)
    assert read_line_within(transport) == b"ready"
    got.wait_for("st\u00f6rr \u65e5\u672c")
    transport.close()
    assert got.lines == ["peer ready", "st\u00f6rr \u65e5\u672c"]
    assert list(transport.stderr_lines) == []

    quiet = spawn(ECHO, stderr="discard")
    assert read_line_within(quiet) == b"ready"
    quiet.close()
    assert list(quiet.stderr_lines) == []
    # discarded, but its end is kept for the error raised if the server exits on its own
    assert quiet.stderr_tail.splitlines() == ["peer ready", "st\u00f6rr \u65e5\u672c"]


def test_stderr_callback_failure_is_logged(spawn, caplog):
    def boom(line: str) -> None:
        raise RuntimeError("callback failed")

    with caplog.at_level(logging.ERROR, logger="mcp_sync.subprocess"):
        transport = spawn(ECHO, stderr=boom)
        assert read_line_within(transport) == b"ready"
        transport.write(b"still works\n")
        assert read_line_within(transport) == b"still works"
        transport.close()
    assert transport.process.returncode == 0
    assert any("stderr callback failed" in r.getMessage() for r in caplog.records)


def test_env_and_cwd(spawn, tmp_path):
    transport = spawn(
        ENDPOINT_PEER, env={"MCP_SYNC_TEST_VAR": "v\u00e4lue"}, cwd=tmp_path, stderr="discard"
    )
    client = Endpoint(transport, name="client").start()
    try:
        result = client.request("env", {"name": "MCP_SYNC_TEST_VAR"}, timeout=WAIT)
        assert result == {"value": "v\u00e4lue", "cwd": str(tmp_path)}
    finally:
        assert client.close() == []
    assert transport.process.returncode == 0


def test_empty_command_is_rejected():
    with pytest.raises(ValueError):
        SubprocessTransport([])


def test_partial_writes_are_completed(spawn):
    """A raw pipe write may write only part of the data; the rest must not be lost."""

    class TrickleFile:
        def __init__(self) -> None:
            self.data = b""

        def write(self, data) -> int:
            chunk = bytes(data[:3])
            self.data += chunk
            return len(chunk)

        def close(self) -> None:
            pass

    transport = spawn(ECHO, stderr="discard")
    real_stdin, transport._stdin = transport._stdin, TrickleFile()
    message = (
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{"t":"'
        + UNICODE.encode()
        + b'"}}\n'
    )
    transport.write(message)
    assert transport._stdin.data == message
    transport._stdin = real_stdin


# =========================================================================================
# Endpoint over SubprocessTransport, child running Endpoint over StdioTransport
# =========================================================================================
def test_endpoint_over_stdio_child_serves_requests(spawn):
    transport = spawn(ENDPOINT_PEER, stderr="discard")
    log = ReadLog(transport)
    client = Endpoint(log, name="client").start()
    try:
        assert client.request("echo", {"a": [1, 2, {"b": None}]}, timeout=WAIT) == {
            "a": [1, 2, {"b": None}]
        }
        result = client.request("upper", {"text": UNICODE}, timeout=WAIT)
        assert result == {"text": UNICODE.upper(), "length": len(UNICODE)}
        # binary-safe UTF-8 on the wire: raw UTF-8 bytes, not \u escapes
        raw = [line for line in log.lines if b"length" in line]
        assert len(raw) == 1
        assert UNICODE.upper().encode("utf-8") in raw[0]
        assert b"\\u" not in raw[0]
        calls = [client.submit("echo", {"i": i}) for i in range(50)]
        assert [c.result(WAIT) for c in calls] == [{"i": i} for i in range(50)]
    finally:
        assert client.close() == []
    assert transport.process.returncode == 0, "the child should exit cleanly when its stdin closes"


def test_cancel_over_stdio_reaches_the_child_and_nothing_comes_back(spawn):
    started = Started()
    transport = spawn(ENDPOINT_PEER, "1", stderr=started)  # one worker: requests run in order
    log = ReadLog(transport)
    client = Endpoint(log, name="client").start()
    try:
        call = client.submit("block")
        started.wait_for(f"started {call.request_id}")
        assert call.cancel("user stop") is True
        with pytest.raises(Cancelled):
            call.result(WAIT)
        # runs on the child's only worker after the cancelled handler has finished
        status = client.request("cancelled", timeout=WAIT)
        assert status == {"cancelled": [[call.request_id, "user stop"]]}
        responses = [json.loads(line) for line in log.lines]
        assert not [m for m in responses if m.get("id") == call.request_id], (
            "the child answered a cancelled request"
        )
        assert client.dropped.total() == 0
    finally:
        assert client.close() == []
    assert transport.process.returncode == 0


@pytest.mark.parametrize("how", ["crash", "killed"])
def test_child_dying_mid_call_fails_pending_calls_at_once(spawn, how):
    started = Started()
    transport = spawn(ENDPOINT_PEER, stderr=started)
    client = Endpoint(transport, name="client").start()
    try:
        pending = [client.submit("block") for _ in range(3)]
        for call in pending:
            started.wait_for(f"started {call.request_id}")
        start = time.monotonic()
        if how == "crash":
            pending.append(client.submit("crash"))
        else:
            transport.process.kill()
        for call in pending:
            with pytest.raises(ConnectionClosed):
                call.result(WAIT)
        assert time.monotonic() - start < 3, "pending calls did not fail promptly"
        assert client.wait_closed(WAIT)
        with pytest.raises(ConnectionClosed):
            client.submit("echo")
    finally:
        assert client.close() == []
    assert transport.process.returncode == (3 if how == "crash" else -signal.SIGKILL)


def test_client_close_with_pending_call_stops_the_child(spawn):
    started = Started()
    transport = spawn(ENDPOINT_PEER, stderr=started, close_grace=5)
    client = Endpoint(transport, name="client").start()
    call = client.submit("block")
    started.wait_for(f"started {call.request_id}")
    start = time.monotonic()
    assert client.close() == []
    assert time.monotonic() - start < 4, "the child did not stop when its stdin closed"
    with pytest.raises(ConnectionClosed):
        call.result(0)
    # the child's handler was cancelled by the closed connection and the child exited cleanly
    assert transport.process.returncode == 0


# =========================================================================================
# StdioTransport and FdLineReader, in process over pipes
# =========================================================================================
@pytest.fixture
def pipes():
    """(transport, feed, drain): feed writes to the transport's stdin, drain reads its stdout."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    stdin = os.fdopen(in_r, "rb", buffering=0)
    stdout = os.fdopen(out_w, "wb", buffering=0)
    feed = os.fdopen(in_w, "wb", buffering=0)
    drain = os.fdopen(out_r, "rb", buffering=0)
    transport = StdioTransport(stdin=stdin, stdout=stdout)
    yield transport, feed, drain
    transport.close()
    for f in (stdin, stdout, feed, drain):
        if not f.closed:
            f.close()


def test_stdio_reads_lines_and_strips_line_endings(pipes):
    transport, feed, _ = pipes
    feed.write(b"one\r\ntwo\n\nth")
    feed.write(b"ree\n" + UNICODE.encode() + b"\nno newline at the end")
    feed.close()
    got = [read_line_within(transport) for _ in range(6)]
    assert got == [b"one", b"two", b"", b"three", UNICODE.encode(), b"no newline at the end"]
    assert read_line_within(transport) is None
    assert read_line_within(transport) is None


def test_stdio_writes_lines(pipes):
    transport, _, drain = pipes
    big = b'{"t":"' + ("\u65e5" * 100_000).encode() + b'"}\n'
    done = threading.Event()

    def writer() -> None:
        transport.write(b"first\n")
        transport.write(big)  # larger than a pipe buffer: needs the reader to keep up
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    received = read_bytes(drain, len(big) + 6)
    thread.join(WAIT)
    assert done.is_set()
    assert received == b"first\n" + big
    transport.close()
    with pytest.raises(BrokenPipeError):
        transport.write(b"x\n")


def test_stdio_close_wakes_a_blocked_reader(pipes):
    transport, _, _ = pipes
    box: list = []
    thread = threading.Thread(target=lambda: box.append(transport.read_line()))
    thread.start()
    wait_until(lambda: thread.is_alive(), "the thread to start")
    transport.close()
    thread.join(WAIT)
    assert not thread.is_alive(), "close() did not wake the reader"
    assert box == [None]
    transport.close()  # idempotent


def test_stdio_transport_drives_an_endpoint(pipes):
    transport, feed, drain = pipes
    server = Endpoint(
        transport, request_handler=lambda req: {"echo": req.params}, name="server"
    ).start()
    try:
        feed.write(
            b'{"jsonrpc":"2.0","id":"a","method":"x","params":{"t":"' + UNICODE.encode() + b'"}}\n'
        )
        expected = (
            b'{"jsonrpc":"2.0","id":"a","result":{"echo":{"t":"' + UNICODE.encode() + b'"}}}\n'
        )
        line = read_bytes(drain, len(expected))
        assert line == expected
        assert json.loads(line) == {"jsonrpc": "2.0", "id": "a", "result": {"echo": {"t": UNICODE}}}
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        feed.close()  # end of input closes the connection
        assert server.wait_closed(WAIT)
    finally:
        assert server.close() == []


def test_fd_line_reader_small_chunks():
    r, w = os.pipe()
    reader = FdLineReader(r, chunk_size=3)
    try:
        os.write(w, b"abcdefgh\r\nij\n\nklm")
        os.close(w)
        assert [reader.read_line() for _ in range(4)] == [b"abcdefgh", b"ij", b"", b"klm"]
        assert reader.read_line() is None
        reader.wake()  # after release: a no-op
    finally:
        os.close(r)


def test_fd_line_reader_one_whole_line_per_read():
    """A read that holds exactly one line (how messages usually arrive) is returned as is,
    line ending stripped; a read that holds more, or less, goes through the line buffer."""
    r, w = os.pipe()
    reader = FdLineReader(r)
    try:
        for data, line in (
            (b'{"a":1}\n', b'{"a":1}'),
            (b'{"b":2}\r\n', b'{"b":2}'),
            (b"\n", b""),
            (b"\r\n", b""),
        ):
            os.write(w, data)
            assert reader.read_line() == line
        os.write(w, b"par")  # a line in two reads
        os.write(w, b"tial\nnext\nrest")
        assert [reader.read_line(), reader.read_line()] == [b"partial", b"next"]
        os.write(w, b"\n")
        assert reader.read_line() == b"rest"
        big = b"x" * 200_000  # bigger than a pipe's default buffer: arrives in pieces
        writer = threading.Thread(target=os.write, args=(w, big + b"\n"))
        writer.start()
        assert reader.read_line() == big
        writer.join(WAIT)
        os.close(w)
        w = -1
        assert reader.read_line() is None
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_fd_line_reader_wake_before_read():
    r, w = os.pipe()
    reader = FdLineReader(r)
    try:
        reader.wake()
        assert reader.read_line() is None
        assert reader.read_line() is None
    finally:
        os.close(r)
        os.close(w)


# =========================================================================================
# descriptors that cannot be polled, and the child's own session
# =========================================================================================
@pytest.mark.parametrize("source", ["regular file", "/dev/null"])
def test_fd_line_reader_reads_descriptors_that_cannot_be_polled(tmp_path, source):
    if source == "regular file":
        path = tmp_path / "requests.jsonl"
        path.write_bytes(b'{"a":1}\r\n{"b":2}\nlast line without newline')
        expected = [b'{"a":1}', b'{"b":2}', b"last line without newline"]
    else:
        path = Path(os.devnull)
        expected = []
    with open(path, "rb") as f:
        reader = FdLineReader(f.fileno())
        got = []
        while (line := reader.read_line()) is not None:
            got.append(line)
    assert got == expected


def test_child_runs_in_its_own_session_so_terminal_ctrl_c_does_not_reach_it(spawn):
    transport = spawn(ECHO, stderr="discard")
    assert read_line_within(transport) == b"ready"
    child = transport.process.pid
    assert os.getsid(child) == child, "the child leads a session of its own"
    assert os.getpgid(child) != os.getpgid(0), "a Ctrl-C sent to our process group cannot reach it"
    transport.write(b"still here\n")
    assert read_line_within(transport) == b"still here"
    transport.close()
    assert transport.process.returncode == 0


def test_child_can_share_our_session_when_asked(spawn):
    transport = spawn(ECHO, stderr="discard", new_session=False)
    assert read_line_within(transport) == b"ready"
    assert os.getpgid(transport.process.pid) == os.getpgid(0)
    transport.close()


def test_fd_line_reader_joins_a_long_line_read_in_many_small_chunks():
    read_fd, write_fd = os.pipe()
    data = b"a\r\nbb\n" + b"x" * 300_000 + b"\n\n" + b"tail"

    def writer() -> None:
        for i in range(0, len(data), 777):  # the reader sees the long line in ~400 pieces
            os.write(write_fd, data[i : i + 777])
        os.close(write_fd)

    thread = threading.Thread(target=writer, name="chunk-writer")
    thread.start()
    reader = FdLineReader(read_fd)
    lines = []
    while (line := reader.read_line()) is not None:
        lines.append(line)
    thread.join(WAIT)
    os.close(read_fd)
    assert lines == [b"a", b"bb", b"x" * 300_000, b"", b"tail"]


class _Forwarding:
    """A transport wrapper that forwards what it lacks to the transport it wraps."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def read_line(self) -> bytes | None:
        return None

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> object:
        if name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)


class _CallerRead:
    def read_on_caller(self, request_id: object, receive: object, settled: object) -> bool:
        return False


def test_what_a_forwarding_transport_offers_is_asked_of_each_instance():
    # the protocol checks are answered once per class, except for a class that forwards
    # attributes: the same class offers what the transport it wraps offers
    plain, reading = _Forwarding(object()), _Forwarding(_CallerRead())
    assert as_caller_read(plain) is None  # type: ignore[arg-type]
    assert as_caller_read(reading) is reading  # type: ignore[arg-type]
    assert as_caller_read(_Forwarding(object())) is None  # type: ignore[arg-type]
    assert as_routing(reading) is None  # type: ignore[arg-type]
