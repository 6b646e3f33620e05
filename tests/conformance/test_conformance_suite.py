"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in
``tests/node/package-lock.json``) against mcp_sync's Streamable HTTP server.

The fixture server (``tests/peers/conformance_server.py``, public API only) runs as its own
process on a free port; ``conformance server --url URL --requirements REVISION -o DIR`` runs
every server scenario the revision requires (and the ones it runs without scoring) and
writes one ``checks.json`` per scenario. Every check of every scenario must pass, except the
ones :data:`SKIPPED` names with the reason; a failing check that is not there fails the test
with the suite's own message, and an entry that no longer fails fails it too (the table stays
true). ``docs/conformance.rst`` lists the same entries (checked below).

Without ``tests/node/node_modules`` the suite tests skip, unless ``CI`` is set (see
:mod:`support.node`).
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.node import conformance_suite
from support.paths import PEERS, PYTHON, ROOT
from support.processes import Proc, run

pytestmark = pytest.mark.interop

FIXTURE_SERVER = [PYTHON, str(PEERS / "conformance_server.py")]
LIMIT = 90.0
"""Seconds the whole suite may take for one revision (about 10 s on a 2-core machine)."""
SCENARIO_TIMEOUT_MS = 20_000

REVISIONS = [
    pytest.param("2025-11-25", id="2025-11-25"),
    pytest.param("2026-07-28", id="2026-07-28"),
]
"""The revisions the suite runs at, each at its own wire (initialize handshake up to
2025-11-25, stateless per-request ``_meta`` at 2026-07-28)."""


@dataclass(frozen=True)
class Skip:
    """A scenario (``check=None``) or one check of it that is allowed not to pass."""

    revision: str
    scenario: str
    check: str | None
    reason: str


TASKS = (
    "the tasks extension needs task tools this fixture does not have: the tasks scenarios run "
    "against the task fixture server in tests/tasks/test_task_conformance.py"
)
SKIPPED: tuple[Skip, ...] = (
    Skip(
        "2025-11-25",
        "server-sse-polling",
        "server-sse-retry-field",
        "the scenario wants its test_reconnection tool to close the POST's SSE stream "
        "mid-call so the client resumes by polling (SEP-1699); mcp_sync never closes a POST "
        "stream before its answer and a handler cannot ask it to, so the retry: field the "
        "spec asks for before such a close is never sent (a SHOULD: the suite warns)",
    ),
    Skip(
        "2026-07-28",
        "server-stateless",
        "sep-2575-http-server-method-not-found-404-initialize",
        "mcp_sync serves both eras on one endpoint, so initialize is not a removed method "
        "there: an initialize carrying a 2026-07-28 envelope is answered 400 with -32022 "
        "naming the supported versions (the spec leaves the code to the server and asks "
        "that the error name them), which is what tells a client to speak 2026-07-28",
    ),
    Skip(
        "2026-07-28",
        "input-required-result-ignore-extra-params",
        "sep-2322-ignore-unexpected-params",
        "the scenario sends inputResponses on a first request, with no requestState; "
        "mcp_sync takes an answer only for a key its sealed requestState says was asked, so "
        "unsolicited answers are ignored and the question is asked again (input_required). "
        "Extra keys beside a valid state are ignored as the scenario wants (a SHOULD: the "
        "suite warns)",
    ),
    *(
        Skip("2026-07-28", scenario, None, TASKS)
        for scenario in (
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
        )
    ),
)
"""Every scenario or check of the suite that mcp_sync deliberately does not pass, and why
(the same list is in docs/conformance.rst)."""

NOT_PASSING = {"FAILURE", "WARNING"}
"""Check statuses that count as not passing (SUCCESS, INFO and SKIPPED do not)."""
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")


@pytest.fixture
def suite() -> list[str]:
    """The suite's command (skips, or fails under ``CI``, before anything starts when
    ``tests/node/node_modules`` is absent)."""
    return conformance_suite()


@pytest.fixture
def fixture_url(suite: list[str]) -> Iterator[str]:
    """The fixture server's URL while it runs (answering POSTs as SSE streams); afterwards
    it must stop cleanly on Ctrl-C without having printed a traceback.

    Not run with ``--json-response``: there a request's progress and log notifications go
    on the GET stream and may reach the client after the POST's JSON answer, so
    ``tools-call-with-progress`` sometimes sees 2 of its 3 notifications (a race between two
    connections, see docs/conformance.rst)."""
    with Proc(FIXTURE_SERVER) as server:
        announced = server.wait_for("stderr", "serving conformance-fixture at http://", LIMIT)
        yield announced.split(" at ", 1)[1].strip()
        server.send_signal(signal.SIGINT)
        finished = server.finish(LIMIT)
    assert finished.code == 0, finished.describe()
    assert "Traceback" not in finished.stderr, finished.describe()


