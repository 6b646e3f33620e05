"""The official conformance suite's tasks scenarios (``@modelcontextprotocol/conformance``,
pinned in tests/node/package-lock.json; revision 2026-07-28, extension
``io.modelcontextprotocol/tasks``) against tests/peers/task_conformance_server.py.

Each scenario must pass every check, except the ones :data:`NOT_PASSING` names with the
reason (and an entry that passes now fails the test, so the table stays true)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.node import conformance_suite
from support.paths import PEERS, PYTHON
from support.processes import Proc, run

pytestmark = pytest.mark.interop

LIMIT = 90.0
SCENARIOS = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
]
NOT_PASSING = {
    "tasks-mrtr-composition": "a task is created before its handler runs, so a handler "
    "cannot gather input with input_required rounds first and become a task on the last one "
    "(SEP-2663's MRTR-before-task composition, a SHOULD)",
}


@pytest.fixture(scope="module")
def fixture_url() -> Iterator[str]:
    with Proc([PYTHON, str(PEERS / "task_conformance_server.py")]) as server:
        announced = server.wait_for("stderr", "serving task-fixture at http://", LIMIT)
        yield announced.split(" at ", 1)[1].strip()
        server.send_signal(signal.SIGINT)
        finished = server.finish(LIMIT)
    assert finished.code == 0, finished.describe()
    assert "Traceback" not in finished.stderr, finished.describe()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_tasks_scenario(scenario: str, fixture_url: str, tmp_path: Path) -> None:
    suite = conformance_suite()
    argv = [*suite, "server", "--url", fixture_url, "--scenario", scenario]
    argv += ["--spec-version", "2026-07-28", "--force", "-o", str(tmp_path)]
    finished = run(argv, LIMIT)
    checks = [
        check
        for path in sorted(tmp_path.glob("*/checks.json"))
        for check in json.loads(path.read_text(encoding="utf-8"))
    ]
    failing = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    if scenario in NOT_PASSING:
        assert failing, f"{scenario} passes now: remove it from NOT_PASSING\n{finished.stdout}"
        return
    assert checks or finished.code == 0, finished.describe()
    assert not failing, "\n".join(
        f"{c['id']}: {c.get('errorMessage') or c.get('description')}" for c in failing
    )
