"""The ``mcp-sync`` command line, end to end, as a user runs it: ``python -m mcp_sync ...``
in a subprocess, judged by real exit codes and output."""

from __future__ import annotations

import importlib.util
import re
import signal
from pathlib import Path
from typing import Iterator

import pytest

from proc_helpers import PYTHON, ROOT, Finished, Proc, run

MCP_SYNC = [PYTHON, "-m", "mcp_sync"]
DEMO_SERVER = [PYTHON, "-m", "mcp_sync.demo", "--serve"]
SERVERS = Path(__file__).resolve().parent / "servers"
BAD_SERVER = [PYTHON, str(SERVERS / "bad_cancel_server.py")]
OFFICIAL_SERVER = ROOT / "tests" / "interop" / "peers" / "official_server.py"  # shared with the interop tests
LIMIT = 30.0


def mcp_sync(*args: str, limit: float = LIMIT) -> Finished:
    return run([*MCP_SYNC, *args], limit)


# The longest commands mostly wait on timers (grace periods, slow calls): the ones whose tests
# are selected start together, once, and each of those tests judges its own command.
LONG_RUNS: dict[str, list[str]] = {
    "test_demo": ["demo"],
    "test_check_cancel_passes_our_demo_server": [
        "check-cancel", "--slow-tool", "slow", "--slow-args", '{"seconds": 1}', "--race-calls", "10", "--", *DEMO_SERVER,
    ],
    "test_check_cancel_fails_a_server_that_answers_cancelled_requests": [
        "check-cancel", "--slow-tool", "slow", "--slow-args", '{"seconds": 0.5}', "--race-calls", "10", "--", *BAD_SERVER,
    ],
    "test_check_cancel_passes_the_official_sdk_server": [
        "check-cancel", "--slow-tool", "slow", "--slow-args", '{"seconds": 1}', "--race-calls", "10",
        "--", PYTHON, str(OFFICIAL_SERVER),
    ],
}


@pytest.fixture(scope="module")
def long_runs(request: pytest.FixtureRequest) -> Iterator[dict[str, Proc]]:
    selected = {item.originalname for item in request.session.items if item.module is request.module}
    if importlib.util.find_spec("mcp") is None:  # the official SDK is a test-only extra
        selected.discard("test_check_cancel_passes_the_official_sdk_server")
    procs = {name: Proc([*MCP_SYNC, *argv]) for name, argv in LONG_RUNS.items() if name in selected}
    yield procs
    for proc in procs.values():
        proc.kill()
        proc.finish(5)


@pytest.fixture
def long_run(request: pytest.FixtureRequest, long_runs: dict[str, Proc]) -> Finished:
    """How this test's command (in :data:`LONG_RUNS`) ended."""
    proc = long_runs.get(request.node.originalname)
    if proc is None:
        pytest.skip("the official mcp SDK is not installed")
    result = proc.finish(60)
    assert result.code != -9, f"did not finish within 60 s\n{result.describe()}"
    return result


# -- tools, call, ping, serve ------------------------------------------------------------------


def test_tools_lists_the_servers_tools() -> None:
    result = mcp_sync("tools", "--", *DEMO_SERVER)
    assert result.code == 0, result.describe()
    lines = result.stdout.splitlines()
    assert any(line.startswith("slow: Work for `seconds`") for line in lines), result.describe()
    assert any(line.startswith("last_run: ") for line in lines), result.describe()


def test_call_prints_the_result_and_progress_on_stderr() -> None:
    result = mcp_sync("call", "slow", '{"seconds": 0.3}', "--", *DEMO_SERVER)
    assert result.code == 0, result.describe()
    match = re.fullmatch(r"done after (\d+) steps\n", result.stdout)
    assert match, result.describe()
    steps = int(match.group(1))
    progress = [line for line in result.stderr.splitlines() if "step " in line]
    assert len(progress) == steps, result.describe()  # not a terminal: one line per notification
    assert progress[0].endswith(f"step 1 of {steps}"), result.describe()
    assert progress[-1].endswith(f"100% step {steps} of {steps}"), result.describe()


