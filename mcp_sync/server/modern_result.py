"""What every 2026-07-28 result carries besides its payload, added in one place.

At 2026-07-28 every result names its ``resultType`` (``"complete"`` unless the handler's
result already says otherwise, e.g. ``"input_required"``), SHOULD carry the server's identity
in ``_meta["io.modelcontextprotocol/serverInfo"]``, and a complete result of a cacheable
request (``server/discover``, the lists, ``resources/read``) MUST carry the caching hints
``ttlMs`` and ``cacheScope``. :func:`stamp_modern_result` adds them; the server session calls
it for every successful answer to a 2026-07-28 request (handshake-era results are left as
they are).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..lifecycle import SERVER_INFO_KEY

__all__ = [
    "CACHEABLE_METHODS",
    "RESULT_COMPLETE",
    "CacheHints",
    "CacheScope",
    "stamp_modern_result",
]

RESULT_COMPLETE = "complete"
"""The ``resultType`` of a final result."""

CACHEABLE_METHODS = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
"""The requests whose complete results carry ``ttlMs`` and ``cacheScope``."""

CacheScope = Literal["public", "private"]
"""Who may cache a result: any client or shared cache, or only the same authorization context."""


@dataclass(frozen=True)
class CacheHints:
    """The caching hints of cacheable results.

    Attributes:
        ttl_ms: how long (milliseconds, ``>= 0``) a client may consider the result fresh;
            ``0``: stale at once.
        scope: ``"private"`` (may hold user-specific data: never shared across authorization
            contexts) or ``"public"`` (any client or shared cache may reuse it).
    """

    ttl_ms: int = 0
    scope: CacheScope = "private"

    def __post_init__(self) -> None:
        if type(self.ttl_ms) is not int or self.ttl_ms < 0:
            raise ValueError(f"ttl_ms must be an int >= 0, not {self.ttl_ms!r}")
        if self.scope not in ("public", "private"):
            raise ValueError(f"cache_scope must be 'public' or 'private', not {self.scope!r}")


def stamp_modern_result(
    method: str, result: Any, *, server_info: Mapping[str, Any], cache: CacheHints
) -> Any:
    """``result`` (a 2026-07-28 answer to ``method``) with ``resultType``, the server's
    identity in ``_meta`` and, for a complete result of a cacheable method, the caching hints.

    What the result already holds is kept (a handler's own ``resultType``, ``_meta`` members,
    ``ttlMs``/``cacheScope``). A result that is not a JSON object is returned unchanged;
    ``result`` itself is never changed (a copy is returned).
    """
    if not isinstance(result, dict):
        return result
    out = dict(result)
    result_type = out.setdefault("resultType", RESULT_COMPLETE)
    meta = out.get("_meta")
    out["_meta"] = {**(meta if isinstance(meta, dict) else {})}
    out["_meta"].setdefault(SERVER_INFO_KEY, dict(server_info))
    if result_type == RESULT_COMPLETE and method in CACHEABLE_METHODS:
        out.setdefault("ttlMs", cache.ttl_ms)
        out.setdefault("cacheScope", cache.scope)
    return out
