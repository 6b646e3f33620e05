"""concurrent.futures conventions: running(), negative timeouts, and a server that exits at once.

Before the change ``PendingCall.running()`` was always False, ``timeout=-1`` failed later with
"timed out after -1 s", and a server that exited at once failed ``Client.stdio`` with only
"the peer closed the connection".
"""

from __future__ import annotations

import math
import os
import signal
import sys

import pytest
from support.endpoints import Blocker, endpoint_pair
from support.sessions import connected
from support.waiting import WAIT

from mcp_sync import CancelToken, Client, ConnectionClosed, RequestTimeout, Server, memory_pair
from mcp_sync.errors import ServerExited
from mcp_sync.transports.subprocess import STDERR_TAIL_BYTES, SubprocessTransport


# -- running() ------------------------------------------------------------------------------------
def test_running_is_true_exactly_while_the_request_is_in_flight():
    blocker = Blocker()
    with endpoint_pair({"block": blocker, "echo": lambda r: r.params}) as pair:
        pending = pair.client.submit("block")
        blocker.wait_started(1)
        assert pending.running() and not pending.done()
        blocker.release_all()
        pending.result(WAIT)
        assert not pending.running()
        cancelled = pair.client.submit("block")
        blocker.wait_started(2)
        assert cancelled.running()
        cancelled.cancel("stop")
        assert not cancelled.running() and cancelled.cancelled()
        token = CancelToken()
        token.cancel()
        never_sent = pair.client.submit("echo", cancel_token=token)
        assert not never_sent.running()


# -- negative timeouts ------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [-1, -0.001, math.nan])
def test_negative_timeouts_raise_value_error_everywhere(bad):
    with endpoint_pair({"echo": lambda r: r.params}) as pair:
        with pytest.raises(ValueError, match="timeout"):
            pair.client.submit("echo", timeout=bad)
        with pytest.raises(ValueError, match="max_total_timeout"):
            pair.client.submit("echo", max_total_timeout=bad)
        assert pair.client.in_flight() == (0, 0), "a refused call was registered"
        pending = pair.client.submit("echo", {"x": 1})
        with pytest.raises(ValueError):
            pending.result(timeout=bad)
        with pytest.raises(ValueError):
            pending.exception(timeout=bad)
        assert pending.result(WAIT) == {"x": 1}
    with pytest.raises(ValueError):
        CancelToken.with_timeout(bad)
    with pytest.raises(ValueError):
        CancelToken().set_deadline(bad)
    server = Server("t")

    @server.tool()
    def ok() -> str:
        return "ok"

    with connected(server) as conn:
        with pytest.raises(ValueError):
            conn.client.call_tool("ok", timeout=bad)
        with pytest.raises(ValueError):
            conn.client.list_tools(timeout=bad)
        assert conn.client.call_tool("ok", timeout=WAIT).content[0].text == "ok"
    client_side, _server_side = memory_pair()
    try:
        with pytest.raises(ValueError, match="default_timeout"):
            Client(client_side, default_timeout=bad)
    finally:
        client_side.close()


def test_zero_timeout_still_means_expire_at_once_and_event_style_waits_do_not_raise():
    blocker = Blocker()
    with endpoint_pair({"block": blocker}) as pair, pytest.raises(RequestTimeout):
        pair.client.request("block", timeout=0)
    token = CancelToken()
    assert token.wait(-1) is False  # like threading.Event.wait: a remaining time below zero
    assert token.wait(0) is False


# -- a server that exits at once -------------------------------------------------------------------
def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.parametrize("stderr", ["inherit", "capture", "discard"])
def test_a_server_that_exits_at_once_fails_with_its_status_and_stderr(stderr, capfd):
    code = "import sys; sys.stderr.write('starting\\nModuleNotFoundError: no module named nope\\n'); sys.exit(7)"
    with pytest.raises(ServerExited) as info:
        Client.stdio(_python(code), stderr=stderr, init_timeout=20)
    error = info.value
    assert isinstance(error, ConnectionClosed)
    assert error.returncode == 7
    assert "exited with status 7" in str(error)
    assert "ModuleNotFoundError: no module named nope" in str(error)
    assert error.stderr_tail.endswith("no module named nope")
    forwarded = capfd.readouterr().err
    if stderr == "inherit":
        assert "ModuleNotFoundError: no module named nope" in forwarded, (
            "stderr no longer reaches the user"
        )
    else:
        assert "ModuleNotFoundError" not in forwarded


