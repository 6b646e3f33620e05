"""Turning plain Python functions into MCP handlers: argument models, schemas, docstrings.

Used by the server for tools, prompts and resource templates. A function's parameters
become a pydantic model (descriptions from ``Annotated`` metadata or the docstring's
``Args:`` section); a parameter annotated with :class:`~mcp_sync.context.Context` is injected
instead of read from the arguments. :func:`mcp_header` marks a parameter to be mirrored in
an ``Mcp-Param-*`` HTTP header (:mod:`mcp_sync.mirrored_headers`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_args, get_origin

import pydantic
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.fields import FieldInfo

from ..context import Context
from ..errors import ArgumentError
from ..mirrored_headers import X_MCP_HEADER, MirroredParam, mirrored_params
from .schemas import DeclaredSchema, bounded_problems

__all__ = ["Signature", "inspect_handler", "mcp_header", "parse_docstring"]


def mcp_header(name: str) -> Any:
    """Mark a tool parameter to be mirrored in the HTTP header ``Mcp-Param-<name>``
    (``Annotated`` metadata; it adds ``"x-mcp-header": name`` to the property's schema)::

        @server.tool()
        def execute_sql(region: Annotated[str, mcp_header("Region")], query: str) -> str: ...

    Over Streamable HTTP at 2026-07-28 the client then sends the ``region`` argument in
    ``Mcp-Param-Region`` too (a load balancer can route on it), and the server refuses a call
    whose header is missing or differs from the argument (400, -32020). Only ``str``,
    ``int`` and ``bool`` parameters can be mirrored (not ``float``, not ``Optional``: give
    an optional one a default value instead); ``name`` is an HTTP token, unique ignoring
    case among the tool's mirrored parameters. Prefer names without ``_``: many WSGI
    servers drop headers whose names contain one. The tool is refused at registration
    (``ValueError``) when an annotation breaks these rules."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"mcp_header needs a non-empty header name, not {name!r}")
    return Field(json_schema_extra={X_MCP_HEADER: name})


_log = logging.getLogger("mcp_sync.server")

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


_MAX_SHOWN_INPUT = 60
"""Characters of a rejected value quoted in an error message."""


def _describe_problem(error: Any) -> str:
    """One pydantic validation error as ``where: what was expected (got what)``."""
    where = ".".join(str(part) for part in error["loc"]) or "arguments"
    if error["type"] == "missing":
        return f"{where}: required argument missing"
    shown = repr(error.get("input"))
    if len(shown) > _MAX_SHOWN_INPUT:
        shown = shown[: _MAX_SHOWN_INPUT - 3] + "..."
    return f"{where}: {error['msg']} (got {shown})"


@dataclass
class Signature:
    """What the server needs to know about a handler function.

    Arguments are validated against ``declared`` (a hand-written JSON Schema) when there is
    one, else against ``arguments``, the pydantic model made from the type hints.
    """

    fn: Callable[..., Any]
    description: str | None
    arguments: type[BaseModel] | None
    context_param: str | None
    param_names: list[str]
    return_annotation: Any
    declared: DeclaredSchema | None = None
    takes_any_keyword: bool = False
    """True when ``fn`` has ``**kwargs`` (only with a declared schema): it receives every
    argument, including names that are not parameters or not identifiers."""

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (an object schema); a declared one as is."""
        if self.declared is not None:
            return self.declared.schema
        assert self.arguments is not None
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        schema["type"] = "object"
        return schema

    @functools.cached_property
    def mirrored(self) -> tuple[MirroredParam, ...]:
        """The parameters mirrored in ``Mcp-Param-*`` headers (``ValueError`` when an
        ``x-mcp-header`` annotation of the schema made from type hints is invalid; none for
        a hand-written schema whose annotations are invalid)."""
        try:
            return mirrored_params(self.input_schema())
        except ValueError:
            if self.declared is None:
                raise
            return ()

    def bind(self, arguments: dict[str, Any] | None, ctx: Context | None) -> dict[str, Any]:
        """Validate ``arguments`` and build the call's keyword arguments.

        Raises :class:`~mcp_sync.errors.ArgumentError` (-32602) naming each wrong argument. With a declared
        schema the values are passed as decoded from JSON (no conversion by type hints);
        arguments the schema allows but no parameter takes are left out unless ``fn`` has
        ``**kwargs``.
        """
        if self.declared is not None:
            values = arguments or {}
            problems = self.declared.problems(values)
            if problems:
                raise ArgumentError(problems)
            if self.takes_any_keyword:
                kwargs = dict(values)
            else:
                kwargs = {name: values[name] for name in self.param_names if name in values}
        else:
            assert self.arguments is not None
            try:
                model = self.arguments.model_validate(arguments or {})
            except pydantic.ValidationError as exc:
                raise ArgumentError(
                    bounded_problems(_describe_problem(error) for error in exc.errors())
                ) from None
            kwargs = {name: getattr(model, name) for name in self.param_names}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return kwargs


def inspect_handler(
    fn: Callable[..., Any], name: str, declared: DeclaredSchema | None = None
) -> Signature:
    """Build the argument model and metadata of ``fn`` (or, with ``declared``, check that
    ``fn`` can take every call that schema accepts: ``TypeError`` if not)."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to raw annotations
        hints = getattr(fn, "__annotations__", {})
    summary, arg_docs = parse_docstring(inspect.getdoc(fn))
    signature = inspect.signature(fn)
    fields: dict[str, Any] = {}
    context_param = None
    names: list[str] = []
    takes_any_keyword = False
    for pname, param in signature.parameters.items():
        annotation = hints.get(pname, Any)
        if _is_context(annotation):
            context_param = pname
            continue
        if param.kind is param.VAR_KEYWORD and declared is not None:
            takes_any_keyword = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{name}: *args and **kwargs cannot be described as MCP arguments")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"{name}: positional-only parameters are not supported")
        default = param.default if param.default is not param.empty else ...
        fields[pname] = _with_description(annotation, default, arg_docs.get(pname))
        names.append(pname)
    model = None
    if declared is not None:
        _check_declared(name, declared.schema, signature, names, takes_any_keyword)
    else:
        model_name = (
            "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", name) if part)
            + "Arguments"
        )
        model = pydantic.create_model(
            model_name or "Arguments",
            __config__=ConfigDict(arbitrary_types_allowed=True),
            **fields,
        )
    built = Signature(
        fn=fn,
        description=summary,
        arguments=model,
        context_param=context_param,
        param_names=names,
        return_annotation=hints.get("return", signature.return_annotation),
        declared=declared,
        takes_any_keyword=takes_any_keyword,
    )
    try:
        mirrored_params(built.input_schema())  # checks the x-mcp-header annotations now
    except ValueError as exc:
        if declared is None:
            raise ValueError(f"{name}: {exc}") from None
        # a hand-written schema is published verbatim: clients drop the tool (the spec says
        # they MUST), and the server checks no Mcp-Param header for it
        _log.warning("tool %s: %s; clients will not list it", name, exc)
    return built


def _check_declared(
    name: str,
    schema: dict[str, Any],
    signature: inspect.Signature,
    names: list[str],
    takes_any_keyword: bool,
) -> None:
    """A handler must be able to take every call its declared schema accepts: each
    top-level property needs a parameter (or ``**kwargs``), and each parameter without a
    default must be ``required`` by the schema."""
    properties = schema.get("properties")
    declared = set(properties) if isinstance(properties, dict) else set()
    required = schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    if not takes_any_keyword:
        orphans = sorted(declared - set(names))
        if orphans:
            raise TypeError(
                f"{name}: the input schema declares {orphans}, which no parameter takes (add them, or **kwargs)"
            )
    optional = [
        p
        for p in names
        if signature.parameters[p].default is inspect.Parameter.empty and p not in required_names
    ]
    if optional:
        raise TypeError(
            f"{name}: parameters {optional} have no default but the input schema does not require them"
        )


def json_schema_of(annotation: Any) -> dict[str, Any] | None:
    """The JSON Schema of a type, or ``None`` when it cannot be described."""
    try:
        return TypeAdapter(annotation).json_schema()
    except Exception:
        return None
