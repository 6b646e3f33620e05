"""What the server knows of each registered tool, resource (or template) and prompt."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from .schemas import DeclaredSchema
from .signatures import Signature
from .tool_results import tool_error
from .uri_template import UriTemplate

__all__ = ["RegisteredTool", "RegisteredResource", "RegisteredPrompt"]

_log = logging.getLogger("mcp_sync.server")


@dataclass
class RegisteredTool:
    """A tool as the server knows it."""

    name: str
    signature: Signature
    description: str | None
    title: str | None = None
    timeout: float | None = None
    annotations: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None
    wrap_output: bool = False
    meta: dict[str, Any] | None = field(default=None)
    declared_output: DeclaredSchema | None = None
    """A hand-written ``output_schema``: structured results are validated against it."""
    task_support: str = "forbidden"
    """Whether the tool runs as a task: ``"forbidden"``, ``"optional"`` or ``"required"``."""
    scopes: frozenset[str] = frozenset()
    """OAuth scopes a caller's token must grant to call the tool over HTTP (see
    :class:`~mcp_sync.http.bearer.BearerAuth`); empty: none beyond the app's own."""

    def check_output(self, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` if it honours a declared output schema, else a tool error saying how
        it does not (a result that is itself an error is not checked)."""
        if self.declared_output is None or result.get("isError"):
            return result
        structured = result.get("structuredContent")
        if structured is None:
            problems = ["no structuredContent (return a dict or a pydantic model)"]
        else:
            problems = self.declared_output.problems(structured)
        if not problems:
            return result
        _log.warning("tool %s broke its output schema: %s", self.name, "; ".join(problems))
        return tool_error(
            f"Tool {self.name!r} returned a result that does not match its output schema: "
            + "; ".join(problems)
        )

    def to_wire(self, *, modern: bool = False) -> dict[str, Any]:
        """The ``Tool`` object listed by ``tools/list`` (``modern``: at 2026-07-28, where a
        tool says nothing about tasks)."""
        tool: dict[str, Any] = {"name": self.name, "inputSchema": self.signature.input_schema()}
        if self.title:
            tool["title"] = self.title
        if self.description:
            tool["description"] = self.description
        if self.output_schema is not None:
            tool["outputSchema"] = self.output_schema
        if self.annotations:
            tool["annotations"] = self.annotations
        if self.meta:
            tool["_meta"] = self.meta
        if self.task_support != "forbidden" and not modern:
            tool["execution"] = {"taskSupport": self.task_support}
        return tool


@dataclass
class RegisteredResource:
    """A resource (fixed URI) or resource template (URI with variables)."""

    uri: str
    name: str
    signature: Signature
    template: UriTemplate
    description: str | None = None
    title: str | None = None
    mime_type: str | None = None

    @property
    def is_template(self) -> bool:
        """True for a resource template."""
        return self.template.is_template

    def to_wire(self) -> dict[str, Any]:
        """The ``Resource`` or ``ResourceTemplate`` listing object."""
        item: dict[str, Any] = {"name": self.name}
        item["uriTemplate" if self.is_template else "uri"] = self.uri
        if self.title:
            item["title"] = self.title
        if self.description:
            item["description"] = self.description
        if self.mime_type:
            item["mimeType"] = self.mime_type
        return item


@dataclass
class RegisteredPrompt:
    """A prompt as the server knows it."""

    name: str
    signature: Signature
    description: str | None = None
    title: str | None = None

    def arguments(self) -> list[dict[str, Any]]:
        """The ``PromptArgument`` list, from the function's parameters."""
        schema = self.signature.input_schema()
        required = set(schema.get("required", []))
        result = []
        for name, prop in schema.get("properties", {}).items():
            arg: dict[str, Any] = {"name": name, "required": name in required}
            if prop.get("description"):
                arg["description"] = prop["description"]
            result.append(arg)
        return result

    def to_wire(self) -> dict[str, Any]:
        """The ``Prompt`` listing object."""
        item: dict[str, Any] = {"name": self.name, "arguments": self.arguments()}
        if self.title:
            item["title"] = self.title
        if self.description:
            item["description"] = self.description
        return item
