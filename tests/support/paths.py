"""Where things are: the repository, the test interpreter, the peer scripts."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root."""

TESTS = ROOT / "tests"
"""The test suite's folder."""

PEERS = TESTS / "peers"
"""Every peer script the tests run as the other end of a connection (see its README)."""

PYTHON = sys.executable
"""The interpreter that runs the tests (it has the test extra, the official ``mcp`` SDK)."""
