"""Sphinx configuration for mcp_sync.

Only extensions that ship with Sphinx are used, and nothing is fetched from the network
(no intersphinx), so the docs build offline. Build with warnings as errors::

    sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import os
import sys

# autodoc imports the package from this checkout, installed or not.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)


def _version() -> str:
    """The version from mcp_sync/_version.py (its one home), read without importing it."""
    namespace: dict[str, str] = {}
    with open(os.path.join(ROOT, "mcp_sync", "_version.py"), encoding="utf-8") as f:
        exec(f.read(), namespace)
    return namespace["__version__"]


project = "mcp_sync"
author = "the mcp_sync authors"
copyright = "the mcp_sync authors"
release = _version()
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

exclude_patterns = ["_build"]
root_doc = "index"

# -- autodoc -------------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autoclass_content = "class"

# -- napoleon (Google-style "Args:" / "Returns:" / "Attributes:" sections) ------------------
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True

# -- HTML ----------------------------------------------------------------------------------
html_theme = "alabaster"
html_title = f"mcp_sync {release}"
html_theme_options = {
    "description": "Synchronous, thread-based Model Context Protocol",
    "fixed_sidebar": True,
}

# -- nitpicky cross-references ---------------------------------------------------------------
# ``sphinx-build -n`` checks every reference. Without intersphinx (the build is offline) the
# standard library's and the dependencies' objects have no target, so only those are
# excused, by module; every reference to mcp_sync's own objects must resolve.
_EXTERNAL_MODULES = (
    "_queue",
    "argparse",
    "collections",
    "concurrent",
    "enum",
    "json",
    "logging",
    "os",
    "threading",
    "time",
    "typing",
    "typing_extensions",
    "httpx",
    "jsonschema",
    "mcp_types",
    "pydantic",
)
nitpick_ignore_regex = [
    (r"py:.*", rf"({'|'.join(_EXTERNAL_MODULES)})(\..*)?"),
    (r"py:class", r"(str|float)( \| None)?"),  # builtins in signatures
    # private names in signatures and base classes: internal by the naming rule, not documented
    (r"py:class", r"mcp_sync(\.\w+)*\._\w+"),
    (r"py:class", r"mcp_sync\.server\.server\.F"),  # the decorators' TypeVar
    # a forward reference in the value of mcp_sync.server.registry.MethodHandler
    (r"py:class", r"ServerSession"),
]
