"""Parse the ``Bearer`` challenge of a ``WWW-Authenticate`` header (RFC 6750 section 3,
RFC 9728 section 5.1): ``resource_metadata``, ``scope``, ``error``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BearerChallenge", "parse_challenge"]

_PARAM = re.compile(r'\s*([A-Za-z0-9_.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*))\s*,?')
_SCHEME = re.compile(r"\s*([A-Za-z0-9_.-]+)(?:\s+|$)")
MAX_HEADER_CHARS = 8192
"""Longest ``WWW-Authenticate`` value parsed; the rest is ignored."""


@dataclass(frozen=True)
class BearerChallenge:
    """What a 401 or 403 asked for (every field ``None`` when the header said nothing)."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None

    @property
    def scopes(self) -> tuple[str, ...]:
        """``scope`` split on spaces."""
        return tuple(self.scope.split()) if self.scope else ()


def _params(text: str) -> tuple[str | None, dict[str, str]]:
    scheme_match = _SCHEME.match(text)
    if scheme_match is None or "=" in scheme_match.group(0):
        return None, {}
    params: dict[str, str] = {}
    pos = scheme_match.end()
    while pos < len(text):
        match = _PARAM.match(text, pos)
        if match is None or match.end() == pos:
            break
        quoted, bare = match.group(2), match.group(3)
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        params.setdefault(match.group(1).lower(), value)
        pos = match.end()
    return scheme_match.group(1).lower(), params


def parse_challenge(headers: Iterable[str]) -> BearerChallenge:
    """The first ``Bearer`` challenge among the ``WWW-Authenticate`` header values (an
    empty :class:`BearerChallenge` when there is none)."""
    for header in headers:
        scheme, params = _params(header[:MAX_HEADER_CHARS])
        if scheme == "bearer":
            return BearerChallenge(
                resource_metadata=params.get("resource_metadata") or None,
                scope=params.get("scope") or None,
                error=params.get("error") or None,
                error_description=params.get("error_description") or None,
            )
    return BearerChallenge()
