"""Servers as processes: ``server.run()`` over stdio, its shutdown paths, and embedding.

The stdio server is tests/peers/demo_server.py; it appends markers to the file named by
``MCP_SYNC_TEST_MARKERS`` so the tests can see what happened inside the process.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from support.paths import PEERS, ROOT
from support.waiting import WAIT, wait_event, wait_until

from mcp_sync import Client, ConnectionClosed, Context, Server, deadlines, memory_pair

DEMO = PEERS / "demo_server.py"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def spawn(markers: Path, **options) -> Client:
    env = {"PYTHONPATH": str(ROOT), "MCP_SYNC_TEST_MARKERS": str(markers)}
    options.setdefault("init_timeout", 20.0)
    options.setdefault(
        "protocol", "legacy"
    )  # these tests read the 2025-11-25 session (ping, handshake)
    return Client.stdio([sys.executable, str(DEMO)], env=env, stderr="capture", **options)


def read_markers(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def no_tracebacks(client: Client) -> None:
    stderr = "\n".join(client.transport.stderr_lines)
    assert "Traceback" not in stderr, stderr


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    return tmp_path / "markers.txt"


def start_slow_call(client: Client):
    """Start the ``slow`` tool and wait until it runs (it reports progress when it starts)."""
    started = threading.Event()
    pending = client.call_tool_future("slow", {"seconds": 30}, on_progress=lambda *a: started.set())
    wait_event(started, "the slow tool to start in the server process", timeout=10)
    return pending


# -- stdio round trip and clean exits -------------------------------------------------------------
def test_stdio_round_trip_and_clean_exit_on_stdin_eof(markers):
    # a long close_grace: if the server did not exit on EOF, close() would take 10 s (then SIGTERM)
    client = spawn(markers, close_grace=10.0)
    process = client.transport.process
    try:
        assert (client.server_info.name, client.server_info.version) == ("demo-stdio", "1.2.3")
        assert client.protocol_version == "2025-11-25"
        assert [t.name for t in client.list_tools(timeout=WAIT)] == ["echo", "pid", "slow"]
        assert (
            client.call_tool("echo", {"text": "héllo\nworld"}, timeout=WAIT).content[0].text
            == "héllo\nworld"
        )
        assert client.call_tool("pid", timeout=WAIT).structured_content == {"result": process.pid}
        client.ping(timeout=WAIT)
    finally:
        began = time.monotonic()
        client.close()
    assert time.monotonic() - began < 5.0, "the server did not exit promptly when its stdin closed"
    assert process.returncode == 0
    assert read_markers(markers) == ["serving", "exited"]
    no_tracebacks(client)


def test_stdio_client_as_a_context_manager(markers):
    with spawn(markers) as client:
        process = client.transport.process
        assert client.call_tool("echo", {"text": "x"}, timeout=WAIT).content[0].text == "x"
    assert process.returncode == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_server_cleanly_and_cancels_the_running_handler(markers, signum):
    client = spawn(markers)
    process = client.transport.process
    try:
        pending = start_slow_call(client)
        os.kill(process.pid, signum)
        # the server cancelled the running request (no answer) and exited
        with pytest.raises(ConnectionClosed):
            pending.result(10)
        assert process.wait(10) == 0
    finally:
        client.close()
    lines = read_markers(markers)
    assert lines[0] == "serving"
    assert lines[1] == f"started {pending.request_id}"
    assert lines[2].startswith("cancelled"), lines
    assert lines[-1] == "exited"
    assert "finished" not in lines
    no_tracebacks(client)


def test_closing_the_client_cancels_the_running_handler(markers):
    client = spawn(markers, close_grace=10.0)
    process = client.transport.process
    pending = start_slow_call(client)
    began = time.monotonic()
    client.close()
    assert time.monotonic() - began < 5.0
    with pytest.raises(ConnectionClosed):
        pending.result(WAIT)
    assert process.returncode == 0
    lines = read_markers(markers)
    assert lines[2].startswith("cancelled") and lines[-1] == "exited", lines


def test_a_killed_server_fails_the_pending_call_at_once(markers):
    client = spawn(markers)
    process = client.transport.process
    try:
        pending = start_slow_call(client)
        began = time.monotonic()
        os.kill(process.pid, signal.SIGKILL)
        with pytest.raises(ConnectionClosed):
            pending.result(WAIT)
        assert time.monotonic() - began < 2.0, "a dead server must fail the call at once"
        wait_until(lambda: client.closed, "the client to notice the closed connection")
        with pytest.raises(ConnectionClosed):
            client.call_tool("echo", {"text": "x"})
    finally:
        client.close()
    assert process.returncode == -signal.SIGKILL
    assert "exited" not in read_markers(markers)


def test_a_server_that_exits_during_initialize_is_a_connection_error(tmp_path):
    script = tmp_path / "quits.py"
    script.write_text("import sys\nsys.stdin.readline()\nsys.exit(3)\n", encoding="utf-8")
    began = time.monotonic()
    with pytest.raises(ConnectionClosed):
        Client.stdio([sys.executable, str(script)], stderr="discard", init_timeout=WAIT)
    assert time.monotonic() - began < WAIT


# -- in-process: run() and serve_in_thread() -----------------------------------------------------------
def gated(server: Server):
    started, saw = threading.Event(), {}

    @server.tool(timeout=WAIT)
    def hold(ctx: Context) -> str:
        started.set()
        saw["cancelled"] = ctx.wait(WAIT)
        saw["reason"] = ctx.cancel_token.reason
        return "held"

    return started, saw


def test_serve_in_thread_and_stop_leave_no_threads_behind():
    before = set(threading.enumerate())
    server = Server("embedded")
    started, saw = gated(server)
    client_side, server_side = memory_pair()
    handle = server.serve_in_thread(server_side)
    client = Client.connect(client_side, init_timeout=WAIT)
    try:
        pending = client.call_tool_future("hold")
        wait_event(started, "the handler to start")
        assert deadlines.pending_deadlines() > 0, "the tool timeout is pending"
        handle.stop()
        assert saw["cancelled"] is True and saw["reason"] == "connection closed"
        with pytest.raises(ConnectionClosed):
            pending.result(WAIT)
        assert handle.wait(0)
    finally:
        client.close()
        handle.stop()
    # stop() joined the server's threads; the client's are joined by close(); the deadline
    # thread, idle now, would linger a few seconds: it must be stoppable as idle
    assert deadlines.pending_deadlines() == 0
    assert deadlines.stop_idle_scheduler(WAIT)
    wait_until(lambda: not (set(threading.enumerate()) - before), "every new thread to end")
    assert server.sessions() == []


def test_run_in_a_thread_returns_when_the_connection_ends():
    server = Server("runner")
    started, saw = gated(server)
    client_side, server_side = memory_pair()
    finished = threading.Event()

    def serve() -> None:
        try:
            server.run(server_side, grace=WAIT)
        finally:
            finished.set()

    runner = threading.Thread(target=serve, name="runner")
    runner.start()
    try:
        client = Client.connect(client_side, init_timeout=WAIT)
        try:
            pending = client.call_tool_future("hold")
            wait_event(started, "the handler to start")
        finally:
            client.close()
        wait_event(finished, "run() to return after the client closed")
        assert saw["cancelled"] is True
        with pytest.raises(ConnectionClosed):
            pending.result(WAIT)
    finally:
        client_side.close()
        runner.join(WAIT)
    assert not runner.is_alive()


def test_run_rejects_an_unknown_transport_name():
    with pytest.raises(ValueError, match="unknown transport"):
        Server("x").run("carrier-pigeon")


def test_output_of_handlers_on_stdout_goes_to_stderr_and_never_corrupts_the_protocol():
    env = {"PYTHONPATH": str(ROOT)}
    with Client.stdio(
        [sys.executable, str(PEERS / "chatty_server.py")],
        env=env,
        stderr="capture",
        init_timeout=20.0,
        protocol="legacy",
    ) as client:
        for text in ("first", "second"):
            assert client.call_tool("chatty", {"text": text}, timeout=WAIT).content[0].text == text
        client.ping(timeout=WAIT)
        assert client.endpoint.dropped == {}, "something that was not a message reached the client"
    stderr = "\n".join(client.transport.stderr_lines)
    for expected in (
        "a print() in a handler",
        "no newline at the end",
        "raw write to descriptor 1",
        "a child process inherits stdout",
    ):
        assert expected in stderr, stderr
