"""Tasks over stdio, in both eras: mcp_sync's client against examples/task_report.py run as a
server process (``--serve``); with ``--db``, a task whose server was killed is marked failed by
the next server on the same SQLite file."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support.paths import PYTHON, ROOT
from support.waiting import PEER_WAIT, wait_until

from mcp_sync import Cancelled, Client

SERVER = [PYTHON, str(ROOT / "examples" / "task_report.py"), "--serve"]
ERAS = [pytest.param("legacy", id="2025-11-25"), pytest.param("modern", id="2026-07-28")]


@pytest.mark.parametrize("protocol", ERAS)
def test_a_short_task_completes(protocol: str) -> None:
    with Client.stdio(SERVER, protocol=protocol, stderr="capture") as client:
        task = client.call_tool_as_task(
            "build_report", {"month": "2026-10", "minutes": 0.005}, timeout=PEER_WAIT
        )
        assert task.task_id
        result = task.result(timeout=PEER_WAIT)
        assert result.content[0].text == "report 2026-10: 3 steps"
        assert client.get_task(task.task_id, timeout=PEER_WAIT).status == "completed"


@pytest.mark.parametrize("protocol", ERAS)
def test_cancel_stops_the_handler_in_the_server_process(protocol: str) -> None:
    with Client.stdio(SERVER, protocol=protocol, stderr="capture") as client:
        task = client.call_tool_as_task(
            "build_report", {"month": "2026-11", "minutes": 10}, timeout=PEER_WAIT
        )
        assert task.status().status == "working"
        assert task.cancel("no longer needed").status == "cancelled"
        report = client.call_tool("last_report", {"wait_seconds": PEER_WAIT}, timeout=PEER_WAIT)
        assert (report.structured_content or {}).get("state") == "cancelled"
        with pytest.raises(Cancelled):
            task.result(timeout=PEER_WAIT)
        assert client.get_task(task.task_id, timeout=PEER_WAIT).status == "cancelled"


def test_a_task_of_a_killed_server_is_failed_by_the_next_one(tmp_path: Path) -> None:
    db = str(tmp_path / "tasks.db")
    server = [*SERVER, "--db", db, "--lease", "0.5"]
    with Client.stdio(server, protocol="modern", stderr="capture") as client:
        task = client.call_tool_as_task(
            "build_report", {"month": "2026-12", "minutes": 10}, timeout=PEER_WAIT
        )
        assert task.status().status == "working"
        os.kill(client.transport.pid, signal.SIGKILL)  # type: ignore[attr-defined]
    with Client.stdio(server, protocol="modern", stderr="capture") as client:

        def ended() -> bool:
            return client.get_task(task.task_id, timeout=PEER_WAIT).terminal  # type: ignore[arg-type]

        wait_until(ended, "the dead server's task to end", timeout=PEER_WAIT)
        state = client.get_task(task.task_id, timeout=PEER_WAIT)  # type: ignore[arg-type]
        assert state.status == "failed", state
