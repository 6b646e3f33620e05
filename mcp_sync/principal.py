"""Who is asking: the authenticated identity behind a request, and what makes one of a token.

A :class:`Principal` is what a token verifier makes of a valid access token. The HTTP app
puts it on each request it authenticates (see :class:`~mcp_sync.http.bearer.BearerAuth`),
handlers read it as :attr:`ctx.principal <mcp_sync.context.Context.principal>` (``None``
where the transport authenticates nobody, e.g. stdio), and tasks are visible only to the
principal that created them (:attr:`Principal.key`).

A :class:`TokenVerifier` is anything callable as ``verifier(token) -> Principal``: it raises
:class:`~mcp_sync.errors.InvalidToken` (or returns ``None``) for a token it does not
accept, and :class:`~mcp_sync.errors.VerifierUnavailable` when it cannot decide right now (its authorization server is
unreachable). Ready-made ones are in :mod:`mcp_sync.auth`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["Principal", "TokenVerifier"]


@dataclasses.dataclass(frozen=True)
class Principal:
    """An authenticated identity.

    Attributes:
        subject: the stable id of the user or client (the token's ``sub``, or its client id
            for a machine-to-machine token). Two requests with the same ``subject`` (and
            ``issuer``) are the same requestor.
        scopes: the scopes the token grants.
        client_id: the OAuth client the token was issued to, if known.
        audience: the resources the token was issued for.
        expires_at: when the token expires, seconds since the epoch (``None``: not known).
        issuer: the authorization server that issued the token (its ``iss``), if known.
        claims: the rest of what the verifier learned (never the token itself).
    """

    subject: str
    scopes: frozenset[str] = frozenset()
    client_id: str | None = None
    audience: tuple[str, ...] = ()
    expires_at: float | None = None
    issuer: str | None = None
    claims: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def has_scopes(self, required: frozenset[str] | set[str] | tuple[str, ...]) -> bool:
        """``True`` when every scope in ``required`` was granted."""
        return set(required) <= self.scopes

    @property
    def key(self) -> str:
        """The requestor as one string: the same user (``issuer`` and ``subject``) gives the
        same key, whatever token, client or scopes it comes with. A 2025-11-25 HTTP session
        is bound to the key of the principal that created it; task stores use it as the
        owner of a task."""
        return json.dumps([self.issuer, self.subject], separators=(",", ":"))


@runtime_checkable
class TokenVerifier(Protocol):
    """What turns a bearer token into a :class:`Principal`.

    Called from many WSGI threads at once: implementations must be thread-safe. Return the
    principal, or raise :class:`~mcp_sync.errors.InvalidToken` (returning ``None`` means the
    same); :class:`~mcp_sync.errors.VerifierUnavailable` when the answer cannot be known now.
    """

    def __call__(self, token: str) -> Principal | None:
        """The principal the token stands for (``None``: not accepted)."""
        ...  # pragma: no cover
