"""The verifiers' HTTP calls to an authorization server: bounded, and silent about tokens."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import VerifierUnavailable

if TYPE_CHECKING:  # pragma: no cover
    import httpx

__all__ = ["MAX_DOCUMENT_BYTES", "new_client", "read_json"]

MAX_DOCUMENT_BYTES = 512 * 1024
"""The largest answer (metadata, JWKS, introspection) a verifier reads."""


def new_client(timeout: float) -> httpx.Client:
    """An ``httpx.Client`` for a verifier's own calls (the ``http`` extra)."""
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - the http extra is missing
        raise ImportError(
            "this verifier needs httpx: pip install 'mcp-sync-threaded[http]'"
        ) from exc
    return httpx.Client(timeout=timeout, follow_redirects=False)


def read_json(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    data: Mapping[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    what: str,
) -> tuple[int, Any]:
    """``(status, parsed JSON body)`` of one call; :class:`VerifierUnavailable` when the
    server cannot be reached, answers more than :data:`MAX_DOCUMENT_BYTES` or no JSON. The
    error names ``what`` and ``url``, never the request's body (it may carry a token)."""
    import httpx

    try:
        with client.stream(method, url, data=data, auth=auth) as response:
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise VerifierUnavailable(
                        f"{what} at {url} is larger than {MAX_DOCUMENT_BYTES} bytes"
                    )
            status = response.status_code
    except httpx.HTTPError as exc:
        raise VerifierUnavailable(f"{what} at {url} unreachable: {type(exc).__name__}") from None
    try:
        return status, json.loads(bytes(body))
    except ValueError:
        raise VerifierUnavailable(f"{what} at {url} answered HTTP {status} without JSON") from None
