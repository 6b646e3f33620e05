"""The JSON-RPC envelope: decode, encode, ids."""

from __future__ import annotations

import json

import pytest

from mcp_sync import jsonrpc
from mcp_sync.jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorResponse,
    InvalidMessage,
    Notification,
    Request,
    Response,
    decode,
    encode,
    id_key,
    is_valid_id,
    valid_id_key,
)


def assert_invalid(result, code: int, reply_id=None) -> InvalidMessage:
    assert isinstance(result, InvalidMessage), result
    assert result.reply is not None, f"no reply owed for {result!r}"
    assert result.reply.code == code
    assert result.reply.id == reply_id
    assert type(result.reply.id) is type(reply_id)
    # the reply is itself a well-formed error response
    wire = json.loads(encode(result.reply))
    assert wire["jsonrpc"] == "2.0"
    assert wire["id"] == reply_id
    assert wire["error"]["code"] == code
    return result


# -- parse errors -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b'{"jsonrpc": "2.0", "id": 1, "method": "x"',  # truncated
        b"{'jsonrpc': '2.0'}",  # single quotes
        b"",
        '{"jsonrpc":"2.0","id":1,"method":"x"} trailing',
    ],
)
def test_bad_json_is_parse_error_with_null_id(line):
    assert_invalid(decode(line), PARSE_ERROR, None)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
        b'{"jsonrpc":"2.0","id":1,"method":"a\xc3"}',  # truncated multi-byte sequence
        b"\xed\xa0\x80",  # encoded surrogate: not UTF-8
        b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}',  # encoded surrogate in a string
        '{"jsonrpc":"2.0","id":1,"method":"a"}'.encode("utf-16"),  # not UTF-8 at all
        '{"jsonrpc":"2.0","id":1,"method":"a"}'.encode("utf-32-le"),
    ],
)
def test_invalid_utf8_is_parse_error_with_null_id(line):
    result = assert_invalid(decode(line), PARSE_ERROR, None)
    assert result.reply.message == "Parse error"


# -- invalid requests -------------------------------------------------------------------------
def test_missing_method_is_invalid_request_echoing_id():
    assert_invalid(decode(b'{"jsonrpc":"2.0","id":4}'), INVALID_REQUEST, 4)
    assert_invalid(decode(b'{"jsonrpc":"2.0","id":"abc"}'), INVALID_REQUEST, "abc")


def test_method_must_be_a_string():
    assert_invalid(decode(b'{"jsonrpc":"2.0","id":4,"method":5}'), INVALID_REQUEST, 4)


@pytest.mark.parametrize(
    "raw_id",
    ["null", "true", "false", "7.0", "7.5", "1e3", "[1]", '{"a":1}'],
)
def test_invalid_request_ids(raw_id):
    line = f'{{"jsonrpc":"2.0","id":{raw_id},"method":"tools/list"}}'
    assert_invalid(decode(line), INVALID_REQUEST, None)


@pytest.mark.parametrize(
    "obj",
    [
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": 2.0, "id": 1, "method": "ping"},
        {"jsonrpc": None, "id": 1, "method": "ping"},
    ],
)
def test_wrong_or_missing_jsonrpc_version(obj):
    assert_invalid(decode(json.dumps(obj)), INVALID_REQUEST, 1)


@pytest.mark.parametrize(
    "line",
    [
        b"[]",
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]',
    ],
)
def test_batches_are_rejected(line):
    result = assert_invalid(decode(line), INVALID_REQUEST, None)
    assert "batch" in result.detail


@pytest.mark.parametrize("line", [b"1", b'"a string"', b"null", b"true", b"3.5"])
def test_non_object_is_invalid_request(line):
    assert_invalid(decode(line), INVALID_REQUEST, None)


def test_request_params_must_be_an_object():
    assert_invalid(
        decode(b'{"jsonrpc":"2.0","id":3,"method":"x","params":[1,2]}'), INVALID_REQUEST, 3
    )
    assert_invalid(
        decode(b'{"jsonrpc":"2.0","id":3,"method":"x","params":"s"}'), INVALID_REQUEST, 3
    )


def test_notification_with_bad_params_owes_no_reply():
    result = decode(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":[7]}')
    assert isinstance(result, InvalidMessage)
    assert result.reply is None


def test_malformed_responses_owe_no_reply():
    for line in [
        b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}',
        b'{"jsonrpc":"2.0","id":1,"error":"boom"}',
        b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}',
        b'{"jsonrpc":"2.0","id":1,"error":{"code":1}}',
        b'{"jsonrpc":"2.0","id":true,"error":{"code":1,"message":"m"}}',
        b'{"jsonrpc":"2.0","id":null,"result":{}}',
        b'{"jsonrpc":"2.0","id":1.5,"result":{}}',
        b'{"jsonrpc":"2.0","result":{}}',
    ]:
        result = decode(line)
        assert isinstance(result, InvalidMessage), line
        assert result.reply is None, line


# -- valid messages ---------------------------------------------------------------------------
def test_decode_request_keeps_id_type():
    as_str = decode(b'{"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"a":1}}')
    as_int = decode(b'{"jsonrpc":"2.0","id":7,"method":"tools/call"}')
    assert as_str == Request("7", "tools/call", {"a": 1})
    assert as_int == Request(7, "tools/call", None)
    assert type(as_str.id) is str
    assert type(as_int.id) is int
    assert id_key(as_str.id) != id_key(as_int.id)


def test_decode_large_and_negative_integer_ids():
    assert decode(b'{"jsonrpc":"2.0","id":-3,"method":"m"}') == Request(-3, "m")
    big = 2**70
    assert decode(f'{{"jsonrpc":"2.0","id":{big},"method":"m"}}') == Request(big, "m")
    assert decode(b'{"jsonrpc":"2.0","id":"","method":"m"}') == Request("", "m")