def test_a_server_killed_by_a_signal_says_so():
    code = "import os, signal, sys; sys.stderr.write('about to die\\n'); sys.stderr.flush(); os.kill(os.getpid(), signal.SIGKILL)"
    with pytest.raises(ServerExited) as info:
        Client.stdio(_python(code), stderr="discard", init_timeout=20)
    assert info.value.returncode == -9
    assert "killed by signal SIGKILL" in str(info.value) and "about to die" in str(info.value)


def test_a_server_that_logs_a_lot_keeps_flowing_and_the_tail_is_bounded(capfd):
    # 2 MiB of logs before exiting: more than any pipe buffer, so nobody reading would hang it
    code = (
        "import sys\n"
        "for i in range(16384): sys.stderr.write('log line %06d ' % i + 'x' * 112 + '\\n')\n"
        "sys.stderr.write('the last words\\n'); sys.exit(3)\n"
    )
    with pytest.raises(ServerExited) as info:
        Client.stdio(_python(code), init_timeout=30)
    tail = info.value.stderr_tail
    assert len(tail.encode()) <= STDERR_TAIL_BYTES
    assert tail.endswith("the last words")
    forwarded = capfd.readouterr().err
    assert forwarded.count("log line ") == 16384, "stderr was not copied through whole"


def test_writing_to_a_server_that_has_exited_raises_server_exited():
    # before, a write that lost the race with the reader failed with a bare "Broken pipe"
    transport = SubprocessTransport(
        _python("import sys; sys.stderr.write('bad flag\\n'); sys.exit(5)"), stderr="discard"
    )
    try:
        transport.process.wait(20)
        with pytest.raises(ServerExited) as info:
            transport.write(b"{}\n" * 100_000)  # more than a pipe holds: the write must fail
        assert info.value.returncode == 5 and info.value.stderr_tail == "bad flag"
        assert info.value.what == f"the server process {transport.pid} exited with status 5"
        assert str(info.value) == f"{info.value.what}; the end of its stderr:\nbad flag"
    finally:
        transport.close()


def test_a_server_that_exits_later_fails_pending_calls_with_server_exited():
    code = (
        "import json, sys\n"
        "line = sys.stdin.readline(); msg = json.loads(line)\n"
        "print(json.dumps({'jsonrpc': '2.0', 'id': msg['id'], 'result': {'protocolVersion': '2025-11-25',"
        " 'capabilities': {'tools': {}}, 'serverInfo': {'name': 'x', 'version': '0'}}}), flush=True)\n"
        "sys.stdin.readline(); sys.stdin.readline()\n"
        "sys.stderr.write('fatal: out of cheese\\n'); sys.exit(4)\n"
    )
    with Client.stdio(
        _python(code), stderr="discard", init_timeout=20, protocol="legacy"
    ) as client:
        with pytest.raises(ServerExited, match="out of cheese"):
            client.list_tools(timeout=20)
        assert client.stats().closed


def test_close_stops_reading_stderr_that_a_leftover_grandchild_holds_open():
    # the server starts a helper that inherits its stderr and outlives it
    code = (
        "import subprocess, sys\n"
        "helper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(helper.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    transport = SubprocessTransport(_python(code), stderr="discard", close_grace=5)
    helper_pid = int(transport.read_line() or b"0")
    try:
        pump = transport._stderr_thread
        assert pump is not None and pump.is_alive()
        transport.close()
        assert transport.process.returncode == 0
        assert not pump.is_alive(), "the stderr thread stayed blocked on the helper's open stderr"
    finally:
        os.kill(helper_pid, signal.SIGKILL)
