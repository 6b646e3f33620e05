"""The ``mcp-sync`` command line, end to end, as a user runs it: the installed ``mcp-sync``
console script in a subprocess, judged by real exit codes and output."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.node import server_everything, server_filesystem
from support.paths import PEERS, PYTHON, ROOT
from support.processes import Finished, Proc, run, user_env

SCRIPT = Path(sys.executable).with_name("mcp-sync")
MCP_SYNC = [str(SCRIPT)]
DEMO_SERVER = [PYTHON, "-m", "mcp_sync.cli.demo", "--serve"]
BAD_SERVER = [PYTHON, str(PEERS / "bad_cancel_server.py")]
CLI_SERVER = [PYTHON, str(PEERS / "cli_server.py")]
OFFICIAL_SERVER = PEERS / "official_server.py"  # shared with the interop tests
LIMIT = 30.0
SUBCOMMANDS_WITH_A_SERVER = [
    "tools",
    "call",
    "ping",
    "resources",
    "read",
    "prompts",
    "prompt",
    "check-cancel",
]


def mcp_sync(*args: str, limit: float = LIMIT, **options: Any) -> Finished:
    assert SCRIPT.exists(), (
        f"the mcp-sync console script is not installed next to {sys.executable}: pip install -e ."
    )
    return run([*MCP_SYNC, *args], limit, **options)


def assert_one_line_error(result: Finished, code: int, fragment: str) -> None:
    """The command failed with ``code`` and said why in one line, without a traceback."""
    assert result.code == code, result.describe()
    assert fragment in result.stderr, result.describe()
    assert "Traceback" not in result.stderr, result.describe()


# The longest commands mostly wait on timers (grace periods, slow calls): the ones whose tests
# are selected start together, once, and each of those tests judges its own command.
LONG_RUNS: dict[str, list[str]] = {
    "test_demo": ["demo"],
    "test_check_cancel_passes_our_demo_server": [
        "check-cancel",
        "--slow-tool",
        "slow",
        "--slow-args",
        '{"seconds": 1}',
        "--race-calls",
        "10",
        "--",
        *DEMO_SERVER,
    ],
    "test_check_cancel_fails_a_server_that_answers_cancelled_requests": [
        "check-cancel",
        "--slow-tool",
        "slow",
        "--slow-args",
        '{"seconds": 0.5}',
        "--race-calls",
        "10",
        "--",
        *BAD_SERVER,
    ],
    "test_check_cancel_passes_the_official_sdk_server": [
        "check-cancel",
        "--slow-tool",
        "slow",
        "--slow-args",
        '{"seconds": 1}',
        "--race-calls",
        "10",
        "--",
        PYTHON,
        str(OFFICIAL_SERVER),
    ],
}


@pytest.fixture(scope="module")
def long_runs(request: pytest.FixtureRequest) -> Iterator[dict[str, Proc]]:
    selected = {
        item.originalname for item in request.session.items if item.module is request.module
    }
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


# -- tools, call, ping ------------------------------------------------------------------------

PROGRESS_LINE = re.compile(
    r"progress (\d+)/(\d+) \((\d+)%\) after (\d+\.\d) s: step (\d+) of (\d+)"
)


def test_tools_lists_the_servers_tools() -> None:
    result = mcp_sync("tools", "--", *DEMO_SERVER)
    assert result.code == 0, result.describe()
    lines = result.stdout.splitlines()
    assert any(line.startswith("slow: Work for `seconds`") for line in lines), result.describe()
    assert any(line.startswith("last_run: ") for line in lines), result.describe()


def test_call_prints_the_result_and_plain_progress_lines_when_stderr_is_not_a_terminal() -> None:
    """Not a terminal (a pipe, a cron log): plain lines, no control characters, at most one a
    second -- the first notification, then the latest one each second, and the last."""
    result = mcp_sync("call", "slow", '{"seconds": 1.5}', "--", *DEMO_SERVER)
    assert result.code == 0, result.describe()
    assert result.stdout == "done after 30 steps\n", result.describe()
    lines = [line for line in result.stderr.splitlines() if "step " in line]
    parsed = [PROGRESS_LINE.fullmatch(line) for line in lines]
    assert all(parsed) and len(parsed) >= 2, result.describe()
    steps = [int(m.group(1)) for m in parsed if m]
    elapsed = [float(m.group(4)) for m in parsed if m]
    assert steps[0] == 1 and steps[-1] == 30 and steps == sorted(steps), result.describe()
    assert len(lines) < 30 / 2, f"one line per notification: not throttled\n{result.describe()}"
    spacing = [
        b - a for a, b in itertools.pairwise(elapsed[:-1])
    ]  # the last line is printed at the end
    assert all(gap >= 0.9 for gap in spacing), (
        f"lines less than a second apart\n{result.describe()}"
    )
    assert lines[-1].startswith("progress 30/30 (100%)"), result.describe()
    assert "\r" not in result.stderr and "\x1b[" not in result.stderr, result.describe()


def _run_with_stderr_on_a_pty(argv: list[str], limit: float) -> tuple[int, str, str]:
    """Run ``argv`` with stderr on a pseudo-terminal; returns (exit code, stdout, stderr)."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=user_env(),
        cwd=str(ROOT),
        start_new_session=True,
    )
    os.close(slave)
    out: list[bytes] = []
    reader = threading.Thread(
        target=lambda: out.append(proc.stdout.read() if proc.stdout else b""),
        name="pty-test-stdout",
    )
    reader.start()
    terminal = bytearray()
    try:
        end = threading.Event()
        deadline = time.monotonic() + limit
        while not end.is_set():
            left = deadline - time.monotonic()
            assert left > 0, (
                f"{argv} did not finish within {limit} s; terminal so far: {bytes(terminal)!r}"
            )
            ready, _, _ = select.select([master], [], [], min(left, 0.5))
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: every holder of the terminal's other end has closed it
                    chunk = b""
                if not chunk:
                    end.set()
                terminal += chunk
        code = proc.wait(limit)
    finally:
        os.close(master)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        reader.join(limit)
        if proc.stdout:
            proc.stdout.close()
    return code, b"".join(out).decode(), terminal.decode("utf-8", "replace")