def test_call_timeout_exits_124_with_a_clear_message() -> None:
    result = mcp_sync("call", "slow", '{"seconds": 30}', "--timeout", "0.3", "--", *DEMO_SERVER)
    assert result.code == 124, result.describe()
    assert "mcp-sync: slow timed out after 0.3 s; the call was cancelled on the server" in result.stderr, result.describe()
    assert result.stdout == "", result.describe()
    assert result.seconds < 20, f"the 30 s call was not cut short\n{result.describe()}"


def test_call_ctrl_c_exits_130() -> None:
    with Proc([*MCP_SYNC, "call", "slow", '{"seconds": 30}', "--", *DEMO_SERVER]) as proc:
        proc.wait_for("stderr", "step 1 of", LIMIT)  # the server is running the tool
        proc.send_signal(signal.SIGINT)
        result = proc.finish(LIMIT)
    assert result.code == 130, result.describe()
    assert "mcp-sync: interrupted; the call was cancelled on the server" in result.stderr, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    assert result.seconds < 20, f"the 30 s call was not cut short\n{result.describe()}"


def test_call_rejects_arguments_that_are_not_json() -> None:
    result = mcp_sync("call", "slow", "{seconds: 1}", "--", *DEMO_SERVER)
    assert result.code == 1, result.describe()
    assert "mcp-sync: the arguments are not valid JSON" in result.stderr, result.describe()


def test_call_of_an_unknown_tool_exits_1() -> None:
    result = mcp_sync("call", "nope", "--", *DEMO_SERVER)
    assert result.code == 1, result.describe()
    assert "Unknown tool: nope" in result.stderr, result.describe()


def test_ping() -> None:
    result = mcp_sync("ping", "--", *DEMO_SERVER)
    assert result.code == 0, result.describe()
    assert re.fullmatch(r"pong from mcp_sync-demo in \d+\.\d\d ms\n", result.stdout), result.describe()


def test_serve_is_a_server_command_for_another_mcp_sync() -> None:
    result = mcp_sync("ping", "--", *MCP_SYNC, "serve", "mcp_sync.demo:server")
    assert result.code == 0, result.describe()
    assert result.stdout.startswith("pong from mcp_sync-demo in "), result.describe()


def test_serve_http_and_url_clients() -> None:
    """``serve --http`` on a free port; ``ping``, ``call`` and ``call --timeout`` by ``--url``;
    Ctrl-C stops the server."""
    if importlib.util.find_spec("httpx") is None:
        pytest.skip("the http extra (httpx) is not installed")
    with Proc([*MCP_SYNC, "serve", "mcp_sync.demo:server", "--http", "--port", "0"]) as server:
        line = server.wait_for("stderr", "serving mcp_sync-demo at http://", LIMIT)
        url = line.split(" at ", 1)[1].strip()
        pong = mcp_sync("ping", "--url", url)
        assert pong.code == 0 and pong.stdout.startswith("pong from mcp_sync-demo"), pong.describe()
        done = mcp_sync("call", "slow", '{"seconds": 0.2}', "--no-progress", "--url", url)
        assert done.code == 0 and re.fullmatch(r"done after \d+ steps\n", done.stdout), done.describe()
        assert "step" not in done.stderr, done.describe()
        late = mcp_sync("call", "slow", '{"seconds": 30}', "--timeout", "0.3", "--url", url)
        assert late.code == 124, late.describe()
        assert "timed out after 0.3 s; the call was cancelled on the server" in late.stderr, late.describe()
        server.send_signal(signal.SIGINT)
        stopped = server.finish(LIMIT)
    assert stopped.code == 0, stopped.describe()
    assert "Traceback" not in stopped.stderr, stopped.describe()


def test_a_server_command_that_does_not_exist() -> None:
    result = mcp_sync("ping", "--", "/nonexistent/mcp-server")
    assert result.code == 1, result.describe()
    assert result.stderr.startswith("mcp-sync: ") and "No such file or directory" in result.stderr, result.describe()
    assert "Traceback" not in result.stderr, result.describe()


