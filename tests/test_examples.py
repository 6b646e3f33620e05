"""Every file in ``examples/`` runs as written, as a subprocess, and says what it should.

New examples are found with a glob: one that is not described in :data:`EXAMPLES` fails
:func:`test_example_runs`, so no example can be skipped silently.
"""

from __future__ import annotations

import ast
import json
import signal
from dataclasses import dataclass, field
from typing import Any

import pytest
from support.paths import PYTHON, ROOT
from support.processes import Proc, run

EXAMPLES_DIR = ROOT / "examples"
FOUND = sorted(path.name for path in EXAMPLES_DIR.glob("*.py"))
LIMIT = 30.0  # seconds any one example may take


@dataclass
class Example:
    """How to run one example quickly, and what it must print."""

    argv: list[str] = field(default_factory=list)
    expect: list[str] = field(default_factory=list)
    code: int = 0
    # for a stdio server: the JSON-RPC requests to send after the handshake (method, params)
    requests: list[tuple[str, dict[str, Any]]] | None = None


EXAMPLES: dict[str, Example] = {
    "slow_server.py": Example(
        requests=[
            ("tools/list", {}),
            (
                "tools/call",
                {"name": "slow", "arguments": {"seconds": 0.2}, "_meta": {"progressToken": "p1"}},
            ),
            (
                "tools/call",
                {"name": "fetch_record", "arguments": {"key": "k1", "backend_delay": 1.0}},
            ),
            ("tools/call", {"name": "last_run", "arguments": {"wait_seconds": 5}}),
        ],
        expect=[
            '"name": "slow"',
            '"name": "fetch_record"',
            '"progressToken": "p1"',
            "done after 2 steps",
            "timed out after 0.5 s",
            '"state": "completed"',
        ],
    ),
    "call_with_timeout.py": Example(
        argv=["--seconds", "3", "--timeout", "0.5"],
        expect=[
            "timed out: tools/call: timed out after 0.5 s; a cancellation was sent to the server",
            "server confirms: slow stopped by cancellation",
            "(reason: timed out after 0.5 s)",
            "tool error: Tool 'fetch_record' timed out after 0.5 s",
        ],
    ),
    "thread_pool_callers.py": Example(
        argv=["--calls", "6", "--workers", "3", "--seconds", "0.5"],
        expect=[
            "cancelled: caller 1 is no longer needed",
            "cancelled: the canceller thread changed its mind",
            "summary: ",
            "by CancelToken",
            "by PendingCall.cancel",
            "client and server agree",
        ],
    ),
    "legacy_service.py": Example(
        argv=["--requests", "4"],
        expect=[
            'GET /stock?item=apple -> 200 {"item": "apple", "count": 12}',
            "GET /stock?item=kiwi -> 404",
            "reindex caller got ConnectionClosed",
            "server side: reindex stopped by cancellation",
            "stopped cleanly; threads left: none",
        ],
    ),
    "legacy_http_server.py": Example(
        argv=["--self-test"],
        expect=[
            "tools: stock, reindex",
            "stock: {'item': 'apple', 'count': 12, 'ticks': ",
            "reindex: tools/call: timed out after 0.5 s",
            "server side: reindex stopped by cancellation after ",
            "stopped; server threads left: none",
        ],
    ),
    "flask_app.py": Example(
        argv=["--demo"],
        expect=[
            "POST /orders   -> {'id': 1, 'item': 'pear', 'quantity': 1}",
            "MCP tools      -> ['list_orders', 'place_order', 'slow_report']",
            "MCP orders     -> {'result': [{'id': 1, 'item': 'pear', 'quantity': 1}]}",
            "MCP report     -> report: 1 orders",
        ],
    ),
    # run alone it has no server to talk to (see test_http_client_against_the_flask_app)
    "http_client.py": Example(
        argv=["http://127.0.0.1:9/mcp"],
        code=1,
        expect=["connection failed: "],
    ),
    "task_report.py": Example(
        argv=["--minutes", "10"],
        expect=[
            "connected at 2026-07-28",
            ": working",
            "still running after 0.5 s: stopped waiting, the task goes on",
            "cancel acknowledged: the task is cancelled",
            "server confirms: report {'month': '2026-11', 'state': 'cancelled'",
        ],
    ),
    "resources_and_prompts.py": Example(
        argv=["--city", "Lyon", "--style", "pirate"],
        expect=[
            "resources: config://app",
            "templates: weather://{city}/today",
            '"units": "metric"',
            "read weather://Lyon/today: Lyon: 18 C",
            "user: Write a pirate weather report for Lyon.",
            "complete city 'L' -> ['Lisbon', 'London', 'Lyon']",
            "complete style 'p' -> ['pirate']",
        ],
    ),
}


def test_every_example_is_described() -> None:
    assert FOUND, f"no examples found in {EXAMPLES_DIR}"
    assert sorted(EXAMPLES) == FOUND, "EXAMPLES must describe exactly the files in examples/"