def test_call_draws_a_progress_bar_with_elapsed_time_when_stderr_is_a_terminal() -> None:
    code, stdout, terminal = _run_with_stderr_on_a_pty(
        [*MCP_SYNC, "call", "slow", '{"seconds": 0.3}', "--", *DEMO_SERVER], LIMIT
    )
    assert code == 0, terminal
    assert re.fullmatch(r"done after 6 steps\n", stdout), stdout
    redraws = [part for part in terminal.split("\r") if part.strip()]
    assert len(redraws) == 6, repr(terminal)  # one redraw per notification, on one line
    assert all(part.startswith("[") and "\x1b[K" in part for part in redraws), repr(terminal)
    assert re.fullmatch(r"\[#{30}\] 100%\s+\d+\.\d s  step 6 of 6\x1b\[K", redraws[-1]), repr(
        terminal
    )
    assert terminal.endswith("\x1b[K\r\n"), repr(
        terminal
    )  # the line is ended once the call is (the pty adds \r)
    assert "progress 1/6" not in terminal, repr(terminal)  # not the plain lines of a log


def test_call_summarises_binary_content_unless_raw() -> None:
    result = mcp_sync("call", "image", "--", *CLI_SERVER)
    assert result.code == 0, result.describe()
    assert (
        result.stdout
        == "a tiny picture\n[image: image/png, 70 bytes]\n[audio: audio/wav, 2.0 KiB]\n"
    ), result.describe()
    raw = mcp_sync("call", "image", "--raw", "--", *CLI_SERVER)
    assert raw.code == 0, raw.describe()
    blocks = json.loads(raw.stdout)["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "audio"], raw.describe()
    assert blocks[1]["data"].startswith("iVBORw0KGgo") and len(blocks[2]["data"]) == 2732, (
        raw.describe()
    )


def test_a_tool_error_exits_3_not_2() -> None:
    result = mcp_sync("call", "fail", '{"message": "the disk is full"}', "--", *CLI_SERVER)
    assert result.code == 3, result.describe()
    assert result.stdout == "the disk is full\n", result.describe()
    assert "the tool fail reported an error (exit 3)" in result.stderr, result.describe()


def test_invalid_arguments_are_a_tool_error_too() -> None:
    result = mcp_sync("call", "echo", '{"text": 5}', "--", *CLI_SERVER)
    assert result.code == 3, result.describe()
    assert result.stdout.startswith("Invalid arguments for tool 'echo': text: "), result.describe()


def test_call_timeout_exits_124_and_says_the_cancellation_was_sent() -> None:
    result = mcp_sync("call", "slow", '{"seconds": 30}', "--timeout", "3", "--", *DEMO_SERVER)
    assert result.code == 124, result.describe()
    expected = "mcp-sync: slow timed out after 3 s; a cancellation was sent to the server (it may ignore it)"
    assert expected in result.stderr, result.describe()
    assert result.stdout == "", result.describe()
    assert result.seconds < 20, f"the 30 s call was not cut short\n{result.describe()}"


def test_timeout_covers_the_handshake() -> None:
    """A 'server' that never answers ``initialize``: the command ends at its --timeout, not at
    the default 30 s handshake limit plus the shutdown grace periods (a process that ignores
    its closed stdin is terminated at once: it never became a session)."""
    result = mcp_sync("tools", "--timeout", "2", "--", "sleep", "100")
    assert_one_line_error(
        result, 124, "mcp-sync: the server did not complete the handshake within 2 s"
    )
    assert result.seconds < 10, (
        f"took {result.seconds:.1f} s: the handshake ignored --timeout\n{result.describe()}"
    )


def test_timeout_covers_the_handshake_over_http() -> None:
    """A URL whose server accepts connections but never answers: the same bound."""
    if importlib.util.find_spec("httpx") is None:
        pytest.skip("the http extra (httpx) is not installed")
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)  # connections complete in the kernel; nobody reads them
        result = mcp_sync(
            "tools", "--timeout", "2", "--url", f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        )
    assert_one_line_error(
        result, 124, "mcp-sync: the server did not complete the handshake within 2 s"
    )
    assert result.seconds < 10, (
        f"took {result.seconds:.1f} s: the handshake ignored --timeout\n{result.describe()}"
    )


