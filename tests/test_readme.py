"""The README's Python snippets run as written: the Serve snippet is a working server, and the
legacy-service snippet embeds it with ``serve_in_thread`` and exposes it with ``serve_http``."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from support.paths import PYTHON, ROOT
from support.processes import run

README = (ROOT / "README.md").read_text()
LIMIT = 30.0


def snippet(heading: str) -> str:
    """The first ``python`` code block after ``heading``."""
    section = README.split(heading + "\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, f"no python block after {heading!r}"
    return match.group(1)


def test_the_serve_snippet_is_a_working_server(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(snippet("## Serve"))
    script = str(Path(sys.executable).with_name("mcp-sync"))
    looked_up = run(
        [script, "call", "lookup", '{"key": "abc"}', "--", PYTHON, "server.py"], LIMIT, cwd=tmp_path
    )
    assert looked_up.code == 0 and looked_up.stdout == "ABC\n", looked_up.describe()
    slow = run(
        [script, "call", "slow", '{"seconds": 0.1}', "--no-progress", "--", PYTHON, "server.py"],
        LIMIT,
        cwd=tmp_path,
    )
    assert slow.code == 0 and slow.stdout == "done\n", slow.describe()


def test_the_legacy_service_snippet_embeds_and_exposes_the_server(tmp_path: Path) -> None:
    if importlib.util.find_spec("httpx") is None:
        pytest.skip("the http extra (httpx) is not installed")
    (tmp_path / "server.py").write_text(snippet("## Serve"))
    (tmp_path / "service.py").write_text(snippet("### Serve from a legacy service"))
    result = run([PYTHON, "service.py"], LIMIT, cwd=tmp_path)
    assert result.code == 0, result.describe()
    lines = result.stdout.splitlines()
    assert lines[0] == "ABC", result.describe()
    assert re.fullmatch(r"MCP clients connect to http://127\.0\.0\.1:\d+/mcp", lines[1]), (
        result.describe()
    )
    assert lines[2:] == ["XYZ"], result.describe()
