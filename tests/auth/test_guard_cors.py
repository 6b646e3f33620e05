"""CORS on a guarded endpoint, under the embedded server: a browser's preflight (sent without
credentials) gets the CORS answer an unguarded app gives, never the guard's 401; the 401 of a
request without a token stays, and its challenge is readable cross-origin; the protected
resource metadata is readable from any origin."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from guarded import TOKENS, bearer, challenge, guarded_server, initialize
from support.messages import initialize_request
from support.waiting import WAIT

from mcp_sync.http import McpWsgiApp, serve_http
from mcp_sync.http.bearer import METADATA_PATH

ORIGIN = "https://app.example.test"

Site = Callable[..., str]


@pytest.fixture
def site() -> Iterator[Site]:
    """``site(guarded=..., **app options)``: the URL of an app at /mcp on the embedded server."""
    stops: list[Callable[[], Any]] = []

    def start(*, guarded: bool, **options: Any) -> str:
        holder: list[McpWsgiApp] = []

        def lazy(environ, start_response):  # type: ignore[no-untyped-def]
            return holder[0](environ, start_response)

        handle = serve_http(lazy, "127.0.0.1", 0)
        stops.append(handle.stop)
        url = f"http://127.0.0.1:{handle.port}/mcp"
        auth = bearer(url) if guarded else None
        app = McpWsgiApp(guarded_server(), path="/mcp", auth=auth, **options)
        holder.append(app)
        stops.append(app.close)
        return url

    yield start
    for stop in reversed(stops):
        stop()


def preflight(url: str, origin: str = ORIGIN) -> httpx.Response:
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
    }
    return httpx.request("OPTIONS", url, headers=headers, timeout=WAIT)


def cors_of(response: httpx.Response) -> dict[str, str]:
    return {
        name: value for name, value in response.headers.items() if name.startswith("access-control")
    }


def exposed(response: httpx.Response) -> set[str]:
    header = response.headers.get("Access-Control-Expose-Headers", "")
    return {name.strip().lower() for name in header.split(",") if name.strip()}


def test_a_preflight_to_a_guarded_endpoint_gets_the_unguarded_cors_answer(site: Site) -> None:
    options = {"cors": True, "allowed_origins": [ORIGIN]}
    guarded = preflight(site(guarded=True, **options))
    unguarded = preflight(site(guarded=False, **options))
    assert guarded.status_code == unguarded.status_code == 204
    assert "WWW-Authenticate" not in guarded.headers
    assert cors_of(guarded) == cors_of(unguarded)
    assert guarded.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "POST" in guarded.headers["Access-Control-Allow-Methods"]
    allowed = {h.strip() for h in guarded.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "mcp-protocol-version"} <= allowed


def test_without_cors_a_preflight_gets_the_405_of_any_options_not_401(site: Site) -> None:
    guarded = preflight(site(guarded=True, allowed_origins=[ORIGIN]))
    unguarded = preflight(site(guarded=False, allowed_origins=[ORIGIN]))
    assert guarded.status_code == unguarded.status_code == 405
    assert "WWW-Authenticate" not in guarded.headers
    assert cors_of(guarded) == cors_of(unguarded) == {}


def test_a_preflight_from_a_refused_origin_gets_403(site: Site) -> None:
    answer = preflight(site(guarded=True, cors=True), origin="https://evil.example.test")
    assert answer.status_code == 403
    assert "Access-Control-Allow-Origin" not in answer.headers


def test_a_post_without_a_token_is_still_401_and_its_challenge_is_readable(site: Site) -> None:
    url = site(guarded=True, cors=True, allowed_origins=[ORIGIN])
    answer = httpx.post(
        url,
        json=initialize_request(0),
        headers={"Origin": ORIGIN, "Accept": "application/json"},
        timeout=WAIT,
    )
    assert answer.status_code == 401
    assert challenge(answer)["resource_metadata"].endswith(METADATA_PATH + "/mcp")
    assert answer.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "www-authenticate" in exposed(answer)


def test_an_authorized_answer_exposes_the_session_id(site: Site) -> None:
    url = site(guarded=True, cors=True, allowed_origins=[ORIGIN])
    answer = httpx.post(
        url,
        json=initialize_request(0),
        headers={
            "Origin": ORIGIN,
            "Accept": "application/json",
            "Authorization": f"Bearer {TOKENS['valid']}",
        },
        timeout=WAIT,
    )
    assert answer.status_code == 200 and answer.headers["Mcp-Session-Id"]
    assert answer.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert {"mcp-session-id", "mcp-protocol-version"} <= exposed(answer)


def test_without_cors_answers_carry_no_cors_headers(site: Site) -> None:
    url = site(guarded=True, allowed_origins=[ORIGIN])
    assert initialize(url, "valid").status_code == 200
    answer = httpx.post(url, json=initialize_request(0), headers={"Origin": ORIGIN}, timeout=WAIT)
    assert answer.status_code == 401 and cors_of(answer) == {}


def test_the_metadata_document_is_readable_from_any_origin(site: Site) -> None:
    url = site(guarded=True, cors=True, allowed_origins=[ORIGIN])
    metadata = url.replace("/mcp", METADATA_PATH + "/mcp")
    answer = httpx.get(metadata, headers={"Origin": ORIGIN}, timeout=WAIT)
    assert answer.status_code == 200 and answer.json()["resource"] == url
    assert answer.headers.get_list("Access-Control-Allow-Origin") == ["*"]
    asked = preflight(metadata)
    assert asked.status_code == 204
    assert asked.headers["Access-Control-Allow-Origin"] == "*"
    assert "mcp-protocol-version" in asked.headers["Access-Control-Allow-Headers"]