def test_call_ctrl_c_exits_130_and_says_the_cancellation_was_sent() -> None:
    with Proc([*MCP_SYNC, "call", "slow", '{"seconds": 30}', "--", *DEMO_SERVER]) as proc:
        proc.wait_for("stderr", "step 1 of", LIMIT)  # the server is running the tool
        proc.send_signal(signal.SIGINT)
        result = proc.finish(LIMIT)
    assert result.code == 130, result.describe()
    assert (
        "mcp-sync: interrupted; a cancellation was sent to the server for slow (it may ignore it)"
        in result.stderr
    ), result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    assert result.seconds < 20, f"the 30 s call was not cut short\n{result.describe()}"


@pytest.mark.parametrize(
    "argv",
    [
        ["call", "slow", "--timeout", "20", '{"seconds": 0.1}', "--no-progress"],
        ["call", "--no-progress", "slow", '{"seconds": 0.1}'],
        ["call", "--timeout", "20", "slow", "--text", '{"seconds": 0.1}', "--no-progress"],
    ],
    ids=["option-between-positionals", "option-first", "options-everywhere"],
)
def test_arguments_in_any_order(argv: list[str]) -> None:
    result = mcp_sync(*argv, "--", *DEMO_SERVER)
    assert result.code == 0, result.describe()
    assert result.stdout == "done after 2 steps\n", result.describe()


def test_a_missing_double_dash_gets_a_hint() -> None:
    result = mcp_sync("tools", PYTHON, "server.py")
    assert_one_line_error(
        result,
        2,
        "hint: put the server's command after --, for example: mcp-sync tools -- python server.py",
    )


@pytest.mark.parametrize(
    ("argv", "example"),
    [
        (["call", "slow", "python", "server.py"], "mcp-sync call TOOL [JSON] -- python server.py"),
        (
            ["call", "slow", "my-server"],
            "mcp-sync call TOOL [JSON] -- python server.py",
        ),  # taken for the JSON
        (["prompt", "greet", "my-server"], "mcp-sync prompt NAME [ARGS...] -- python server.py"),
        (["read", "memo://x", "python", "server.py"], "mcp-sync read URI -- python server.py"),
    ],
)
def test_the_hint_for_a_missing_double_dash_keeps_the_commands_arguments(
    argv: list[str], example: str
) -> None:
    """The hint's example must work when followed (it said 'mcp-sync call -- python server.py',
    without the tool), also when the server's words were taken for the command's own arguments."""
    assert_one_line_error(
        mcp_sync(*argv), 2, f"hint: put the server's command after --, for example: {example}\n"
    )


def test_a_missing_server_is_a_usage_error_showing_both_forms() -> None:
    result = mcp_sync("ping")
    assert_one_line_error(
        result,
        2,
        "name a server: mcp-sync ping [options] -- COMMAND [ARGS...]  or  mcp-sync ping [options] --url URL",
    )


@pytest.mark.parametrize("subcommand", SUBCOMMANDS_WITH_A_SERVER)
def test_every_subcommand_help_shows_both_server_forms_examples_and_exit_codes(
    subcommand: str,
) -> None:
    result = mcp_sync(subcommand, "--help")
    assert result.code == 0, result.describe()
    usage = result.stdout.split("\n\n", 1)[0]
    assert (
        f"mcp-sync {subcommand} " in usage
        and "-- COMMAND [ARGS...]" in usage
        and "--url URL" in usage
    ), result.describe()
    examples = result.stdout.split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert any(" -- " in e for e in examples) and any("--url http" in e for e in examples), (
        result.describe()
    )
    for code in ("0", "1", "2", "3", "124", "130"):
        assert re.search(rf"^  {code} +\S", result.stdout, re.M), (
            f"exit code {code} is not documented\n{result.describe()}"
        )


def test_top_level_help_documents_the_exit_codes() -> None:
    result = mcp_sync("--help")
    assert result.code == 0, result.describe()
    assert "exit codes:" in result.stdout and re.search(
        r"^  3 +call: the tool ran and reported an error", result.stdout, re.M
    ), result.describe()


