"""Every exception of the library lives in mcp_sync.errors, and its docstring draws the tree
as it is."""

from __future__ import annotations

import builtins
import concurrent.futures
import importlib
import pkgutil
import re

import mcp_sync
from mcp_sync import errors

COMMAND_LINE = "mcp_sync.cli"
"""The command line's own exceptions (exit statuses, usage errors, check-cancel's) stay with it."""


def _modules() -> list[str]:
    return [info.name for info in pkgutil.walk_packages(mcp_sync.__path__, "mcp_sync.")]


def test_no_exception_class_is_defined_outside_errors():
    found = []
    for name in _modules():
        if (
            name == "mcp_sync.errors"
            or (name == COMMAND_LINE or name.startswith(COMMAND_LINE + "."))
            or name == "mcp_sync.__main__"
        ):
            continue
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == name
            ):
                found.append(f"{name}.{value.__qualname__}")
    assert found == []


def _tree() -> dict[str, str]:
    """child -> parent, read from the drawing in the module docstring."""
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    drawing = errors.__doc__.split("::", 1)[1].split("\n\n", 2)[1]
    for line in drawing.splitlines():
        match = re.match(r"^(\s*(?:\|\s*)*)(?:\+-- )?\[?([\w.]+)\]?", line)
        assert match, line
        depth = len(match.group(1))
        name = match.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[name] = stack[-1][1]
        stack.append((depth, name))
    return parents


def _resolve(name: str) -> type:
    if name.startswith("concurrent.futures."):
        value = getattr(concurrent.futures, name.rsplit(".", 1)[1])
    else:
        value = getattr(errors, name, None) or getattr(builtins, name)
    assert isinstance(value, type), name
    return value


def test_the_docstring_tree_matches_the_classes():
    parents = _tree()
    drawn = set(parents)
    exported = {name for name in errors.__all__ if isinstance(getattr(errors, name), type)}
    assert exported <= drawn, exported - drawn
    for child, parent in parents.items():
        assert issubclass(_resolve(child), _resolve(parent)), (child, parent)


def test_feature_removed_names_the_feature_and_the_version_and_survives_a_copy():
    import copy
    import pickle

    error = errors.FeatureRemoved(
        "ping", "2026-07-28", "the server answers every request on its own"
    )
    assert isinstance(error, errors.CapabilityError) and isinstance(error, RuntimeError)
    assert "ping" in str(error) and "2026-07-28" in str(error)
    for clone in (copy.copy(error), pickle.loads(pickle.dumps(error))):
        assert (type(clone), clone.feature, clone.protocol_version, str(clone)) == (
            errors.FeatureRemoved,
            "ping",
            "2026-07-28",
            str(error),
        )
