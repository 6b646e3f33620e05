"""The official conformance suite's ``auth/*`` client scenarios (``conformance client``,
pinned in ``tests/node/package-lock.json``) against ``tests/conformance/client.py``, which
uses mcp_sync's public API (:mod:`mcp_sync.auth`) and negotiates as a user's client does.

Each scenario runs at every wire the suite tags it with (``--spec-version``, never
``--force``): 2026-07-28 (``server/discover`` and stateless requests) and 2025-11-25 (the
``initialize`` handshake, which the client falls back to after the suite's 2025-11-25
server refuses ``server/discover``). A scenario on neither (an extension, a 2025-03-26
one) runs at the suite's default, 2025-11-25. The client writes the version it agreed on to
its stderr, which must be the wire of the run. Every check must pass (no FAILURE, no
WARNING). :data:`NOT_PASSED` names the ``auth/*`` scenarios we do not run, and why;
docs/conformance.rst lists the same (checked below), and a scenario the suite adds, or a
wire it adds to a scenario, that is not here fails
:func:`test_every_auth_scenario_is_run_or_excused`.
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
HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
BOTH = (HANDSHAKE, MODERN)
OFF_TIMELINE = ()
"""No ``--spec-version``: the suite's server then speaks 2025-11-25."""
DEFAULT_WIRE = HANDSHAKE
PROTOCOL_LINE = "protocol: "

PASSED: dict[str, tuple[str, ...]] = {
    "auth/metadata-default": BOTH,
    "auth/metadata-var1": BOTH,
    "auth/metadata-var2": BOTH,
    "auth/metadata-var3": BOTH,
    "auth/basic-cimd": BOTH,
    "auth/scope-from-www-authenticate": BOTH,
    "auth/scope-from-scopes-supported": BOTH,
    "auth/scope-omitted-when-undefined": BOTH,
    "auth/scope-step-up": BOTH,
    "auth/scope-retry-limit": BOTH,
    "auth/token-endpoint-auth-basic": BOTH,
    "auth/token-endpoint-auth-post": BOTH,
    "auth/token-endpoint-auth-none": BOTH,
    "auth/pre-registration": BOTH,
    "auth/resource-mismatch": (MODERN,),
    "auth/offline-access-scope": (MODERN,),
    "auth/offline-access-not-supported": (MODERN,),
    "auth/authorization-server-migration": (MODERN,),
    "auth/iss-supported": (MODERN,),
    "auth/iss-not-advertised": (MODERN,),
    "auth/iss-supported-missing": (MODERN,),
    "auth/iss-wrong-issuer": (MODERN,),
    "auth/iss-unexpected": (MODERN,),
    "auth/iss-normalized": (MODERN,),
    "auth/metadata-issuer-mismatch": (MODERN,),
    "auth/client-credentials-basic": OFF_TIMELINE,
    "auth/client-credentials-jwt": OFF_TIMELINE,
    "auth/2025-03-26-oauth-metadata-backcompat": OFF_TIMELINE,
}
"""The ``auth/*`` client scenarios mcp_sync passes (every check), with the wires each runs
at: those of 2025-11-25 and 2026-07-28 the suite tags it with."""

REFUSED = {
    "auth/scope-retry-limit",
    "auth/resource-mismatch",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
}
"""The scenarios whose checks ask the client to refuse the authorization (an issuer, a
resource or a scope it must not accept): it stops before agreeing on a protocol."""

RUNS = [
    pytest.param(scenario, wire, id=f"{scenario}@{wire or 'default'}")
    for scenario, wires in PASSED.items()
    for wire in wires or (None,)
]

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


def methods_received(checks: list[dict[str, Any]]) -> list[str]:
    """The methods of the requests the scenario's MCP server received, in order."""
    found = (re.search(r"\(method: ([^)]+)\)", c.get("description", "")) for c in checks)
    return [
        m.group(1)
        for c, m in zip(checks, found, strict=True)
        if m and c["id"] == "incoming-request"
    ]


def agreed_versions(out: Path) -> list[str]:
    """The versions the client wrote to its stderr (one per connection)."""
    return [
        line.removeprefix(PROTOCOL_LINE).strip()
        for path in sorted(out.glob("**/stderr.txt"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith(PROTOCOL_LINE)
    ]


@pytest.mark.parametrize(("scenario", "wire"), RUNS)
def test_the_client_passes_the_auth_scenario(
    scenario: str, wire: str | None, suite: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "results"
    argv = [*suite, "client", "--command", CLIENT, "--scenario", scenario]
    argv += ["--spec-version", wire] if wire else []
    argv += ["--timeout", str(SCENARIO_TIMEOUT_MS)]
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
    methods = methods_received(checks)
    assert methods[:1] == ["server/discover"], finished.describe()
    agreed = set() if scenario in REFUSED else {wire or DEFAULT_WIRE}
    assert set(agreed_versions(out)) == agreed, finished.describe()
    handshake = agreed == {HANDSHAKE}
    assert ("initialize" in methods) == handshake, finished.describe()


def test_every_auth_scenario_is_run_or_excused(suite: list[str]) -> None:
    listed = run([*suite, "list"], LIMIT)
    assert listed.code == 0, listed.describe()
    section = listed.stdout[listed.stdout.index("Client scenarios") :]
    section = section[: section.index("\n\n")] if "\n\n" in section else section
    tags = dict(re.findall(r"^\s+- (auth/\S+) \[([^\]]*)\]", section, re.MULTILINE))
    assert set(tags) == set(PASSED) | set(NOT_PASSED)
    wires = {s: tuple(w for w in BOTH if w in tags[s].split(",")) for s in PASSED}
    assert wires == PASSED


def test_the_docs_list_every_auth_scenario_not_passed() -> None:
    page = (ROOT / "docs" / "conformance.rst").read_text(encoding="utf-8")
    start, end = ".. client-not-passed-start", ".. client-not-passed-end"
    table = page[page.index(start) : page.index(end)]
    assert set(re.findall(r"``(auth/[^`]+)``", table)) == set(NOT_PASSED)