def test_usage_errors_exit_2() -> None:
    assert_one_line_error(mcp_sync("call"), 2, "the following arguments are required: tool")
    assert_one_line_error(
        mcp_sync("call", "slow", "--timeout", "-1", "--", *DEMO_SERVER), 2, "must be more than 0"
    )
    assert_one_line_error(
        mcp_sync("tools", "--header", "X-A:1", "--", *DEMO_SERVER),
        2,
        "--header is sent with --url requests",
    )
    assert_one_line_error(
        mcp_sync("tools", "--url", "http://127.0.0.1:9/mcp", "--", *DEMO_SERVER),
        2,
        "either --url URL or -- COMMAND",
    )
    assert_one_line_error(
        mcp_sync("tools", "--header", "no colon", "--url", "http://127.0.0.1:9/mcp"),
        2,
        "not NAME:VALUE",
    )
    for bad in ("X-Name: caf\u00e9", "X-Name: a\nb"):
        assert_one_line_error(
            mcp_sync("tools", "-H", bad, "--url", "http://127.0.0.1:9/mcp"),
            2,
            "a header is printable ASCII",
        )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:abc/mcp", "--url has a bad port"),  # was an httpx.InvalidURL traceback
        ("http://127.0.0.1:70000/mcp", "--url has a bad port"),
        ("http:///mcp", "--url needs a host"),  # was "missing an 'http://' or 'https://' protocol"
        ("http://", "--url needs a host"),
    ],
)
def test_a_malformed_url_is_a_usage_error(url: str, message: str) -> None:
    assert_one_line_error(mcp_sync("tools", "--url", url), 2, f"mcp-sync tools: error: {message}")


def test_call_rejects_arguments_that_are_not_json() -> None:
    assert_one_line_error(
        mcp_sync("call", "slow", "{seconds: 1}", "--", *DEMO_SERVER),
        2,
        "the arguments are not valid JSON",
    )
    assert_one_line_error(
        mcp_sync("call", "slow", "[1]", "--", *DEMO_SERVER),
        2,
        "the arguments must be a JSON object, not list",
    )


def test_call_of_an_unknown_tool_exits_1() -> None:
    assert_one_line_error(mcp_sync("call", "nope", "--", *DEMO_SERVER), 1, "Unknown tool: nope")


def test_ping() -> None:
    result = mcp_sync("ping", "--", *DEMO_SERVER)
    assert result.code == 0, result.describe()
    assert re.fullmatch(r"pong from mcp_sync-demo in \d+\.\d\d ms\n", result.stdout), (
        result.describe()
    )


def test_a_server_command_that_does_not_exist() -> None:
    assert_one_line_error(
        mcp_sync("ping", "--", "/nonexistent/mcp-server"),
        1,
        "mcp-sync: cannot start '/nonexistent/mcp-server': No such file or directory",
    )


def test_a_server_that_exits_at_once_shows_its_status_and_the_end_of_its_stderr() -> None:
    crash = [
        PYTHON,
        "-c",
        "import sys; sys.stderr.write('starting\\nno config file found\\n'); sys.exit(3)",
    ]
    result = mcp_sync("tools", "--", *crash)
    # the status and the stderr come from the library's ServerExited, shown in the command's format
    assert_one_line_error(
        result, 1, " exited with status 3 during the handshake; the end of its stderr:\n"
    )
    assert re.fullmatch(
        r"mcp-sync: the server process \d+ exited with status 3 during the handshake; the end of its stderr:\n"
        r"  starting\n  no config file found\n",
        result.stderr,
    ), result.describe()
    killed = mcp_sync(
        "tools", "--", PYTHON, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    )
    assert_one_line_error(
        killed, 1, " was killed by signal SIGKILL during the handshake (it wrote nothing on stderr)"
    )
    quiet = mcp_sync(
        "tools", "-v", "--", PYTHON, "-c", "raise SystemExit(4)"
    )  # -v, but nothing to show
    assert_one_line_error(
        quiet, 1, " exited with status 4 during the handshake (it wrote nothing on stderr)"
    )
    shown = mcp_sync("tools", "-v", "--", *crash)  # -v: the server's stderr went to ours as it came
    assert shown.code == 1 and shown.stderr.startswith("starting\nno config file found\n"), (
        shown.describe()
    )
    assert shown.stderr.rstrip().endswith("(its stderr is above)"), shown.describe()


def test_an_unreachable_url_is_one_line() -> None:
    if importlib.util.find_spec("httpx") is None:
        pytest.skip("the http extra (httpx) is not installed")
    result = mcp_sync("ping", "--url", "http://127.0.0.1:9/mcp", "--timeout", "10")
    assert_one_line_error(result, 1, "mcp-sync: ")
    assert len(result.stderr.strip().splitlines()) == 1 and "127.0.0.1:9" in result.stderr, (
        result.describe()
    )