@pytest.mark.parametrize("name", FOUND)
def test_example_has_run_instructions(name: str) -> None:
    source = (EXAMPLES_DIR / name).read_text()
    doc = ast.get_docstring(ast.parse(source))
    assert doc, f"{name} has no module docstring"
    assert f"python examples/{name}" in doc, f"{name}'s docstring does not say how to run it"
    assert "time.sleep" not in source, (
        f"{name} synchronises with time.sleep; use an Event or ctx.wait()"
    )


def _drive_stdio_server(path: str, requests: list[tuple[str, dict[str, Any]]]) -> tuple[int, str]:
    """Speak JSON-RPC to a stdio server example: handshake, each request in turn (waiting for
    its response), then close stdin; returns the exit code and everything it printed."""
    with Proc([PYTHON, path], stdin=True) as proc:
        seen = 0

        def roundtrip(request_id: int, method: str, params: dict[str, Any]) -> None:
            nonlocal seen
            proc.write_line(
                json.dumps(
                    {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
                ).encode()
            )
            while True:  # read up to this id's response; notifications may come first
                line = proc.line_at("stdout", seen, LIMIT)
                seen += 1
                if json.loads(line).get("id") == request_id:
                    return

        roundtrip(
            0,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        )
        proc.write_line(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        for request_id, (method, params) in enumerate(requests, start=1):
            roundtrip(request_id, method, params)
        proc.close_stdin()
        finished = proc.finish(LIMIT)
    pretty = "\n".join(
        json.dumps(json.loads(line)) for line in finished.stdout.splitlines() if line.strip()
    )
    return finished.code, pretty + "\n" + finished.stderr


@pytest.mark.parametrize("name", FOUND)
def test_example_runs(name: str) -> None:
    example = EXAMPLES.get(name)
    assert example is not None, f"examples/{name} is new: describe how to run it in EXAMPLES"
    path = str(EXAMPLES_DIR / name)
    if example.requests is not None:
        code, output = _drive_stdio_server(path, example.requests)
        describe = output
    else:
        finished = run([PYTHON, path, *example.argv], LIMIT)
        code, output, describe = finished.code, finished.stdout, finished.describe()
    assert code == example.code, describe
    missing = [fragment for fragment in example.expect if fragment not in output]
    assert not missing, f"missing {missing}\n{describe}"


def test_call_with_timeout_survives_ctrl_c() -> None:
    """SIGINT once the call is running: the call is cancelled on the wire, the server confirms
    it stopped, and the script exits with 130."""
    argv = [
        PYTHON,
        str(EXAMPLES_DIR / "call_with_timeout.py"),
        "--seconds",
        "60",
        "--timeout",
        "120",
        "--no-fetch",
    ]
    with Proc(argv) as proc:
        proc.wait_for("stdout", "call started", LIMIT)
        proc.send_signal(signal.SIGINT)
        finished = proc.finish(LIMIT)
    assert finished.code == 130, finished.describe()
    assert "interrupted: a cancellation was sent to the server" in finished.stdout, (
        finished.describe()
    )
    assert "server confirms: slow stopped by cancellation" in finished.stdout, finished.describe()
    assert "(reason: interrupted)" in finished.stdout, finished.describe()
    assert "Traceback" not in finished.stderr, finished.describe()
    assert finished.seconds < 20, f"the 60 s call was not cut short\n{finished.describe()}"


def test_http_client_against_the_flask_app() -> None:
    """examples/http_client.py against examples/flask_app.py: a call that completes, one cut
    short by its timeout (cancelled on the server), then SIGTERM stops the server cleanly."""
    import re

    with Proc([PYTHON, str(EXAMPLES_DIR / "flask_app.py"), "--port", "0"]) as server:
        line = server.wait_for("stderr", "serving the shop on", LIMIT)
        match = re.search(r"\(MCP at (\S+)\)", line)
        assert match, line
        url = match.group(1)
        client = [PYTHON, str(EXAMPLES_DIR / "http_client.py"), url]
        placed = run([*client, "--tool", "place_order", "--args", '{"item": "plum"}'], LIMIT)
        assert placed.code == 0, placed.describe()
        assert 'structured: {"id": 1, "item": "plum", "quantity": 1}' in placed.stdout, (
            placed.describe()
        )
        timed_out = run(
            [*client, "--tool", "slow_report", "--args", '{"seconds": 30}', "--timeout", "0.5"],
            LIMIT,
        )
        assert timed_out.code == 0, timed_out.describe()
        expected = (
            "timed out: tools/call: timed out after 0.5 s; the server was told to cancel the call"
        )
        assert expected in timed_out.stdout, timed_out.describe()
        assert timed_out.seconds < 20, timed_out.describe()
        server.send_signal(signal.SIGTERM)
        finished = server.finish(LIMIT)
    assert finished.code == 0, finished.describe()
    assert "Traceback" not in finished.stderr, finished.describe()
