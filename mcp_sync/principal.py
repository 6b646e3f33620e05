"""Who is asking: the authenticated identity behind a request.

A :class:`Principal` is what a token verifier makes of a valid access token. The HTTP app
puts it on each request it authenticates, handlers read it as ``ctx.principal`` (``None``
where the transport authenticates nobody, e.g. stdio), and tasks are visible only to the
principal that created them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["Principal"]


@dataclasses.dataclass(frozen=True)
class Principal:
    """An authenticated identity.

    Attributes:
        subject: the stable id of the user or client (the token's ``sub``, or its client id
            for a machine-to-machine token). Two requests with the same ``subject`` are the
            same requestor.
        scopes: the scopes the token grants.
        client_id: the OAuth client the token was issued to, if known.
        audience: the resources the token was issued for.
        expires_at: when the token expires, seconds since the epoch (``None``: not known).
        claims: the rest of what the verifier learned (never the token itself).
    """

    subject: str
    scopes: frozenset[str] = frozenset()
    client_id: str | None = None
    audience: tuple[str, ...] = ()
    expires_at: float | None = None
    claims: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def has_scopes(self, required: frozenset[str] | set[str] | tuple[str, ...]) -> bool:
        """``True`` when every scope in ``required`` was granted."""
        return set(required) <= self.scopes