def test_every_header_option_is_sent_with_every_request() -> None:
    """``--header`` is repeatable: each one goes with every HTTP request of the command."""
    if importlib.util.find_spec("httpx") is None:
        pytest.skip("the http extra (httpx) is not installed")
    from mcp_sync import Server
    from mcp_sync.http.embedded_server import serve_http

    server = Server("headers")

    @server.tool()
    def hello() -> str:
        return "hi"

    app = server.wsgi_app(path="/mcp")
    seen: list[tuple[str, str | None, str | None]] = []

    def recording(environ: dict[str, Any], start_response: Any) -> Any:
        seen.append(
            (
                environ["REQUEST_METHOD"],
                environ.get("HTTP_AUTHORIZATION"),
                environ.get("HTTP_X_TEAM"),
            )
        )
        return app(environ, start_response)

    handle = serve_http(recording, "127.0.0.1", 0)
    try:
        result = mcp_sync(
            "call",
            "hello",
            "--url",
            handle.url,
            "-H",
            "Authorization: Bearer T0KEN",
            "--header",
            "X-Team:blue",
        )
    finally:
        handle.stop()
        app.close()
    assert result.code == 0 and result.stdout == "hi\n", result.describe()
    assert len(seen) >= 3 and all(
        (auth, team) == ("Bearer T0KEN", "blue") for _, auth, team in seen
    ), seen  # initialize, initialized, call, DELETE


def test_a_url_that_is_not_an_mcp_endpoint_is_one_line() -> None:
    """A web server's HTML error page (the usual answer at a wrong path) is quoted in one line."""
    if importlib.util.find_spec("httpx") is None:
        pytest.skip("the http extra (httpx) is not installed")
    import http.server

    class NotHere(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            page = (
                b"<!DOCTYPE html>\n<html>\n  <body>\n    <h1>Not Found</h1>\n  </body>\n</html>\n"
            )
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotHere)
    thread = threading.Thread(target=web.serve_forever, name="not-mcp-web-server")
    thread.start()
    try:
        result = mcp_sync(
            "tools", "--url", f"http://127.0.0.1:{web.server_port}/wrong", "--timeout", "10"
        )
    finally:
        web.shutdown()
        web.server_close()
        thread.join(LIMIT)
    assert_one_line_error(result, 1, "HTTP 404 from http://127.0.0.1:")
    assert result.stderr.count("\n") == 1 and "<h1>Not Found</h1>" in result.stderr, (
        result.describe()
    )


def test_trace_prints_the_json_rpc_traffic_on_stderr() -> None:
    result = mcp_sync("ping", "--trace", "--", *DEMO_SERVER)
    assert result.code == 0, result.describe()
    sent = [
        json.loads(line.split(" -> ", 1)[1])
        for line in result.stderr.splitlines()
        if " -> " in line
    ]
    received = [
        json.loads(line.split(" <- ", 1)[1])
        for line in result.stderr.splitlines()
        if " <- " in line
    ]
    assert [m.get("method") for m in sent] == ["initialize", "notifications/initialized", "ping"], (
        result.describe()
    )
    assert [m.get("id") for m in received] == [sent[0]["id"], sent[2]["id"]], result.describe()
    assert received[0]["result"]["serverInfo"]["name"] == "mcp_sync-demo", result.describe()
    assert "->" not in mcp_sync("ping", "--", *DEMO_SERVER).stderr  # off unless asked


def test_serve_trace_prints_the_servers_side_of_the_traffic() -> None:
    # -v shows the spawned server's stderr, where serve --trace writes
    result = mcp_sync("ping", "-v", "--", *MCP_SYNC, "serve", "mcp_sync.cli.demo:server", "--trace")
    assert result.code == 0, result.describe()
    lines = [
        line.split(" ", 2)
        for line in result.stderr.splitlines()
        if line.startswith("mcp_sync-server-")
    ]
    seen = [(arrow, json.loads(text).get("method")) for _, arrow, text in lines]
    assert seen == [
        ("<-", "initialize"),
        ("->", None),
        ("<-", "notifications/initialized"),
        ("<-", "ping"),
        ("->", None),
    ], result.describe()


# -- resources and prompts ---------------------------------------------------------------------


def test_resources_lists_resources_and_templates() -> None:
    result = mcp_sync("resources", "--", *CLI_SERVER)
    assert result.code == 0, result.describe()
    assert result.stdout.splitlines() == [
        "text://motd  motd: Message of the day.",
        "blob://logo  logo: The logo as a PNG.",
        "greeting://{name}  (template) greeting: A greeting for `name`.",
    ], result.describe()


def test_read_prints_text_and_summarises_blobs_unless_raw() -> None:
    text = mcp_sync("read", "greeting://Ada", "--", *CLI_SERVER)
    assert text.code == 0 and text.stdout == "hello, Ada\n", text.describe()
    blob = mcp_sync("read", "blob://logo", "--", *CLI_SERVER)
    assert blob.code == 0 and blob.stdout == "[resource blob://logo: image/png, 70 bytes]\n", (
        blob.describe()
    )
    raw = mcp_sync("read", "--raw", "blob://logo", "--", *CLI_SERVER)
    assert raw.code == 0 and json.loads(raw.stdout)["contents"][0]["blob"].startswith(
        "iVBORw0KGgo"
    ), raw.describe()
    missing = mcp_sync("read", "nothing://here", "--", *CLI_SERVER)
    assert_one_line_error(missing, 1, "mcp-sync: ")


