"""The official conformance suite's ``auth/*`` client scenarios (``conformance client``,
pinned in ``tests/node/package-lock.json``) against ``tests/conformance/client.py``, which
uses mcp_sync's public API (:mod:`mcp_sync.auth`).

Every scenario runs at the 2025-11-25 wire (the initialize handshake): ``Client.http``
speaks 2025-11-25 only for now, so the scenarios the suite tags 2026-07-28 only run there
with ``--force`` (their authorization checks do not depend on the wire). Every check must
pass (no FAILURE, no WARNING). :data:`NOT_PASSED` names the ``auth/*`` scenarios we do not
run, and why; docs/conformance.rst lists the same (checked below), and a scenario the suite
adds that is in neither list fails :func:`test_every_auth_scenario_is_run_or_excused`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.node import conformance_suite
from support.paths import PYTHON, ROOT, TESTS
from support.processes import run

pytestmark = pytest.mark.interop

CLIENT = f"{PYTHON} {TESTS / 'conformance' / 'client.py'}"
LIMIT = 90.0
SCENARIO_TIMEOUT_MS = 30_000
WIRE = "2025-11-25"

PASSED = (
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
    "auth/2025-03-26-oauth-metadata-backcompat",
)
"""The ``auth/*`` client scenarios mcp_sync passes (every check)."""

NOT_PASSED = {
    "auth/2025-03-26-oauth-endpoint-fallback": "no metadata at all (the 2025-03-26 guess of "
    "/authorize and /token): PKCE support cannot be verified, which the spec requires",
    "auth/enterprise-managed-authorization": "the enterprise-managed extension (SEP-990)",
    "auth/dpop": "DPoP (SEP-1932)",
    "auth/dpop-nonce": "DPoP (SEP-1932)",
    "auth/wif-jwt-bearer": "the JWT-bearer grant for workload identity (SEP-1933)",
}
"""``auth/*`` client scenarios not run, with the reason (docs/conformance.rst has them)."""

NOT_PASSING = {"FAILURE", "WARNING"}


@pytest.fixture
def suite() -> list[str]:
    return conformance_suite()


def checks_of(out: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in sorted(out.glob("**/checks.json")):
        found.extend(json.loads(path.read_text(encoding="utf-8")))
    return found


@pytest.mark.parametrize("scenario", PASSED)
def test_the_client_passes_the_auth_scenario(
    scenario: str, suite: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "results"
    argv = [*suite, "client", "--command", CLIENT, "--scenario", scenario]
    argv += ["--spec-version", WIRE, "--force", "--timeout", str(SCENARIO_TIMEOUT_MS)]
    finished = run([*argv, "-o", str(out)], LIMIT)
    checks = checks_of(out)
    failing = [
        f"{c['id']} {c['status']}: {c.get('errorMessage') or c.get('description', '')}"
        for c in checks
        if c["status"] in NOT_PASSING
    ]
    assert checks, finished.describe()
    assert not failing, "\n".join([*failing, finished.describe()])
    assert finished.code == 0, finished.describe()


def test_every_auth_scenario_is_run_or_excused(suite: list[str]) -> None:
    listed = run([*suite, "list"], LIMIT)
    assert listed.code == 0, listed.describe()
    section = listed.stdout[listed.stdout.index("Client scenarios") :]
    section = section[: section.index("\n\n")] if "\n\n" in section else section
    auth = set(re.findall(r"^\s+- (auth/\S+)", section, re.MULTILINE))
    assert auth == set(PASSED) | set(NOT_PASSED)


def test_the_docs_list_every_auth_scenario_not_passed() -> None:
    page = (ROOT / "docs" / "conformance.rst").read_text(encoding="utf-8")
    start, end = ".. client-not-passed-start", ".. client-not-passed-end"
    table = page[page.index(start) : page.index(end)]
    assert set(re.findall(r"``(auth/[^`]+)``", table)) == set(NOT_PASSED)
