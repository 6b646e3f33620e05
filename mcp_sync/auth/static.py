"""A verifier for a fixed set of tokens, for simple deployments and tests."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping

from ..errors import InvalidToken
from ..principal import Principal

__all__ = ["StaticTokenVerifier"]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class StaticTokenVerifier:
    """Accepts the tokens of a fixed table, each standing for its :class:`Principal`.

    The presented token is compared with every known one in constant time
    (:func:`hmac.compare_digest` over SHA-256 digests, so neither the length nor the first
    differing byte shows in the time taken), and the table keeps only the digests.

    Each principal's ``audience`` must name the app's resource (the guard checks it), and a
    principal whose ``expires_at`` has passed is refused.
    """

    def __init__(
        self, tokens: Mapping[str, Principal], *, clock: Callable[[], float] = time.time
    ) -> None:
        if not tokens:
            raise ValueError("give at least one token")
        self._table = [(_digest(token), principal) for token, principal in tokens.items()]
        self._clock = clock

    def __call__(self, token: str) -> Principal:
        """The principal of ``token``; :class:`~mcp_sync.principal.InvalidToken` if unknown
        or expired."""
        presented = _digest(token)
        found: Principal | None = None
        for digest, principal in self._table:  # no early exit: every entry is compared
            if hmac.compare_digest(digest, presented):
                found = principal
        if found is None:
            raise InvalidToken("the access token is not known")
        if found.expires_at is not None and found.expires_at <= self._clock():
            raise InvalidToken("the access token has expired")
        return found