def test_prompts_and_prompt() -> None:
    listed = mcp_sync("prompts", "--", *CLI_SERVER)
    assert (
        listed.code == 0 and listed.stdout == "review(language, focus?): Ask for a code review.\n"
    ), listed.describe()
    pairs = mcp_sync("prompt", "review", "language=Python", "--", *CLI_SERVER)
    assert pairs.code == 0, pairs.describe()
    assert pairs.stdout.splitlines()[-1] == "user: Review this Python code, looking for bugs.", (
        pairs.describe()
    )
    as_json = mcp_sync(
        "prompt", "review", '{"language": "Go", "focus": "races"}', "--", *CLI_SERVER
    )
    assert as_json.code == 0 and as_json.stdout.endswith(
        "user: Review this Go code, looking for races.\n"
    ), as_json.describe()
    assert_one_line_error(
        mcp_sync("prompt", "review", "Python", "--", *CLI_SERVER),
        2,
        "KEY=VALUE pairs or one JSON object",
    )


# -- serve -------------------------------------------------------------------------------------


def test_serve_is_a_server_command_for_another_mcp_sync() -> None:
    result = mcp_sync("ping", "--", *MCP_SYNC, "serve", "mcp_sync.cli.demo:server")
    assert result.code == 0, result.describe()
    assert result.stdout.startswith("pong from mcp_sync-demo in "), result.describe()


def test_serve_threads_sets_the_handler_pool() -> None:
    result = mcp_sync(
        "call",
        "pool_size",
        "--",
        *MCP_SYNC,
        "serve",
        "cli_server:server",
        "--threads",
        "3",
        cwd=PEERS,
    )
    assert result.code == 0 and json.loads(result.stdout) == {"result": 3}, result.describe()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("flask_module:app", "flask_module:app is a flask.app.Flask, not an mcp_sync.Server"),
        ("flask_module", "flask_module has no attribute 'server'; it defines no mcp_sync.Server"),
        ("cli_server:nope", "cli_server has no attribute 'nope'; the Server objects in it: server"),
        ("no_such_module:server", "no module named 'no_such_module'"),
        ("not a spec", "bad server 'not a spec': use package.module:attribute"),
    ],
)
def test_serve_names_what_it_found_instead_of_a_server(
    spec: str, message: str, tmp_path: Path
) -> None:
    (tmp_path / "flask_module.py").write_text("import flask\n\napp = flask.Flask(__name__)\n")
    (tmp_path / "cli_server.py").write_text((PEERS / "cli_server.py").read_text())
    result = mcp_sync("serve", spec, cwd=tmp_path)
    assert_one_line_error(result, 2, f"mcp-sync serve: error: {message}")
    assert len(result.stderr.strip().splitlines()) == 1, result.describe()


def test_serve_reports_a_module_that_fails_to_import_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("server = (\n")
    result = mcp_sync("serve", "broken:server", cwd=tmp_path)
    assert_one_line_error(result, 1, "mcp-sync: importing broken failed: SyntaxError: ")
    assert "run python -c 'import broken' to see the traceback" in result.stderr, result.describe()


def test_serve_http_options_need_http() -> None:
    assert_one_line_error(
        mcp_sync("serve", "mcp_sync.cli.demo:server", "--path", "/x"),
        2,
        "--path only apply with --http",
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--port", "70000"], "--port must be from 0 to 65535 (0 picks a free one), not 70000"),
        (["--port", "-1"], "--port must be from 0 to 65535 (0 picks a free one), not -1"),
        (["--path", "mcp"], "--path must start with /, e.g. /mcp, not 'mcp'"),
    ],
)
def test_serve_rejects_a_bad_port_or_path_in_one_line(option: list[str], message: str) -> None:
    """A port out of range was an OverflowError traceback from bind(); a path without its
    leading / served at an address like http://127.0.0.1:8000mcp."""
    result = mcp_sync("serve", "mcp_sync.cli.demo:server", "--http", *option, limit=10)
    assert_one_line_error(result, 2, f"mcp-sync serve: error: {message}")


