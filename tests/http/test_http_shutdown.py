"""SIGTERM to ``server.run("http")`` with several sessions whose handlers ignore their
cancellation: the process exits after one grace period in all, not one per session."""

from __future__ import annotations

import signal
import sys
import time

import pytest
from support.http import RawSession
from support.messages import call_tool
from support.paths import PEERS
from support.processes import Proc

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

GRACE = 1.5
SESSIONS = 4


def test_sigterm_with_stuck_sessions_exits_within_one_grace_period():
    with Proc([sys.executable, str(PEERS / "stubborn_http_server.py"), str(GRACE)]) as proc:
        line = proc.wait_for("stderr", "serving stubborn-http at ", 20)
        url = line.rsplit(" ", 1)[1].strip()
        sessions = [RawSession(url) for _ in range(SESSIONS)]
        try:
            for session in sessions:
                session.initialize()
                stream = session.open(call_tool("stubborn", {}, 1, progress_token="p"))
                _, progress = stream.next() or (None, {})
                assert progress.get("method") == "notifications/progress", progress  # it runs
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            # one grace per stuck session would be SESSIONS * GRACE = 6 s
            finished = proc.finish(10)
            elapsed = time.monotonic() - started
        finally:
            for session in sessions:
                session.close()
        assert finished.code == 0, finished.describe()
        assert "run returned" in finished.stderr
        assert elapsed < SESSIONS * GRACE, elapsed
