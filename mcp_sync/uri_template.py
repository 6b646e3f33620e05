"""RFC 6570 URI templates, as far as MCP resource templates need them.

Supported expressions: ``{var}`` (simple: no ``/``, ``?``, ``#`` or ``,`` in the value),
``{+var}`` (reserved: may contain ``/``), ``{#var}`` (fragment), ``{/var}`` (path segment),
``{.var}`` (label), ``{var1,var2}`` (several simple values separated by commas) and
``{?a,b}`` / ``{&a,b}`` (query parameters, each optional, in any order).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, unquote

__all__ = ["UriTemplate"]

_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]+)\}")


class UriTemplate:
    """A compiled URI template: :meth:`match` a URI, :meth:`expand` values.

    Example::

        t = UriTemplate("weather://{city}/forecast{?days}")
        t.match("weather://Paris/forecast?days=3")   # {"city": "Paris", "days": "3"}
    """

    def __init__(self, template: str) -> None:
        self.template = template
        self.variables: list[str] = []
        self._query_vars: list[str] = []
        pattern = ""
        position = 0
        for match in _EXPRESSION.finditer(template):
            pattern += re.escape(template[position : match.start()])
            position = match.end()
            operator, names = match.group(1), [n.strip().rstrip("*") for n in match.group(2).split(",")]
            for name in names:
                if not name.isidentifier():
                    raise ValueError(f"invalid variable name {name!r} in {template!r}")
            self.variables.extend(names)
            if operator in ("?", "&"):
                if position != len(template):
                    raise ValueError("query expressions must end the template")
                self._query_vars.extend(names)
                pattern += r"(?:\?(?P<__query>[^#]*))?"
                continue
            value = {"": r"[^/?#,]+", "+": r"[^?#]+", "#": r".+", "/": r"[^/?#]+", ".": r"[^/?#.]+", ";": r"[^/?#;]+"}[operator]
            prefix = {"": "", "+": "", "#": "#", "/": "/", ".": r"\.", ";": ";"}[operator]
            parts = [f"(?P<{name}>{value})" for name in names]
            joiner = "," if operator in ("", "+", "#") else re.escape(operator if operator != "." else ".")
            pattern += re.escape(prefix) if prefix in ("#", "/", ";") else prefix
            pattern += joiner.join(parts)
        pattern += re.escape(template[position:])
        self._regex = re.compile(pattern + r"\Z")

    @property
    def is_template(self) -> bool:
        """True if the template has at least one variable."""
        return bool(self.variables)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` if it matches the template, else ``None``."""
        found = self._regex.match(uri)
        if found is None:
            return None
        values = {k: unquote(v) for k, v in found.groupdict().items() if k != "__query" and v is not None}
        query = found.groupdict().get("__query")
        if query:
            for key, value in parse_qsl(query, keep_blank_values=True):
                if key in self._query_vars:
                    values[key] = value
        return values

    def expand(self, **values: object) -> str:
        """Fill the template with ``values`` (missing query variables are left out)."""

        def replace(match: re.Match[str]) -> str:
            operator = match.group(1)
            names = [n.strip().rstrip("*") for n in match.group(2).split(",")]
            if operator in ("?", "&"):
                pairs = [f"{n}={quote(str(values[n]), safe='')}" for n in names if n in values]
                return (operator + "&".join(pairs)) if pairs else ""
            safe = "/:" if operator in ("+", "#") else ""
            encoded = [quote(str(values[n]), safe=safe) for n in names]
            prefix = operator if operator in ("#", "/", ".", ";") else ""
            joiner = "," if operator in ("", "+", "#") else operator
            return prefix + joiner.join(encoded)

        return _EXPRESSION.sub(replace, self.template)

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"
