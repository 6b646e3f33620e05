"""The pagination cursor and ``paginate`` without a session: the cursor is opaque to clients
and comes back from them, so a tampered, negative or garbage one must be an invalid-params
error (-32602), never another exception and never a wrong page."""

from __future__ import annotations

import base64
import json
import random

import pytest

from mcp_sync.errors import McpError
from mcp_sync.jsonrpc import INVALID_PARAMS
from mcp_sync.server import Server
from mcp_sync.server.pagination import decode_cursor, encode_cursor, paginate


def cursor_of(payload: object) -> str:
    """A cursor made the way this library makes them, around any JSON payload."""
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()


def assert_invalid(cursor: object) -> None:
    with pytest.raises(McpError) as info:
        decode_cursor(cursor)
    assert info.value.code == INVALID_PARAMS
    assert info.value.message == "Invalid cursor"


# -- the cursor -----------------------------------------------------------------------------------
@pytest.mark.parametrize("offset", [0, 1, 99, 100, 2**40])
def test_a_cursor_round_trips_its_offset(offset):
    cursor = encode_cursor(offset)
    assert isinstance(cursor, str) and cursor.isascii()
    assert decode_cursor(cursor) == offset


def test_no_cursor_is_the_first_page():
    assert decode_cursor(None) == 0


def test_a_cursor_is_url_safe_text():
    for offset in range(0, 5000, 37):
        assert set(encode_cursor(offset)) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_="
        )


@pytest.mark.parametrize("offset", [-1, -100])
def test_a_negative_offset_is_invalid(offset):
    assert_invalid(cursor_of({"o": offset}))


@pytest.mark.parametrize("offset", [True, False, 1.0, 1.5, "1", None, [1], {"o": 1}])
def test_an_offset_that_is_not_an_integer_is_invalid(offset):
    assert_invalid(cursor_of({"o": offset}))


@pytest.mark.parametrize("payload", [{}, {"offset": 1}, [1], 1, "o", None])
def test_a_payload_without_the_offset_is_invalid(payload):
    assert_invalid(cursor_of(payload))


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not a cursor",
        "eyJvIjogMX0",
        "%%%%",
        "e30=" * 3,
        "\u00e9t\u00e9",
        "\x00",
        5,
        2.5,
        ["x"],
        {"o": 1},
        b"eyJvIjogMX0=",
    ],
)
def test_garbage_is_invalid(cursor):
    assert_invalid(cursor)


def test_a_cursor_that_is_not_json_is_invalid():
    assert_invalid(base64.urlsafe_b64encode(b"\xff\xfe not json").decode())
    assert_invalid(base64.urlsafe_b64encode(b'{"o": 1').decode())


def test_tampering_gives_an_error_or_a_valid_offset_never_another_exception():
    rng = random.Random(12)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/ "
    for offset in (0, 3, 100, 12345):
        cursor = encode_cursor(offset)
        for _ in range(400):
            chars = list(cursor)
            for _ in range(rng.randint(1, 3)):
                chars[rng.randrange(len(chars))] = rng.choice(alphabet)
            tampered = "".join(chars)
            try:
                decoded = decode_cursor(tampered)
            except McpError as exc:
                assert exc.code == INVALID_PARAMS
            else:
                assert type(decoded) is int and decoded >= 0, tampered


# -- paginate -------------------------------------------------------------------------------------
ITEMS = [f"item{n}" for n in range(7)]


def walk(items: list[str], page_size: int) -> list[list[str]]:
    """Every page a client gets by following ``nextCursor`` (bounded)."""
    pages: list[list[str]] = []
    params: dict[str, object] = {}
    for _ in range(len(items) + 2):
        result = paginate(items, params, page_size, "things")
        assert set(result) <= {"things", "nextCursor"}
        pages.append(result["things"])
        if "nextCursor" not in result:
            return pages
        params = {"cursor": result["nextCursor"]}
    raise AssertionError(f"pagination did not end: {pages}")


@pytest.mark.parametrize("page_size", [1, 2, 3, 6, 7, 8, 100])
def test_following_next_cursor_yields_every_item_once_in_order(page_size):
    pages = walk(ITEMS, page_size)
    assert [item for page in pages for item in page] == ITEMS
    assert all(len(page) == page_size for page in pages[:-1])
    assert 1 <= len(pages[-1]) <= page_size


def test_an_exact_page_boundary_has_no_next_cursor():
    assert paginate(ITEMS[:4], {}, 4, "tools") == {"tools": ITEMS[:4]}
    assert paginate(ITEMS[:4], {"cursor": encode_cursor(2)}, 2, "tools") == {"tools": ITEMS[2:4]}


def test_the_next_cursor_points_after_the_page():
    result = paginate(ITEMS, {"cursor": encode_cursor(2)}, 3, "tools")
    assert result["tools"] == ITEMS[2:5]
    assert decode_cursor(result["nextCursor"]) == 5


def test_an_empty_list_is_one_empty_page():
    assert paginate([], {}, 10, "prompts") == {"prompts": []}


def test_a_cursor_past_the_end_is_an_empty_last_page():
    assert paginate(ITEMS, {"cursor": encode_cursor(len(ITEMS) + 50)}, 3, "tools") == {"tools": []}


def test_a_null_cursor_param_is_the_first_page():
    assert paginate(ITEMS, {"cursor": None}, 3, "tools")["tools"] == ITEMS[:3]


def test_paginate_raises_invalid_params_for_a_bad_cursor():
    with pytest.raises(McpError) as info:
        paginate(ITEMS, {"cursor": cursor_of({"o": -3})}, 3, "tools")
    assert info.value.code == INVALID_PARAMS


def test_paginate_does_not_change_the_list():
    items = list(ITEMS)
    page = paginate(items, {}, 3, "tools")["tools"]
    page.append("extra")
    assert items == ITEMS


@pytest.mark.parametrize("page_size", [0, -1])
def test_a_page_size_below_one_is_refused(page_size):
    with pytest.raises(ValueError, match="page_size must be at least 1"):
        Server("pages", page_size=page_size)


def test_a_page_size_of_one_is_accepted():
    assert Server("pages", page_size=1).page_size == 1