def test_a_missing_server_is_a_usage_error() -> None:
    result = mcp_sync("ping")
    assert result.code == 1, result.describe()
    assert "name a server" in result.stderr, result.describe()


# -- demo --------------------------------------------------------------------------------------


def test_demo(long_run: Finished) -> None:
    result = long_run
    assert result.code == 0, result.describe()
    assert "server says: stopped by cancellation" in result.stdout, result.describe()
    assert "RequestTimeout: tools/call: timed out after 0.5 s" in result.stdout, result.describe()
    assert "Cancelled('cancelled by another thread')" in result.stdout, result.describe()
    assert "result: done after 10 steps" in result.stdout, result.describe()
    assert "the server process exited with code 0" in result.stdout, result.describe()


# -- check-cancel ------------------------------------------------------------------------------


def _rows(stdout: str) -> dict[str, tuple[str, str]]:
    """The report table as ``{check: (PASS|FAIL, measured)}``."""
    rows = {}
    for line in stdout.splitlines():
        match = re.match(r"^(\S.*?)\s{2,}(PASS|FAIL)\s{2,}(.*)$", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def test_check_cancel_passes_our_demo_server(long_run: Finished) -> None:
    result = long_run
    assert result.code == 0, result.describe()
    rows = _rows(result.stdout)
    assert len(rows) == 11 and all(status == "PASS" for status, _ in rows.values()), result.describe()
    assert "in-flight cancel gets no response" in rows, result.describe()
    assert any(name.startswith("race of 10 calls") for name in rows), result.describe()
    assert "11 passed, 0 failed" in result.stdout, result.describe()


def test_check_cancel_fails_a_server_that_answers_cancelled_requests(long_run: Finished) -> None:
    result = long_run
    assert result.code == 1, result.describe()
    rows = _rows(result.stdout)
    # what it does right
    assert rows["cancelled initialize still completes"][0] == "PASS", result.describe()
    assert rows["cancel of an unknown id is ignored"][0] == "PASS", result.describe()
    # it answers malformed cancellations
    malformed = {name: row for name, row in rows.items() if name.startswith("malformed cancel")}
    assert len(malformed) == 6, result.describe()
    assert all(status == "FAIL" and "the server answered" in detail for status, detail in malformed.values()), result.describe()
    # and it answers cancelled calls
    status, detail = rows["in-flight cancel gets no response"]
    assert status == "FAIL" and "after the cancel" in detail, result.describe()
    race = next((name, row) for name, row in rows.items() if name.startswith("race of 10 calls"))
    if not race[0].endswith(", 0 cancelled"):  # the race cancels each call with probability 1/2
        assert race[1][0] == "FAIL" and not race[1][1].startswith("cancelled answered: 0;"), result.describe()
    assert re.search(r"\d+ passed, \d+ failed", result.stdout), result.describe()


def test_check_cancel_reports_a_server_that_dies() -> None:
    result = mcp_sync("check-cancel", "--", *BAD_SERVER, "--exit-on-cancel")
    assert result.code == 1, result.describe()
    rows = _rows(result.stdout)  # the table is printed although the server is gone
    assert rows["cancelled initialize still completes"][0] == "PASS", result.describe()
    status, detail = rows["cancel of an unknown id is ignored"]
    assert status == "FAIL" and "the server stopped serving" in detail, result.describe()
    assert rows["the server keeps serving"][0] == "FAIL", result.describe()
    assert "Traceback" not in result.stderr, result.describe()


@pytest.mark.interop
def test_check_cancel_passes_the_official_sdk_server(long_run: Finished) -> None:
    assert OFFICIAL_SERVER.exists(), f"the official SDK peer script is missing: {OFFICIAL_SERVER}"
    result = long_run
    assert result.code == 0, result.describe()
    rows = _rows(result.stdout)
    assert len(rows) == 11 and all(status == "PASS" for status, _ in rows.values()), result.describe()


def test_bad_server_is_plain_python() -> None:
    """The misbehaving server must not lean on mcp_sync (it would inherit its good manners)."""
    source = (SERVERS / "bad_cancel_server.py").read_text()
    assert "import mcp" not in source and "from mcp" not in source
