"""The library leaves the application's logging alone, and its logger names are documented.

``Server.run()`` used to call ``logging.basicConfig`` on the host program's root logger; a
server run as a subprocess now reports, on exit, that no handler was added anywhere.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import pytest
from support.paths import PEERS, PYTHON, ROOT
from support.processes import Proc
from support.waiting import WAIT

from mcp_sync import Client

PROBE = PEERS / "logging_probe_server.py"

UNCONFIGURED = {"root": {"handlers": [], "level": 30}, "mcp_sync": {"handlers": [], "level": 0}}
"""A fresh interpreter's loggers: the root at WARNING with no handler, ``mcp_sync`` unset."""


def read_report(path: Path) -> dict[str, object]:
    assert path.exists(), "the probe server wrote no report: run() did not return"
    return json.loads(path.read_text(encoding="utf-8"))


def test_run_over_stdio_configures_no_logging(tmp_path):
    report = tmp_path / "report.json"
    env = {"PYTHONPATH": str(ROOT)}
    with Client.stdio(
        [sys.executable, str(PROBE), "stdio", str(report)],
        env=env,
        stderr="capture",
        init_timeout=20.0,
    ) as client:
        assert client.call_tool("echo", {"text": "hi"}, timeout=WAIT).content[0].text == "hi"
    assert client.transport.process.returncode == 0, client.transport.stderr_lines
    assert read_report(report) == {"before": UNCONFIGURED, "after": UNCONFIGURED}


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_run_over_http_configures_no_logging(tmp_path):
    report = tmp_path / "report.json"
    with Proc([PYTHON, str(PROBE), "http", str(report)]) as proc:
        line = proc.wait_for("stderr", "serving logging-probe at ", timeout=20)
        url = line.split(" at ", 1)[1].strip()
        with Client.http(url) as client:
            assert client.call_tool("echo", {"text": "hi"}, timeout=WAIT).content[0].text == "hi"
        proc.send_signal(signal.SIGTERM)
        finished = proc.finish(20)
    assert finished.code == 0, finished.describe()
    assert read_report(report) == {"before": UNCONFIGURED, "after": UNCONFIGURED}


def test_every_logger_in_the_package_is_documented():
    used = set()
    for source in (ROOT / "mcp_sync").rglob("*.py"):
        used.update(
            re.findall(
                r"getLogger\(\s*[\"'](mcp_sync[\w.]*)[\"']", source.read_text(encoding="utf-8")
            )
        )
    assert "mcp_sync.server" in used, "the scan found none of the package's loggers"
    page = (ROOT / "docs" / "logging.rst").read_text(encoding="utf-8")
    documented = set(re.findall(r"^``(mcp_sync[\w.]*)``", page, re.MULTILINE))
    assert used <= documented, f"loggers missing from docs/logging.rst: {sorted(used - documented)}"
    assert "mcp_sync.wire" in documented