def required_server_scenarios(suite: list[str], revision: str) -> set[str]:
    """The server scenarios ``--requirements revision`` runs (scored or not), from ``list``."""
    listed = run([*suite, "list", "--requirements", revision], LIMIT)
    assert listed.code == 0, listed.describe()
    scenarios: set[str] = set()
    section = ""
    for line in listed.stdout.splitlines():
        if not line.startswith(" "):
            section = line
        elif section.startswith("Server scenarios") and line.strip().startswith("- "):
            scenarios.add(line.strip()[2:])
        elif line.strip().startswith("- ") and line.rstrip().endswith(" [server]"):
            scenarios.add(line.strip()[2:].rsplit(" [", 1)[0])
    assert scenarios, listed.describe()
    return scenarios


def read_results(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Each scenario's checks, from the ``server-<scenario>-<timestamp>/checks.json`` files."""
    results: dict[str, list[dict[str, Any]]] = {}
    for checks in sorted(out.glob("*/checks.json")):
        match = RESULT_DIR.match(checks.parent.name)
        assert match, f"unexpected result folder {checks.parent}"
        results.setdefault(match["scenario"], []).extend(
            json.loads(checks.read_text(encoding="utf-8"))
        )
    return results


def describe(check: dict[str, Any]) -> str:
    message = check.get("errorMessage") or check.get("description", "")
    return f"{check['id']} {check['status']}: {message}"


def crashes(stdout: str) -> dict[str, str]:
    """The suite's message for each scenario that stopped before writing its checks."""
    found = re.finditer(r"^Failed to run scenario (\S+): (.*)$", stdout, re.MULTILINE)
    return {match[1]: match[2] for match in found}


def verdict(
    revision: str, expected: set[str], results: dict[str, list[dict[str, Any]]], stdout: str
) -> list[str]:
    """What is wrong with one run: scenarios without results, failures :data:`SKIPPED` does
    not excuse, and entries of :data:`SKIPPED` that pass now (stale)."""
    skips = [skip for skip in SKIPPED if skip.revision == revision]
    whole = {skip.scenario for skip in skips if skip.check is None}
    single = {(skip.scenario, skip.check) for skip in skips if skip.check is not None}
    crashed = crashes(stdout)
    problems = [
        f"{scenario}: no results ({crashed.get(scenario, 'the suite did not say why')})"
        for scenario in sorted(expected - set(results) - whole)
    ]
    for scenario, checks in sorted(results.items()):
        for check in checks:
            excused = scenario in whole or (scenario, check["id"]) in single
            if check["status"] in NOT_PASSING and not excused:
                problems.append(f"{scenario}: {describe(check)}")
    for skip in skips:
        checks = [c for c in results.get(skip.scenario, []) if skip.check in (None, c["id"])]
        if (
            checks
            and all(c["status"] not in NOT_PASSING for c in checks)
            and any(c["status"] == "SUCCESS" for c in checks)
        ):
            target = skip.scenario if skip.check is None else f"{skip.scenario}:{skip.check}"
            problems.append(f"{target} passes now: remove it from SKIPPED and docs/conformance.rst")
        elif skip.scenario not in expected:
            problems.append(
                f"{skip.scenario} is in SKIPPED but the suite does not run it at {revision}"
            )
    return problems


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_conformance_suite_passes_against_the_fixture_server(
    revision: str, suite: list[str], fixture_url: str, tmp_path: Path
) -> None:
    expected = required_server_scenarios(suite, revision)
    out = tmp_path / "results"
    argv = [*suite, "server", "--url", fixture_url, "--requirements", revision]
    finished = run([*argv, "--timeout", str(SCENARIO_TIMEOUT_MS), "-o", str(out)], LIMIT)
    problems = verdict(revision, expected, read_results(out), finished.stdout)
    summary = finished.stdout[finished.stdout.find("=== SUMMARY ===") :]
    assert not problems, "\n".join(
        [*problems, f"(results in {out}; suite exit {finished.code})", summary]
    )


def test_the_docs_list_every_skipped_scenario() -> None:
    """docs/conformance.rst's table names each entry of :data:`SKIPPED` with its revision,
    and nothing else."""
    page = (ROOT / "docs" / "conformance.rst").read_text(encoding="utf-8")
    table = page[page.index(".. skipped-scenarios-start") : page.index(".. skipped-scenarios-end")]
    documented = set(
        re.findall(r"^ *\* - ``(\S+)``\n +- (\d{4}-\d{2}-\d{2})$", table, re.MULTILINE)
    )
    entries = {
        (skip.scenario if skip.check is None else f"{skip.scenario}:{skip.check}", skip.revision)
        for skip in SKIPPED
    }
    assert documented == entries
