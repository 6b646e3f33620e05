"""Prompts: registration records and conversion of a prompt function's result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .handlers import Signature
from .wire import model_to_wire

__all__ = ["RegisteredPrompt", "to_prompt_result"]


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


_ROLES = ("user", "assistant")


def _message(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        value = model_to_wire(value, result=True)
    if isinstance(value, str):
        return {"role": "user", "content": {"type": "text", "text": value}}
    if isinstance(value, dict) and "role" in value:
        if value["role"] not in _ROLES:
            raise ValueError(f"a prompt message's role must be 'user' or 'assistant', not {value['role']!r}")
        content = value.get("content")
        if isinstance(content, str):
            return {"role": value["role"], "content": {"type": "text", "text": content}}
        if isinstance(content, BaseModel):
            return {"role": value["role"], "content": model_to_wire(content, result=True)}
        return dict(value)
    if isinstance(value, dict) and "type" in value:
        return {"role": "user", "content": value}
    raise TypeError(f"cannot turn {type(value).__name__} into a prompt message")


def to_prompt_result(value: Any, description: str | None) -> dict[str, Any]:
    """Convert a prompt function's result into a ``GetPromptResult`` dict.

    A ``str`` is one user message; a message dict/model (``role`` and ``content``, where the
    content may be a plain string) is one message; a list of these is several messages; a
    ``GetPromptResult`` (or a dict shaped like one, with ``messages``) is used as it is, its
    messages normalised like the others.
    """
    if isinstance(value, BaseModel) and type(value).__name__ == "GetPromptResult":
        return model_to_wire(value, result=True)
    if isinstance(value, dict) and "messages" in value and "role" not in value and "type" not in value:
        given = dict(value)
        given["messages"] = [_message(item) for item in value["messages"]]
        if description and "description" not in given:
            given["description"] = description
        return given
    items = value if isinstance(value, (list, tuple)) else [value]
    result: dict[str, Any] = {"messages": [_message(item) for item in items]}
    if description:
        result["description"] = description
    return result