def test_serve_http_and_url_clients() -> None:
    """``serve --http`` with ``--path`` and ``--allowed-origin`` on a free port; ``ping``,
    ``call`` and ``call --timeout`` by ``--url``, with ``--header``; Ctrl-C stops the server."""
    if importlib.util.find_spec("httpx") is None:
        pytest.skip("the http extra (httpx) is not installed")
    argv = [
        *MCP_SYNC,
        "serve",
        "mcp_sync.cli.demo:server",
        "--http",
        "--port",
        "0",
        "--path",
        "/tools/mcp",
        "--allowed-origin",
        "https://app.example",
    ]
    with Proc(argv) as server:
        line = server.wait_for("stderr", "serving mcp_sync-demo at http://", LIMIT)
        url = line.split(" at ", 1)[1].strip()
        assert url.endswith("/tools/mcp"), line
        pong = mcp_sync("ping", "--url", url)
        assert pong.code == 0 and pong.stdout.startswith("pong from mcp_sync-demo"), pong.describe()
        done = mcp_sync(
            "call",
            "slow",
            '{"seconds": 0.2}',
            "--no-progress",
            "--url",
            url,
            "-H",
            "Origin: https://app.example",
        )
        assert done.code == 0 and re.fullmatch(r"done after \d+ steps\n", done.stdout), (
            done.describe()
        )
        assert "step" not in done.stderr, done.describe()
        refused = mcp_sync("ping", "--url", url, "--header", "Origin: https://evil.example")
        assert_one_line_error(refused, 1, "403")
        late = mcp_sync("call", "slow", '{"seconds": 30}', "--timeout", "3", "--url", url)
        assert late.code == 124, late.describe()
        assert (
            "timed out after 3 s; a cancellation was sent to the server (it may ignore it)"
            in late.stderr
        ), late.describe()
        server.send_signal(signal.SIGINT)
        stopped = server.finish(LIMIT)
    assert stopped.code == 0, stopped.describe()
    assert "Traceback" not in stopped.stderr, stopped.describe()


# -- demo --------------------------------------------------------------------------------------


