"""What one server serves: its tools, resources, prompts, completers and custom methods.

A :class:`Registry` is a thread-safe store of records, keyed by name (tools, prompts), URI
(resources and templates), reference (completers) or method name (custom methods).
:class:`~mcp_sync.server.Server` fills it; the session's feature handlers read it through
the lookups below. It sends no notifications: the server does, after a change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ..cancel import CancelToken
from ..protocol import InboundRequest
from .records import RegisteredPrompt, RegisteredResource, RegisteredTool

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession

__all__ = ["Registry", "MethodHandler", "Completer", "CompletionKey", "ListKind"]

MethodHandler = Callable[["ServerSession", InboundRequest, CancelToken], Any]
"""A custom request method, ``handler(session, request, token) -> result``."""

Completer = Callable[..., Any]
"""``completer(value, context_arguments)``: see :meth:`Server.completion <mcp_sync.server.Server.completion>`."""

CompletionKey = tuple[str, str, str]
"""``(kind, name or URI template, argument)``, kind being ``"prompt"`` or ``"resource"``."""

ListKind = Literal["tools", "resources", "prompts"]
"""The kinds of registered items that have a list (and a ``list_changed`` notification)."""


class Registry:
    """The records of one server, safe to change while sessions read them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tools: dict[str, RegisteredTool] = {}
        self._resources: dict[str, RegisteredResource] = {}
        self._prompts: dict[str, RegisteredPrompt] = {}
        self._completers: dict[CompletionKey, Completer] = {}
        self._methods: dict[str, MethodHandler] = {}

    def _table(self, kind: ListKind) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {
            "tools": self._tools,
            "resources": self._resources,
            "prompts": self._prompts,
        }
        return tables[kind]

    # -- changes ------------------------------------------------------------------------------
    def put(
        self, kind: ListKind, key: str, item: RegisteredTool | RegisteredResource | RegisteredPrompt
    ) -> None:
        """Add ``item`` under ``key`` (replacing one of the same key)."""
        with self._lock:
            self._table(kind)[key] = item

    def remove(self, kind: ListKind, key: str) -> None:
        """Remove the item of ``key``; KeyError if there is none."""
        with self._lock:
            del self._table(kind)[key]

    def add_completer(self, key: CompletionKey, completer: Completer) -> None:
        """Register (or replace) the completer of ``key``."""
        with self._lock:
            self._completers[key] = completer

    def add_method(self, method: str, handler: MethodHandler) -> None:
        """Register (or replace) a custom request method."""
        with self._lock:
            self._methods[method] = handler

    # -- lookups ------------------------------------------------------------------------------
    def tools(self) -> list[RegisteredTool]:
        """The tools, in registration order."""
        with self._lock:
            return list(self._tools.values())

    def tool(self, name: str) -> RegisteredTool | None:
        """The tool called ``name``, if any."""
        with self._lock:
            return self._tools.get(name)

    def resources(self) -> list[RegisteredResource]:
        """The resources and templates, in registration order."""
        with self._lock:
            return list(self._resources.values())

    def prompts(self) -> list[RegisteredPrompt]:
        """The prompts, in registration order."""
        with self._lock:
            return list(self._prompts.values())

    def prompt(self, name: str) -> RegisteredPrompt | None:
        """The prompt called ``name``, if any."""
        with self._lock:
            return self._prompts.get(name)

    def completer(self, key: CompletionKey) -> Completer | None:
        """The completer of ``key``, if any."""
        with self._lock:
            return self._completers.get(key)

    def method(self, method: str) -> MethodHandler | None:
        """The custom handler of ``method``, if any."""
        with self._lock:
            return self._methods.get(method)

    def kinds(self) -> frozenset[str]:
        """Which of ``"resources"``, ``"prompts"`` and ``"completions"`` have something
        registered (one consistent snapshot)."""
        with self._lock:
            present = {"resources": bool(self._resources), "prompts": bool(self._prompts)}
            present["completions"] = bool(self._completers)
        return frozenset(kind for kind, there in present.items() if there)
