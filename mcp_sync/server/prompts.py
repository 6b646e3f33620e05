"""The prompts feature: ``prompts/list``, ``prompts/get`` and the conversion of a prompt
function's result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..cancel import CancelToken
from ..context import Context
from ..errors import McpError
from ..jsonrpc import INVALID_PARAMS
from ..protocol import InboundRequest
from ..wire import model_to_wire
from . import input_rounds
from .pagination import paginate

if TYPE_CHECKING:  # pragma: no cover
    from .dispatch import ServerSession

__all__ = ["to_prompt_result", "list_prompts", "get_prompt"]


_ROLES = ("user", "assistant")


def _message(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        value = model_to_wire(value, result=True)
    if isinstance(value, str):
        return {"role": "user", "content": {"type": "text", "text": value}}
    if isinstance(value, dict) and "role" in value:
        if value["role"] not in _ROLES:
            raise ValueError(
                f"a prompt message's role must be 'user' or 'assistant', not {value['role']!r}"
            )
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
    if (
        isinstance(value, dict)
        and "messages" in value
        and "role" not in value
        and "type" not in value
    ):
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


def list_prompts(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any]:
    """``prompts/list``: one page of the registered prompts."""
    items = [p.to_wire() for p in session.server.registry.prompts()]
    return paginate(items, request.params, session.server.page_size, "prompts")


def get_prompt(
    session: ServerSession, request: InboundRequest, token: CancelToken
) -> dict[str, Any] | input_rounds.InputRequired:
    """``prompts/get``: call the prompt's function with the request's arguments."""
    name = request.params.get("name")
    prompt = session.server.registry.prompt(name) if isinstance(name, str) else None
    if prompt is None:
        raise McpError(INVALID_PARAMS, f"Unknown prompt: {name}")
    arguments = request.params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise McpError(INVALID_PARAMS, "Invalid arguments: must be an object")
    ctx = Context(session, request, token)
    kwargs = prompt.signature.bind(arguments, ctx)
    value = prompt.signature.fn(**kwargs)
    if isinstance(value, input_rounds.InputRequired):
        return value
    return to_prompt_result(value, prompt.description)
