"""The Node peers are skipped only where they may be: on a developer's machine without
``tests/node/node_modules``, never in CI."""

from __future__ import annotations

from pathlib import Path

import pytest
import support.node as node_peers


def test_absent_node_modules_skip_outside_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(node_peers, "NODE_MODULES", tmp_path / "node_modules")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="run `cd tests/node && npm ci`"):
        node_peers.node_package("@modelcontextprotocol/inspector-cli")


def test_absent_node_modules_fail_in_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(node_peers, "NODE_MODULES", tmp_path / "node_modules")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set, so this is a failure"):
        node_peers.node_package("@modelcontextprotocol/inspector-cli")


def test_a_package_missing_from_present_node_modules_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "node_modules").mkdir()
    monkeypatch.setattr(node_peers, "NODE_MODULES", tmp_path / "node_modules")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(AssertionError, match="the lock file and node_modules disagree"):
        node_peers.node_package("@modelcontextprotocol/inspector-cli")