def test_demo(long_run: Finished) -> None:
    result = long_run
    assert result.code == 0, result.describe()
    # the first line names the negotiated protocol, as the README quotes it
    quoted = re.search(r"`(1\. started .*?)`", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert quoted and "speaking MCP 2026-07-28" in quoted.group(1), "the README quotes no demo line"
    first = re.escape(quoted.group(1)).replace("150", r"\d+")
    assert re.search(f"^{first}$", result.stdout, re.M), result.describe()
    assert "server says: stopped by cancellation" in result.stdout, result.describe()
    assert "RequestTimeout: tools/call: timed out after 0.5 s" in result.stdout, result.describe()
    assert "Cancelled('cancelled by another thread')" in result.stdout, result.describe()
    assert "result: done after 10 steps" in result.stdout, result.describe()
    assert "the server process exited with code 0" in result.stdout, result.describe()


# -- check-cancel ------------------------------------------------------------------------------


def _rows(stdout: str) -> dict[str, tuple[str, str]]:
    """The report table as ``{check: (PASS|WARN|FAIL, measured)}``."""
    rows = {}
    for line in stdout.splitlines():
        match = re.match(r"^(\S.*?)\s{2,}(PASS|WARN|FAIL)\s{2,}(.*)$", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def test_check_cancel_passes_our_demo_server(long_run: Finished) -> None:
    result = long_run
    assert result.code == 0, result.describe()
    rows = _rows(result.stdout)
    assert len(rows) == 11 and all(status == "PASS" for status, _ in rows.values()), (
        result.describe()
    )
    assert "in-flight cancel gets no response" in rows, result.describe()
    assert any(name.startswith("race of 10 calls") for name in rows), result.describe()
    assert "11 passed, 0 warned, 0 failed" in result.stdout, result.describe()
    assert "commonly" not in result.stdout, result.describe()  # no hint when nothing failed


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
    assert all(
        status == "FAIL" and "the server answered" in detail
        for status, detail in malformed.values()
    ), result.describe()
    # and it answers cancelled calls
    status, detail = rows["in-flight cancel gets no response"]
    assert status == "FAIL" and "after the cancel" in detail, result.describe()
    race = next((name, row) for name, row in rows.items() if name.startswith("race of 10 calls"))
    if not race[0].endswith(", 0 cancelled"):  # the race cancels each call with probability 1/2
        assert race[1][0] == "FAIL" and not race[1][1].startswith("cancelled answered: 0;"), (
            result.describe()
        )
    assert re.search(r"\d+ passed, 0 warned, \d+ failed", result.stdout), result.describe()
    # and says what commonly causes an answered cancellation, once
    assert result.stdout.count("A cancelled call that is still answered is commonly one of") == 1, (
        result.describe()
    )
    assert "a WSGI server with too few threads" in result.stdout.replace("\n", " "), (
        result.describe()
    )


INIT_ROW = "cancelled initialize still completes"


def test_check_cancel_warns_when_a_cancelled_initialize_is_dropped_and_goes_on() -> None:
    """A server that acts on the cancellation of ``initialize``: a WARN row, then every other
    check on a fresh connection (here they catch the bad server's other faults)."""
    result = mcp_sync("check-cancel", "--", *BAD_SERVER, "--drop-cancelled-initialize")
    assert result.code == 1, result.describe()  # the malformed-cancel failures, not the WARN
    rows = _rows(result.stdout)
    status, detail = rows[INIT_ROW]
    assert status == "WARN" and "not answered (a ping sent after it was)" in detail, (
        result.describe()
    )
    assert "the other checks run on a fresh connection" in detail, result.describe()
    assert rows["cancel of an unknown id is ignored"][0] == "PASS", result.describe()
    malformed = [row for name, row in rows.items() if name.startswith("malformed cancel")]
    assert len(malformed) == 6 and all(status == "FAIL" for status, _ in malformed), (
        result.describe()
    )
    assert "2 passed, 1 warned, 6 failed" in result.stdout, result.describe()


def test_check_cancel_checks_the_typescript_sdks_server_everything() -> None:
    """The TypeScript SDK drops a cancelled ``initialize``: a WARN that fails nothing, and the
    in-flight and race checks run and pass on a fresh connection."""
    command = server_everything()
    result = mcp_sync(
        "check-cancel",
        "--slow-tool",
        "trigger-long-running-operation",
        "--slow-args",
        '{"duration": 1, "steps": 10}',
        "--race-calls",
        "10",
        "--",
        *command,
        limit=90,
    )
    assert result.code == 0, result.describe()
    rows = _rows(result.stdout)
    assert rows[INIT_ROW][0] == "WARN", result.describe()
    assert len(rows) == 11 and all(
        status == "PASS" for name, (status, _) in rows.items() if name != INIT_ROW
    ), result.describe()
    assert "10 passed, 1 warned, 0 failed" in result.stdout, result.describe()


def test_check_cancel_checks_the_typescript_sdks_server_filesystem(tmp_path: Path) -> None:
    result = mcp_sync("check-cancel", "--", *server_filesystem(tmp_path), limit=60)
    assert result.code == 0, result.describe()
    rows = _rows(result.stdout)
    assert rows[INIT_ROW][0] == "WARN" and len(rows) == 9, result.describe()
    assert "8 passed, 1 warned, 0 failed" in result.stdout, result.describe()


@pytest.mark.parametrize(("threads", "in_flight"), [(2, "FAIL"), (8, "PASS")])
def test_check_cancel_explains_a_wsgi_server_with_too_few_threads(
    threads: int, in_flight: str
) -> None:
    """waitress with 2 threads: the client's GET stream holds one, the running call the
    other, so the POST carrying the cancellation waits until the call is answered -- which
    check-cancel reports with its hint. With 8 threads the same server passes."""
    waitress = Path(sys.executable).with_name("waitress-serve")
    if not waitress.exists():
        pytest.skip("waitress (a test extra) is not installed")
    argv = [
        str(waitress),
        "--listen=127.0.0.1:0",
        f"--threads={threads}",
        "--call",
        "mcp_sync.cli.demo:server.wsgi_app",
    ]
    with Proc(argv) as server:
        line = server.wait_for("stderr", "Serving on http://", LIMIT)
        url = line.split("Serving on ", 1)[1].strip() + "/mcp"
        result = mcp_sync(
            "check-cancel",
            "--url",
            url,
            "--slow-tool",
            "slow",
            "--slow-args",
            '{"seconds": 1}',
            "--race-calls",
            "0",
        )
    rows = _rows(result.stdout)
    status, detail = rows["in-flight cancel gets no response"]
    assert status == in_flight, result.describe()
    hinted = "a WSGI server with too few threads" in result.stdout.replace("\n", " ")
    if in_flight == "FAIL":
        assert result.code == 1 and "after the cancel" in detail and hinted, result.describe()
    else:
        assert result.code == 0 and not hinted, result.describe()


def test_check_cancel_of_a_server_that_is_not_there_is_one_line_without_a_table() -> None:
    missing = mcp_sync("check-cancel", "--", "/nonexistent/mcp-server")
    assert_one_line_error(
        missing,
        1,
        "mcp-sync: cannot start or reach the server: [Errno 2] No such file or directory",
    )
    assert "result" not in missing.stdout, missing.describe()
    silent = mcp_sync("check-cancel", "--", PYTHON, "-c", "pass")  # exits at once, says nothing
    assert_one_line_error(
        silent, 1, "mcp-sync: the server closed the connection before sending anything"
    )
    if importlib.util.find_spec("httpx") is not None:
        refused = mcp_sync("check-cancel", "--url", "http://127.0.0.1:9/mcp")
        assert_one_line_error(
            refused, 1, "before sending anything: HTTP POST to http://127.0.0.1:9/mcp failed"
        )


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
    assert len(rows) == 11 and all(status == "PASS" for status, _ in rows.values()), (
        result.describe()
    )


def test_bad_server_is_plain_python() -> None:
    """The misbehaving server must not lean on mcp_sync (it would inherit its good manners)."""
    source = (PEERS / "bad_cancel_server.py").read_text()
    assert "import mcp" not in source and "from mcp" not in source
