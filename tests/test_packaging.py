"""The wheel built from the tracked sources installs into a fresh virtual environment, holds
every module and subpackage of the checkout (walked with :mod:`pkgutil` in that environment,
and each one imported from it), and runs ``mcp-sync demo``.

An editable install (what the rest of the suite runs on) sees every module of the checkout
whether or not the wheel would contain it, so only a real wheel shows a package left out of
the build configuration.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALL_TIMEOUT = 600


def _tracked_files() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, timeout=60
    ).stdout
    return [name for name in out.decode().split("\0") if name]


def _tracked_modules() -> set[str]:
    """Every module and package of mcp_sync among the tracked files, by dotted name."""
    names = {"mcp_sync"}
    for name in _tracked_files():
        path = Path(name)
        if path.parts[0] != "mcp_sync" or path.suffix != ".py":
            continue
        parts = path.with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build a wheel from a copy of the tracked files and install it into a new venv."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    for name in _tracked_files():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        check=True,
        timeout=INSTALL_TIMEOUT,
    )
    wheels = list(dist.glob("mcp_sync_threaded-*.whl"))
    assert len(wheels) == 1, f"expected one wheel, found {wheels}"
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        # with the oauth extra: mcp_sync.auth's classes are httpx.Auth subclasses, so that
        # subpackage imports httpx (and uses authlib) when it is imported
        [str(python), "-m", "pip", "install", "-q", f"{wheels[0]}[oauth]"],
        check=True,
        timeout=INSTALL_TIMEOUT,
    )
    return env_dir


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


# Run in the fresh environment: walk the installed package (not a list made here, so a
# subpackage the wheel left out is missing from the walk) and import every module found.
WALK_AND_IMPORT = """
import importlib, json, pathlib, pkgutil
import mcp_sync

def fail(name):
    raise SystemExit(f"cannot import {name}")

names = ["mcp_sync"] + [m.name for m in pkgutil.walk_packages(mcp_sync.__path__, "mcp_sync.", onerror=fail)]
for name in names:
    module = importlib.import_module(name)
    assert "site-packages" in (module.__file__ or ""), (name, module.__file__)
assert (pathlib.Path(mcp_sync.__file__).parent / "py.typed").is_file(), "py.typed is missing"
print(json.dumps(sorted(names)))
"""


def test_wheel_holds_and_imports_every_module_and_the_typing_marker(installed_wheel: Path) -> None:
    python = installed_wheel / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", WALK_AND_IMPORT],
        cwd=installed_wheel,  # not the checkout: the installed copy must be the one imported
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    installed = set(json.loads(done.stdout))
    expected = _tracked_modules()
    assert {"mcp_sync.cli", "mcp_sync.http", "mcp_sync.server", "mcp_sync.transports"} <= expected
    assert not expected - installed, f"tracked but not in the wheel: {sorted(expected - installed)}"
    assert not installed - expected, f"in the wheel but not tracked: {sorted(installed - expected)}"


def test_wheel_runs_the_demo(installed_wheel: Path) -> None:
    demo = installed_wheel / "bin" / "mcp-sync"
    done = subprocess.run(
        [str(demo), "demo"],
        cwd=installed_wheel,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "notifications/cancelled sent" in done.stdout
    assert "stopped by cancellation" in done.stdout
