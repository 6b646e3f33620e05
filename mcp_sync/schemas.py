"""JSON Schemas a tool declares by hand, validated with :mod:`jsonschema`.

``@server.tool(input_schema=..., output_schema=...)`` publishes a schema verbatim and
validates against it. The dialect is the one the schema names in ``$schema``; without one,
JSON Schema 2020-12 (the MCP default). Validation needs the optional ``jsonschema``
package (``pip install 'mcp-sync-threaded[jsonschema]'``); a server that declares a schema
without it fails at registration, not at the first call.

References (``$ref``) resolve inside the schema (``$defs``, ``definitions``); nothing is
fetched from the network.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["DeclaredSchema", "declare_schema", "MAX_REPORTED_PROBLEMS"]

MAX_REPORTED_PROBLEMS = 10
"""At most this many validation problems are described in one error message."""

_INSTALL_HINT = "pip install 'mcp-sync-threaded[jsonschema]'"


def _jsonschema() -> Any:
    try:
        import jsonschema.validators
        import referencing
    except ImportError as exc:
        raise ImportError(
            f"a declared JSON Schema (input_schema= or output_schema=) is validated with the "
            f"'jsonschema' package, which is not installed: {_INSTALL_HINT}"
        ) from exc
    return jsonschema, referencing


@dataclass(frozen=True)
class DeclaredSchema:
    """A schema as declared (a private deep copy, published as is) and its validator."""

    schema: dict[str, Any]
    validator: Any

    def problems(self, instance: Any) -> list[str]:
        """What is wrong with ``instance`` (empty when it is valid): one line per problem,
        each naming where (``arguments`` for the top level, else a dotted path) and what the
        schema expected; at most :data:`MAX_REPORTED_PROBLEMS`."""
        errors = itertools.islice(self.validator.iter_errors(instance), MAX_REPORTED_PROBLEMS)
        found = []
        for error in sorted(errors, key=lambda e: [str(part) for part in e.absolute_path]):
            where = ".".join(str(part) for part in error.absolute_path) or "arguments"
            found.append(f"{where}: {error.message}")
        return found


def declare_schema(schema: Mapping[str, Any], what: str) -> DeclaredSchema:
    """Check ``schema`` (an object schema, valid in its dialect) and build its validator.

    Raises :class:`ImportError` without the ``jsonschema`` package, :class:`TypeError` for
    something that is not a mapping, :class:`ValueError` for an invalid schema, an unknown
    ``$schema`` or a schema whose ``type`` is not ``"object"`` (``what`` names it).
    """
    if not isinstance(schema, Mapping):
        raise TypeError(f"{what} must be a JSON Schema object (a dict), not {type(schema).__name__}")
    jsonschema, referencing = _jsonschema()
    declared = copy.deepcopy(dict(schema))
    if declared.get("type") != "object":
        raise ValueError(f'{what} must have "type": "object" (MCP tool schemas describe an object)')
    validator_class = jsonschema.validators.Draft202012Validator
    if "$schema" in declared:
        validator_class = jsonschema.validators.validator_for(declared, default=None)
        if validator_class is None:
            raise ValueError(f"{what}: unknown $schema {declared['$schema']!r}")
    try:
        validator_class.check_schema(declared)
    except jsonschema.exceptions.SchemaError as exc:
        raise ValueError(f"{what} is not a valid JSON Schema: {exc.message}") from None
    validator = validator_class(declared, registry=referencing.Registry())
    return DeclaredSchema(declared, validator)
