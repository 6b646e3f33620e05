"""The one place that makes a 2026-07-28 result: resultType, serverInfo, caching hints."""

from __future__ import annotations

import pytest

from mcp_sync import Server
from mcp_sync.lifecycle import SERVER_INFO_KEY
from mcp_sync.server.modern_result import (
    CACHEABLE_METHODS,
    CacheHints,
    stamp_modern_result,
)

INFO = {"name": "demo", "version": "1.2.3"}
HINTS = CacheHints(60_000, "public")


@pytest.mark.parametrize("method", sorted(CACHEABLE_METHODS))
def test_a_cacheable_complete_result_gets_every_member(method):
    result = stamp_modern_result(method, {"tools": []}, server_info=INFO, cache=HINTS)
    assert result == {
        "tools": [],
        "resultType": "complete",
        "_meta": {SERVER_INFO_KEY: INFO},
        "ttlMs": 60_000,
        "cacheScope": "public",
    }


@pytest.mark.parametrize("method", ["tools/call", "prompts/get", "completion/complete", "x/custom"])
def test_other_results_get_no_caching_hints(method):
    result = stamp_modern_result(method, {"content": []}, server_info=INFO, cache=HINTS)
    assert result == {"content": [], "resultType": "complete", "_meta": {SERVER_INFO_KEY: INFO}}


def test_what_the_handler_set_is_kept_and_its_dict_untouched():
    given = {
        "resultType": "input_required",
        "inputRequests": {},
        "_meta": {"com.example/trace": "t", SERVER_INFO_KEY: {"name": "own"}},
    }
    before = {**given, "_meta": dict(given["_meta"])}
    result = stamp_modern_result("resources/read", given, server_info=INFO, cache=HINTS)
    assert result["resultType"] == "input_required"
    # an interim input_required result is not cacheable: no hints
    assert "ttlMs" not in result and "cacheScope" not in result
    assert result["_meta"] == {"com.example/trace": "t", SERVER_INFO_KEY: {"name": "own"}}
    assert given == before
    own = stamp_modern_result(
        "resources/read", {"contents": [], "ttlMs": 5}, server_info=INFO, cache=HINTS
    )
    assert (own["ttlMs"], own["cacheScope"]) == (5, "public")


def test_a_non_object_result_is_left_alone():
    assert stamp_modern_result("x/custom", [1, 2], server_info=INFO, cache=HINTS) == [1, 2]


@pytest.mark.parametrize(
    "ttl, scope", [(-1, "private"), (1.5, "private"), (True, "private"), (0, "shared")]
)
def test_bad_hints_are_refused_when_the_server_is_made(ttl, scope):
    with pytest.raises(ValueError):
        Server("x", ttl_ms=ttl, cache_scope=scope)


def test_server_defaults_are_stale_at_once_and_private():
    assert Server("x").cache_hints == CacheHints(0, "private")
    assert Server("x", ttl_ms=10, cache_scope="public").cache_hints == CacheHints(10, "public")
