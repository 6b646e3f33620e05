"""RFC 6570 URI templates, as far as MCP resource templates need them.

Supported expressions: ``{var}`` (simple: no ``/``, ``?``, ``#`` or ``,`` in the value),
``{+var}`` (reserved: may contain ``/``), ``{#var}`` (fragment), ``{/var}`` (path segment),
``{.var}`` (label), ``{;var}`` (path-style parameter, ``;var=value``), ``{var1,var2}``
(several values in one expression) and ``{?a,b}`` / ``{&a,b}`` (query parameters, each
optional, in any order; they must end the template, e.g. ``{?a}{&b}``). The explode (``*``)
and prefix (``:3``) modifiers are accepted; a prefix truncates the value on expansion.

Matching percent-decodes every value (``+`` stays ``+``: this is not form encoding).
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

__all__ = ["UriTemplate"]

_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]+)\}")
_VARSPEC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)(?::([1-9][0-9]{0,3}))?(\*)?\s*$")
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")

# characters RFC 6570 reserved expansion ({+var}, {#var}) leaves as they are
_RESERVED = ":/?#[]@!$&'()*+,;="

# operator -> (regex of one value, literal before the first value, separator between values)
_MATCH = {
    "": (r"[^/?#,]+", "", ","),
    "+": (r"[^?#]+", "", ","),
    "#": (r".+", "#", ","),
    "/": (r"[^/?#]+", "/", "/"),
    ".": (r"[^/?#.]+", ".", "."),
}


def _varspecs(body: str, template: str) -> list[tuple[str, int | None]]:
    specs = []
    for raw in body.split(","):
        found = _VARSPEC.match(raw)
        if found is None:
            raise ValueError(f"invalid variable {raw.strip()!r} in URI template {template!r}")
        specs.append((found.group(1), int(found.group(2)) if found.group(2) else None))
    return specs


def _encode(value: object, reserved: bool, prefix: int | None) -> str:
    text = str(value)
    if prefix is not None:
        text = text[:prefix]
    if not reserved:
        return quote(text, safe="")
    # reserved expansion: reserved characters and existing %XX triplets pass through
    parts = []
    position = 0
    for triplet in _PCT.finditer(text):
        parts.append(quote(text[position : triplet.start()], safe=_RESERVED))
        parts.append(triplet.group(0))
        position = triplet.end()
    parts.append(quote(text[position:], safe=_RESERVED))
    return "".join(parts)


class UriTemplate:
    """A compiled URI template: :meth:`match` a URI, :meth:`expand` values.

    Example::

        t = UriTemplate("weather://{city}/forecast{?days}")
        t.match("weather://Paris/forecast?days=3")   # {"city": "Paris", "days": "3"}
    """

    def __init__(self, template: str) -> None:
        self.template = template
        if "{" in _EXPRESSION.sub("", template) or "}" in _EXPRESSION.sub("", template):
            raise ValueError(f"unbalanced or empty braces in URI template {template!r}")
        self.variables: list[str] = []
        self._query_vars: list[str] = []
        self._param_vars: list[str] = []  # {;name}: present without "=value" means ""
        pattern = ""
        position = 0
        query_started = False
        for match in _EXPRESSION.finditer(template):
            literal = template[position : match.start()]
            if query_started and literal:
                raise ValueError(f"query expressions must end the URI template {template!r}")
            pattern += re.escape(literal)
            position = match.end()
            operator = match.group(1)
            names = [name for name, _ in _varspecs(match.group(2), template)]
            for name in names:
                if name.startswith("__"):
                    raise ValueError(
                        f"variable names may not start with '__' ({name!r} in {template!r})"
                    )
                if name in self.variables:
                    raise ValueError(
                        f"variable {name!r} appears twice in URI template {template!r}"
                    )
                self.variables.append(name)
            if operator in ("?", "&"):
                self._query_vars.extend(names)
                if not query_started:
                    query_started = True
                    if operator == "?":
                        pattern += r"(?:\?(?P<__query>[^#]*))?"
                    else:  # continues a literal query: "...?fixed=1{&more}"
                        pattern += r"(?P<__query>(?:&[^#]*)?)"
                continue
            if query_started:
                raise ValueError(f"query expressions must end the URI template {template!r}")
            if operator == ";":
                # ;name=value, or just ;name for an empty value
                self._param_vars.extend(names)
                pattern += "".join(
                    rf"(?P<__p_{name}>;{name}(?:=(?P<{name}>[^/?#;]*))?)?" for name in names
                )
                continue
            value, first, separator = _MATCH[operator]
            # lazy, so that optional parts after the value (";x=", "?q=") are not swallowed
            pattern += re.escape(first) + re.escape(separator).join(
                f"(?P<{name}>{value}?)" for name in names
            )
        rest = template[position:]
        if query_started and rest:
            raise ValueError(f"query expressions must end the URI template {template!r}")
        pattern += re.escape(rest)
        self._regex = re.compile(pattern + r"\Z", re.DOTALL)

    @property
    def is_template(self) -> bool:
        """True if the template has at least one variable."""
        return bool(self.variables)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` if it matches the template, else ``None``.

        Values are percent-decoded. Query variables that the URI does not carry are absent;
        query parameters the template does not name are ignored.
        """
        found = self._regex.match(uri)
        if found is None:
            return None
        groups = found.groupdict()
        query = groups.pop("__query", None)
        present = {name: groups.pop(f"__p_{name}") is not None for name in self._param_vars}
        values = {name: unquote(value) for name, value in groups.items() if value is not None}
        for name in self._param_vars:  # ";name" without "=value" is the empty string
            if present[name]:
                values.setdefault(name, "")
        if query:
            for item in query.split("&"):
                if not item:
                    continue
                key, _, value = item.partition("=")
                key = unquote(key)
                if key in self._query_vars:
                    values[key] = unquote(value)
        return values

    def expand(self, **values: object) -> str:
        """Fill the template with ``values``.

        Query and ``;`` parameters whose value is missing (or ``None``) are left out; any
        other missing variable raises :class:`KeyError`. A ``{&b}`` that ends up starting the
        query (because a ``{?a}`` before it expanded to nothing) starts it with ``?``.
        """
        query_open = False

        def replace(match: re.Match[str]) -> str:
            nonlocal query_open
            operator = match.group(1)
            specs = _varspecs(match.group(2), self.template)
            if operator in ("?", "&", ";"):
                pairs = []
                for name, prefix in specs:
                    if values.get(name) is None:
                        continue
                    encoded = _encode(values[name], False, prefix)
                    pairs.append(f"{name}={encoded}" if encoded or operator != ";" else name)
                if not pairs:
                    return ""
                if operator == ";":
                    return "".join(";" + p for p in pairs)
                lead = (
                    "&"
                    if query_open or "?" in _EXPRESSION.sub("", self.template[: match.start()])
                    else "?"
                )
                query_open = True
                return lead + "&".join(pairs)
            reserved = operator in ("+", "#")
            parts = [_encode(values[name], reserved, prefix) for name, prefix in specs]
            _, first, separator = _MATCH[operator]
            return first + separator.join(parts)

        return _EXPRESSION.sub(replace, self.template)

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"
