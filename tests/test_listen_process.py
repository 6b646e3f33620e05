"""subscriptions/listen end to end: our listen client against a stdio server subprocess."""

from __future__ import annotations

import os
import queue
import re
import signal
import sys

import pytest
from support.listen import ENVELOPE, TAG, routed_endpoint
from support.paths import PEERS
from support.waiting import WAIT

from mcp_sync import Client, SubprocessTransport
from mcp_sync.errors import WaitTimeout
from mcp_sync.listen import listen_params

SCRIPT = PEERS / "listen_server.py"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals drive the server")


class StderrLines:
    def __init__(self) -> None:
        self.lines: queue.Queue[str] = queue.Queue()

    def __call__(self, line: str) -> None:
        self.lines.put(line)

    def wait_for(self, prefix: str) -> str:
        while True:
            try:
                line = self.lines.get(timeout=WAIT)
            except queue.Empty:
                pytest.fail(f"the server did not write {prefix!r} to stderr")
            if line.startswith(prefix):
                return line


def threads_in(line: str) -> tuple[int, int]:
    """(threads other than handler workers, open subscriptions) from a CHANGED line; the
    server has one handler worker at most."""
    match = re.search(r"threads=(\d+) workers=(\d+) listens=(\d+)", line)
    assert match, line
    assert int(match.group(2)) <= 1, line
    return int(match.group(1)), int(match.group(3))


def test_listen_over_stdio_end_to_end() -> None:
    stderr = StderrLines()
    transport = SubprocessTransport([sys.executable, str(SCRIPT)], stderr=stderr)
    endpoint, router = routed_endpoint(transport)
    try:
        stderr.wait_for("READY")
        tools = router.open({**listen_params(tools=True), "_meta": ENVELOPE}, ack_timeout=WAIT)
        res = router.open(
            {**listen_params(resources=["file:///a"]), "_meta": ENVELOPE}, ack_timeout=WAIT
        )
        assert tools.acknowledged == {"toolsListChanged": True}
        assert res.acknowledged == {"resourceSubscriptions": ["file:///a"]}

        transport._signal(signal.SIGUSR1)
        event = tools.next(timeout=WAIT)
        assert event.method == "notifications/tools/list_changed" and event.params["_meta"] == {
            TAG: tools.id
        }
        first_line = stderr.wait_for("CHANGED 1")
        base_threads, listens = threads_in(first_line)
        assert listens == 2

        # ten more subscriptions cost the server no thread
        more = [
            router.open({**listen_params(tools=True), "_meta": ENVELOPE}, ack_timeout=WAIT)
            for _ in range(10)
        ]
        transport._signal(signal.SIGUSR2)
        update = res.next(timeout=WAIT)
        assert (update.uri, update.params["_meta"]) == ("file:///a", {TAG: res.id})
        line = stderr.wait_for("CHANGED 2")
        threads, listens = threads_in(line)
        assert (threads, listens) == (base_threads, 12), (first_line, line)

        for sub in more:
            sub.close()
        tools.close()  # notifications/cancelled naming its id: the server drops that stream only
        listens, n = 12, 2
        while listens != 1:  # until the server has read the eleven cancels
            assert n < 50, "the server kept the cancelled streams"
            transport._signal(signal.SIGUSR2)
            assert res.next(timeout=WAIT).uri == "file:///a"  # the resource stream lives on
            n += 1
            _threads, listens = threads_in(stderr.wait_for(f"CHANGED {n}"))
        transport._signal(signal.SIGUSR1)  # no stream asks for it any more
        stderr.wait_for(f"CHANGED {n + 1}")
        transport._signal(signal.SIGUSR2)
        assert res.next(timeout=WAIT).uri == "file:///a"
        assert router.unrouted == 0  # nothing came for a closed subscription
        assert list(tools) == []

        transport._signal(signal.SIGTERM)  # shutdown: the open stream ends gracefully
        assert list(res) == []
        assert res.ended_gracefully
    finally:
        endpoint.close(grace=WAIT)


def test_client_listen_over_stdio() -> None:
    """``Client.stdio`` + ``Client.listen``: runs once the client negotiates 2026-07-28."""
    stderr = StderrLines()
    with Client.stdio([sys.executable, str(SCRIPT)], stderr=stderr) as client:
        if client.protocol_version != "2026-07-28":
            pytest.skip(f"the client negotiated {client.protocol_version}, not 2026-07-28")
        with client.listen(tools=True) as tools, client.listen(resources=["file:///a"]) as res:
            assert (tools.acknowledged, res.acknowledged) == (
                {"toolsListChanged": True},
                {"resourceSubscriptions": ["file:///a"]},
            )
            os.kill(client.transport.pid, signal.SIGUSR2)
            assert res.next(timeout=WAIT).params["_meta"] == {TAG: res.id}
            os.kill(client.transport.pid, signal.SIGUSR1)
            assert tools.next(timeout=WAIT).method == "notifications/tools/list_changed"
            with pytest.raises(WaitTimeout):
                res.next(timeout=0)
        assert not tools.active and not res.active
