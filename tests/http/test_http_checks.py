"""The request checks of ``mcp_sync.http.checks``, without a server."""

from __future__ import annotations

import io

import pytest

from mcp_sync.http.checks import (
    HostAllowList,
    Refusal,
    check_content_type,
    media_type,
    parse_host,
    read_body,
)


# -- media types -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("application/json", "application/json"),
        ("Application/JSON; charset=utf-8", "application/json"),
        ("  application/json  ;q=1", "application/json"),
        ("text/plain; charset=application/json", "text/plain"),
        ("application/json garbage", ""),
        ("application/", ""),
        ("/json", ""),
        ("application/json/x", ""),
        ("", ""),
        (None, ""),
    ],
)
def test_media_type_is_the_type_and_subtype_only(value, expected):
    assert media_type(value) == expected


def test_only_application_json_passes_the_content_type_check():
    assert check_content_type("application/json; charset=utf-8") is None
    for value in (
        "text/plain; charset=application/json",
        "application/jsonx",
        None,
        "application/json-seq",
    ):
        refusal = check_content_type(value)
        assert isinstance(refusal, Refusal) and refusal.status.startswith("415"), value


# -- Host ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("localhost", ("localhost", None)),
        ("LocalHost:8000", ("localhost", 8000)),
        ("localhost.:80", ("localhost", 80)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:8000", ("::1", 8000)),
        ("[::1]", ("::1", None)),
        ("[::1]x", None),
        ("[::1", None),
        ("::1", None),  # an IPv6 literal needs brackets in Host
        ("host:port", None),
        ("host:99999", None),
        ("host:+80", None),
        ("host:\u00b280", None),
        ("ho st", None),
        ("host/x", None),
        ("user@host", None),
        ("", None),
        (":80", None),
    ],
)
def test_parse_host(value, expected):
    assert parse_host(value) == expected


def test_the_host_allow_list():
    loopback_only = HostAllowList()
    for host in ("localhost", "localhost:1234", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST", None):
        assert loopback_only.allows(host), host
    for host in ("evil.example", "localhost.evil.example", "127.0.0.2", "[::2]", "not a host", ""):
        assert not loopback_only.allows(host), host
    configured = HostAllowList(["mcp.example", "api.example:8443", "[2001:db8::1]"])
    assert configured.allows("mcp.example:1") and configured.allows("MCP.example")
    assert configured.allows("api.example:8443") and not configured.allows("api.example:8444")
    assert not configured.allows("api.example")  # a port was named: only that one
    assert configured.allows("[2001:db8::1]:80")
    assert configured.allows("localhost:9")  # loopback names stay allowed
    assert HostAllowList(["*"]).allows("anything.example:1")
    with pytest.raises(ValueError):
        HostAllowList(["not a host"])


# -- bodies ----------------------------------------------------------------------------------------
class Endless(io.RawIOBase):
    """A body that never ends (a hostile chunked upload); counts what was read from it."""

    def __init__(self) -> None:
        self.served = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        buffer[:] = b"x" * len(buffer)
        self.served += len(buffer)
        return len(buffer)


class Stalled(io.RawIOBase):
    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        raise TimeoutError("timed out")


def environ(body: io.RawIOBase | bytes, **entries: object) -> dict:
    stream = io.BytesIO(body) if isinstance(body, bytes) else body
    return {"wsgi.input": stream, **entries}


def test_a_content_length_body_is_read_exactly():
    assert read_body(environ(b'{"a": 1}trailing', CONTENT_LENGTH="8"), 100) == b'{"a": 1}'
    assert read_body(environ(b""), 100) == b""
    assert read_body(environ(b"", CONTENT_LENGTH=""), 100) == b""


@pytest.mark.parametrize("value", ["-1", "abc", "1_0", "+5", " 5", "\u00b2", "1e3"])
def test_an_invalid_content_length_is_411(value):
    refusal = read_body(environ(b"12345", CONTENT_LENGTH=value), 100)
    assert isinstance(refusal, Refusal) and refusal.status.startswith("411"), value


def test_a_content_length_over_the_cap_is_413_before_reading():
    stream = Endless()
    refusal = read_body(environ(stream, CONTENT_LENGTH="101"), 100)
    assert isinstance(refusal, Refusal) and refusal.status.startswith("413")
    assert stream.served == 0
    huge = read_body(environ(Endless(), CONTENT_LENGTH="9" * 5000), 100)
    assert isinstance(huge, Refusal) and huge.status.startswith("413")


def test_a_chunked_body_without_input_terminated_is_411():
    refusal = read_body(
        environ(b'7\r\n{"a":1}\r\n0\r\n\r\n', HTTP_TRANSFER_ENCODING="chunked"), 100
    )
    assert isinstance(refusal, Refusal) and refusal.status.startswith("411")


def test_a_terminated_body_is_read_to_its_end():
    body = read_body(
        environ(b'{"a": 1}', HTTP_TRANSFER_ENCODING="chunked", **{"wsgi.input_terminated": True}),
        100,
    )
    assert body == b'{"a": 1}'
    exactly_the_cap = read_body(environ(b"x" * 100, **{"wsgi.input_terminated": True}), 100)
    assert exactly_the_cap == b"x" * 100


def test_a_terminated_body_over_the_cap_is_413_and_reads_only_past_the_cap():
    stream = Endless()
    refusal = read_body(
        environ(stream, HTTP_TRANSFER_ENCODING="chunked", **{"wsgi.input_terminated": True}), 1000
    )
    assert isinstance(refusal, Refusal) and refusal.status.startswith("413")
    assert 1000 < stream.served <= 1001 + 65536


def test_a_body_that_stops_arriving_is_408():
    refusal = read_body(environ(Stalled(), CONTENT_LENGTH="10"), 100)
    assert isinstance(refusal, Refusal) and refusal.status.startswith("408")
