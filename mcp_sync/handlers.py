"""Turning plain Python functions into MCP handlers: argument models, schemas, docstrings.

Used by the server for tools, prompts and resource templates. A function's parameters
become a pydantic model (descriptions from ``Annotated`` metadata or the docstring's
``Args:`` section); a parameter annotated with :class:`~mcp_sync.context.Context` is injected
instead of read from the arguments.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, get_args, get_origin

import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.fields import FieldInfo

from .context import Context
from .errors import McpError
from .jsonrpc import INVALID_PARAMS

__all__ = ["Signature", "inspect_handler", "parse_docstring"]

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:\S+\s+)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """Split a docstring into its summary (first paragraph) and per-argument descriptions.

    Understands Google style (``Args:`` with ``name: text`` lines) and Sphinx style
    (``:param name: text``).
    """
    if not doc:
        return None, {}
    text = inspect.cleandoc(doc)
    lines = text.splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip() or _ARGS_HEADER.match(line) or line.lstrip().startswith(":"):
            break
        summary_lines.append(line.strip())
    summary = " ".join(summary_lines) or None
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    indent = 0
    for line in lines:
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            params[sphinx.group(1)] = sphinx.group(2).strip()
            continue
        if _ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        if not in_args:
            continue
        if not line.strip():
            current = None
            continue
        this_indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line)
        if match and (current is None or this_indent <= indent):
            current = match.group(1).lstrip("*")
            indent = this_indent
            params[current] = match.group(3).strip()
        elif current is not None and this_indent > indent:
            params[current] = (params[current] + " " + line.strip()).strip()
        elif this_indent == 0:
            in_args = False
    return summary, params


def _is_context(annotation: Any) -> bool:
    """True for ``Context``, a subclass, ``Annotated[Context, ...]`` and ``Optional[Context]``
    (which Python 3.10 makes of ``ctx: Context = None``)."""
    if annotation is Context:
        return True
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _is_context(get_args(annotation)[0])
    if origin is typing.Union or (_UnionType is not None and origin is _UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        return len(members) == 1 and _is_context(members[0])
    return isinstance(annotation, type) and issubclass(annotation, Context)


_UnionType: Any = getattr(types, "UnionType", None)


def _with_description(annotation: Any, default: Any, description: str | None) -> tuple[Any, Any]:
    """Fold plain-string ``Annotated`` metadata and docstring text into a pydantic Field."""
    field_desc = description
    if get_origin(annotation) is typing.Annotated:
        base, *meta = get_args(annotation)
        kept = []
        for item in meta:
            if isinstance(item, str):
                field_desc = item
            elif isinstance(item, FieldInfo) and item.description:
                field_desc = None  # the Field already says it
                kept.append(item)
            else:
                kept.append(item)
        parts = (base, *kept)
        annotation = typing.Annotated[parts] if kept else base
    if field_desc:
        return annotation, Field(default, description=field_desc)
    return annotation, default


@dataclass
class Signature:
    """What the server needs to know about a handler function."""

    fn: Callable[..., Any]
    description: str | None
    arguments: type[BaseModel]
    context_param: str | None
    param_names: list[str]
    return_annotation: Any

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (an object schema)."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        schema["type"] = "object"
        return schema

    def bind(self, arguments: dict[str, Any] | None, ctx: Context | None) -> dict[str, Any]:
        """Validate ``arguments`` and build the call's keyword arguments.

        Raises :class:`~mcp_sync.errors.McpError` (-32602) naming the wrong argument.
        """
        try:
            model = self.arguments.model_validate(arguments or {})
        except pydantic.ValidationError as exc:
            problems = []
            for error in exc.errors():
                where = ".".join(str(part) for part in error["loc"]) or "arguments"
                problems.append(f"{where}: {error['msg']}")
            raise McpError(INVALID_PARAMS, "Invalid arguments: " + "; ".join(problems)) from None
        kwargs = {name: getattr(model, name) for name in self.param_names}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return kwargs


def inspect_handler(fn: Callable[..., Any], name: str) -> Signature:
    """Build the argument model and metadata of ``fn``."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to raw annotations
        hints = getattr(fn, "__annotations__", {})
    summary, arg_docs = parse_docstring(inspect.getdoc(fn))
    signature = inspect.signature(fn)
    fields: dict[str, Any] = {}
    context_param = None
    names: list[str] = []
    for pname, param in signature.parameters.items():
        annotation = hints.get(pname, Any)
        if _is_context(annotation):
            context_param = pname
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{name}: *args and **kwargs cannot be described as MCP arguments")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"{name}: positional-only parameters are not supported")
        default = param.default if param.default is not param.empty else ...
        fields[pname] = _with_description(annotation, default, arg_docs.get(pname))
        names.append(pname)
    model_name = "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", name) if part) + "Arguments"
    model = pydantic.create_model(  # type: ignore[call-overload]
        model_name or "Arguments",
        __config__=ConfigDict(arbitrary_types_allowed=True),
        **fields,
    )
    return Signature(
        fn=fn,
        description=summary,
        arguments=model,
        context_param=context_param,
        param_names=names,
        return_annotation=hints.get("return", signature.return_annotation),
    )


def json_schema_of(annotation: Any) -> dict[str, Any] | None:
    """The JSON Schema of a type, or ``None`` when it cannot be described."""
    try:
        return TypeAdapter(annotation).json_schema()
    except Exception:
        return None