def test_decode_notification_and_responses():
    assert decode(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') == Notification(
        "notifications/initialized"
    )
    assert decode('{"jsonrpc":"2.0","id":"7","result":{"x":[1]}}') == Response("7", {"x": [1]})
    assert decode(b'{"jsonrpc":"2.0","id":7,"result":null}') == Response(7, None)
    err = decode(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}')
    assert err == ErrorResponse(None, -32700, "Parse error")
    err = decode(b'{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"bad","data":{"k":1}}}')
    assert err == ErrorResponse(2, -32602, "bad", {"k": 1})


def test_decode_accepts_str_and_bytes_alike():
    text = '{"jsonrpc":"2.0","id":1,"method":"écho","params":{"t":"日本"}}'
    assert decode(text) == decode(text.encode("utf-8")) == Request(1, "écho", {"t": "日本"})


# -- ids --------------------------------------------------------------------------------------
def test_is_valid_id():
    assert is_valid_id(7)
    assert is_valid_id("7")
    assert is_valid_id(0)
    for bad in (True, False, None, 7.0, 7.5, [7], {"id": 7}):
        assert not is_valid_id(bad), bad


def test_id_key_separates_types():
    keys = {id_key(7), id_key("7"), id_key(1), id_key("1")}
    assert len(keys) == 4
    assert id_key(7) == id_key(7)
    assert id_key("7") == id_key("7")
    registry = {id_key(7): "int", id_key("7"): "str"}
    assert registry[id_key(7)] == "int"
    assert registry[id_key("7")] == "str"


def test_valid_id_key_is_id_key_of_a_valid_id_and_none_otherwise():
    for value in (7, 0, -1, "7", "", True, False, None, 7.0, [7], {"id": 7}):
        expected = id_key(value) if is_valid_id(value) else None  # type: ignore[arg-type]
        assert valid_id_key(value) == expected, value


# -- encode -----------------------------------------------------------------------------------
def test_encode_is_one_line_even_with_newlines_in_strings():
    message = Request(
        1, "tools/call", {"text": "line one\nline two\r\nend\n", "k\n": "\u2028\u2029"}
    )
    data = encode(message)
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1
    assert b"\r" not in data
    assert decode(data.rstrip(b"\n")) == message


def test_encode_is_utf8_without_escapes():
    data = encode(Notification("notifications/message", {"data": "héllo 日本 😀"}))
    assert "héllo 日本 😀".encode() in data
    assert json.loads(data)["params"]["data"] == "héllo 日本 😀"


def test_encode_lone_surrogate():
    message = Response(3, {"text": "bad \ud800 half"})
    data = encode(message)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    data.decode("utf-8")  # valid UTF-8 on the wire
    assert b"\\ud800" in data
    assert decode(data.rstrip(b"\n")) == message


def test_encode_round_trips_every_message_kind():
    for message in [
        Request(5, "ping"),
        Request("x", "tools/call", {"name": "n"}),
        Notification("notifications/cancelled", {"requestId": 5, "reason": "r"}),
        Response(5, {}),
        ErrorResponse(5, -32601, "Method not found"),
        ErrorResponse(None, -32700, "Parse error", {"detail": 1}),
    ]:
        assert decode(encode(message).rstrip(b"\n")) == message


def test_encode_dict_and_error_object():
    assert encode({"jsonrpc": "2.0", "method": "m"}) == b'{"jsonrpc":"2.0","method":"m"}\n'
    assert jsonrpc.error_object(-32602, "bad") == {"code": -32602, "message": "bad"}
    assert jsonrpc.error_object(-32602, "bad", [1]) == {
        "code": -32602,
        "message": "bad",
        "data": [1],
    }
    wire = json.loads(encode(ErrorResponse(1, -32602, "bad")))
    assert "data" not in wire["error"]


@pytest.mark.parametrize(
    "text",
    ["x" * 200_000, "é" * 70_000, "日本 😀 " * 20_000, 'quotes " and \\ back\tslash\n' * 5_000, ""],
)
def test_encode_large_strings_exactly(text):
    """Large tool arguments and results (the fast serializer path) encode to exactly the JSON
    that the standard library writes, and decode back unchanged."""
    message = Request(1, "tools/call", {"name": "echo", "arguments": {"text": text}})
    data = encode(message)
    assert (
        data
        == (
            json.dumps(message.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n"
        ).encode()
    )
    assert decode(data.rstrip(b"\n")) == message


def test_encode_never_writes_nan_or_infinity():
    """NaN and infinities are not JSON: they go on the wire as null, so the peer can parse
    the message."""
    data = encode(Response(1, {"values": [float("nan"), float("inf"), -float("inf"), 1.5]}))
    assert json.loads(data, parse_constant=lambda name: pytest.fail(f"{name} on the wire")) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"values": [None, None, None, 1.5]},
    }


def test_encode_models_inside_messages_by_their_wire_names():
    """A pydantic model placed in a message is written with its aliases (camelCase, ``_meta``),
    exactly as pydantic-core's own ``to_json`` writes it."""
    import mcp_types
    from pydantic_core import to_json

    result = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="hi")],
        is_error=True,
        structured_content={"a": 1},
    )
    data = encode(Response(7, result))
    assert data == to_json({"jsonrpc": "2.0", "id": 7, "result": result}) + b"\n"
    wire = json.loads(data)["result"]
    assert wire["isError"] is True and wire["structuredContent"] == {"a": 1}
    assert "is_error" not in wire and "structured_content" not in wire
