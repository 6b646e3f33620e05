"""The ``mcp-sync`` command line: :func:`~mcp_sync.cli.main.main` (in :mod:`mcp_sync.cli.main`).

Modules: :mod:`~mcp_sync.cli.main` (the subcommands), :mod:`~mcp_sync.cli.parser` (the
grammar and exit codes), :mod:`~mcp_sync.cli.serve` (``mcp-sync serve``),
:mod:`~mcp_sync.cli.output` (what is printed), :mod:`~mcp_sync.cli.demo` (``mcp-sync demo``
and the demo server) and :mod:`~mcp_sync.cli.check_cancel` (``mcp-sync check-cancel``).
"""

from .main import main

__all__ = ["main"]
