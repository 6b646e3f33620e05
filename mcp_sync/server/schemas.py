"""JSON Schemas a tool declares by hand, validated with :mod:`jsonschema`.

``@server.tool(input_schema=..., output_schema=...)`` publishes a schema verbatim and
validates against it. The dialect is the one the schema names in ``$schema``; without one,
JSON Schema 2020-12 (the MCP default). Validation needs the optional ``jsonschema``
package (``pip install 'mcp-sync-threaded[jsonschema]'``); a server that declares a schema
without it fails at registration, not at the first call.

References (``$ref``) resolve inside the schema (``$defs``, ``definitions``); nothing is
fetched from the network.

Validation problems -- of declared schemas and of type-hinted arguments alike -- are
described within bounds (:func:`bounded_problems`), whatever the size of what was sent.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DeclaredSchema",
    "declare_schema",
    "bounded_problems",
    "MAX_REPORTED_PROBLEMS",
    "MAX_PROBLEM_CHARS",
]

MAX_REPORTED_PROBLEMS = 10
"""At most this many validation problems are described in one error message."""

MAX_PROBLEM_CHARS = 200
"""At most this many characters describe one problem (a longer description, such as one
quoting a large value, is cut)."""


def bounded_problems(problems: Iterable[str]) -> list[str]:
    """At most :data:`MAX_REPORTED_PROBLEMS` of ``problems`` (read lazily), each cut to
    :data:`MAX_PROBLEM_CHARS`, and a last line saying that more were left out, if any."""
    first = list(itertools.islice(problems, MAX_REPORTED_PROBLEMS + 1))
    shown = [
        p if len(p) <= MAX_PROBLEM_CHARS else p[: MAX_PROBLEM_CHARS - 3] + "..."
        for p in first[:MAX_REPORTED_PROBLEMS]
    ]
    if len(first) > MAX_REPORTED_PROBLEMS:
        shown.append("(more problems not shown)")
    return shown


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
        schema expected; bounded by :func:`bounded_problems`."""
        errors = itertools.islice(self.validator.iter_errors(instance), MAX_REPORTED_PROBLEMS + 1)
        ordered = sorted(errors, key=lambda e: [str(part) for part in e.absolute_path])
        return bounded_problems(
            f"{'.'.join(str(part) for part in e.absolute_path) or 'arguments'}: {e.message}"
            for e in ordered
        )


def declare_schema(schema: Mapping[str, Any], what: str) -> DeclaredSchema:
    """Check ``schema`` (an object schema, valid in its dialect) and build its validator.

    Raises :class:`ImportError` without the ``jsonschema`` package, :class:`TypeError` for
    something that is not a mapping, :class:`ValueError` for an invalid schema, an unknown
    ``$schema`` or a schema whose ``type`` is not ``"object"`` (``what`` names it).
    """
    if not isinstance(schema, Mapping):
        raise TypeError(
            f"{what} must be a JSON Schema object (a dict), not {type(schema).__name__}"
        )
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
