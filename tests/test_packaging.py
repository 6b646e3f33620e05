"""The wheel built from the tracked sources installs into a fresh virtual environment, holds
every subpackage, and runs ``mcp-sync demo``.

An editable install (what the rest of the suite runs on) sees every module of the checkout
whether or not the wheel would contain it, so only a real wheel shows a package left out of
the build configuration.
"""

from __future__ import annotations

import os
import pkgutil
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

import mcp_sync

ROOT = Path(__file__).resolve().parent.parent
INSTALL_TIMEOUT = 600


def _tracked_files() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, timeout=60
    ).stdout
    return [name for name in out.decode().split("\0") if name]


def _subpackages() -> set[str]:
    """Every package under mcp_sync in the checkout (directories with an ``__init__.py``)."""
    found = {"mcp_sync"}
    for info in pkgutil.walk_packages(mcp_sync.__path__, "mcp_sync."):
        if info.ispkg:
            found.add(info.name)
    return found


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
        [str(python), "-m", "pip", "install", "-q", str(wheels[0])],
        check=True,
        timeout=INSTALL_TIMEOUT,
    )
    return env_dir


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def test_wheel_contains_every_subpackage_and_typing_marker(installed_wheel: Path) -> None:
    python = installed_wheel / "bin" / "python"
    expected = sorted(_subpackages())
    script = (
        "import importlib, json, pathlib, sys\n"
        "names = json.loads(sys.argv[1])\n"
        "for name in names:\n"
        "    module = importlib.import_module(name)\n"
        "    assert 'site-packages' in module.__file__, (name, module.__file__)\n"
        "import mcp_sync\n"
        "assert (pathlib.Path(mcp_sync.__file__).parent / 'py.typed').is_file()\n"
        "print('imported', len(names))\n"
    )
    import json

    done = subprocess.run(
        [str(python), "-c", script, json.dumps(expected)],
        cwd=installed_wheel,  # not the checkout: the installed copy must be the one imported
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"imported {len(expected)}"


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
