"""End to end: mcp_sync.auth's OAuth client against a real authorization server on loopback
(authlib, tests/support/oauth_server.py) protecting a real mcp_sync HTTP server.

The test plays the browser: ``open_url`` GETs the authorization URL and follows the
redirect to the client's loopback listener.
"""

from __future__ import annotations

import _thread
import logging
import os
import stat
import threading
from pathlib import Path

import httpx
import pytest
from support.oauth_server import AuthServer, protected_mcp
from support.oauth_server import Client as Registered
from support.waiting import WAIT, wait_event, wait_until

from mcp_sync import Client
from mcp_sync.auth import (
    FileTokenStore,
    MemoryTokenStore,
    OAuth,
    OAuthClientCredentials,
    TokenSet,
)
from mcp_sync.errors import (
    AuthorizationCancelled,
    AuthorizationDenied,
    AuthorizationRejected,
    AuthorizationTimeout,
    DiscoveryError,
    InsufficientScope,
    RegistrationError,
    TokenEndpointError,
)

pytestmark = pytest.mark.timeout(60)


def browser(url: str) -> None:
    """Approve: follow the authorization server's redirect to the loopback listener."""
    with httpx.Client(timeout=WAIT) as http:
        answer = http.get(url, follow_redirects=True)
        assert answer.status_code == 200, answer.text


def oauth(**options: object) -> OAuth:
    return OAuth(open_url=browser, authorize_timeout=WAIT, timeout=WAIT, **options)  # type: ignore[arg-type]


@pytest.fixture
def auth_server() -> AuthServer:
    with AuthServer() as server:
        yield server


def test_authorization_code_with_pkce_through_the_loopback_redirect(auth_server):
    with protected_mcp(auth_server) as (url, app):
        auth = oauth()
        with auth, Client.http(url, auth=auth) as client:
            assert {tool.name for tool in client.list_tools()} == {"read_notes", "write_note"}
            assert client.call_tool("read_notes").is_error is False
    assert auth_server.grants == {"authorization_code": 1}
    assert auth_server.registrations == 1  # dynamic registration: no client_id was given
    (asked,) = auth_server.authorize_requests
    assert asked["code_challenge_method"] == "S256" and asked["code_challenge"]
    assert asked["resource"] == url and asked["scope"] == "notes:read"
    assert asked["redirect_uri"].startswith("http://127.0.0.1:")
    assert auth_server.token_resources == [url]
    assert app.refused[401] == 1


def test_an_expired_access_token_is_refreshed_on_401(auth_server):
    with protected_mcp(auth_server) as (url, _app):
        auth = oauth()
        with auth, Client.http(url, auth=auth) as client:
            client.list_tools()
            auth_server.expire_all()
            client.list_tools()
    assert auth_server.grants == {"authorization_code": 1, "refresh_token": 1}
    assert auth_server.token_resources[-1] == url


def test_sixteen_threads_share_one_client_during_a_refresh(auth_server):
    with protected_mcp(auth_server) as (url, app):
        auth = oauth()
        with auth, Client.http(url, auth=auth) as client:
            client.list_tools()
            # the server expires the token behind the client's back, and holds the refresh
            # until all 16 requests have met it: each gets a 401, and they share one refresh
            auth_server.expire_all()
            auth_server.before_token = lambda grant: (
                wait_until(lambda: app.refused[401] >= 17, "16 refused requests")
                if grant == "refresh_token"
                else None
            )
            barrier = threading.Barrier(16)
            errors: list[BaseException] = []

            def work() -> None:
                try:
                    barrier.wait(WAIT)
                    client.call_tool("read_notes", timeout=WAIT * 2)
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=work) for _ in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(WAIT * 4)
            assert not errors
    assert auth_server.grants == {"authorization_code": 1, "refresh_token": 1}
    assert auth.refreshes == 1
    assert app.refused[401] == 17  # the first connection's, then each of the 16 threads'


def test_a_token_shorter_lived_than_the_leeway_is_not_refreshed_on_every_request(auth_server):
    auth_server.token_lifetime = 30  # the leeway is 60 s
    with protected_mcp(auth_server) as (url, _app):
        auth = oauth()
        with auth, Client.http(url, auth=auth) as client:
            for _ in range(3):
                client.list_tools()
    assert auth_server.grants == {"authorization_code": 1}


def test_step_up_on_403_insufficient_scope_asks_for_the_union(auth_server):
    with protected_mcp(auth_server, tool_scopes={"write_note": "notes:write"}) as (url, app):
        auth = oauth()
        with auth, Client.http(url, auth=auth) as client:
            assert client.call_tool("write_note", {"text": "x"}).is_error is False
    assert [a["scope"] for a in auth_server.authorize_requests] == [
        "notes:read",
        "notes:read notes:write",
    ]
    assert app.refused[403] == 1


def test_step_up_that_cannot_help_fails_with_insufficient_scope(auth_server):
    auth_server.scopes_supported = ["notes:read"]
    with protected_mcp(auth_server, tool_scopes={"write_note": "notes:admin"}) as (url, _app):
        # the server grants what is asked; a grant that still lacks the scope is not retried
        auth = oauth(max_step_ups=0)
        with auth, Client.http(url, auth=auth) as client:
            with pytest.raises(InsufficientScope) as caught:
                client.call_tool("write_note", {"text": "x"}, timeout=WAIT)
            assert caught.value.required == ("notes:admin",)
            assert client.list_tools()  # the connection is still up


def test_client_credentials(auth_server):
    auth_server.add_client(
        Registered(
            "machine",
            "s3cret",
            [],
            token_endpoint_auth_method="client_secret_basic",
            grant_types=["client_credentials"],
        )
    )
    with protected_mcp(auth_server) as (url, _app):
        auth = OAuthClientCredentials("machine", "s3cret", timeout=WAIT)
        with auth, Client.http(url, auth=auth) as client:
            client.list_tools()
            auth_server.expire_all()
            client.list_tools()  # no refresh token: a new client-credentials grant
    assert auth_server.grants == {"client_credentials": 2}
    assert auth_server.token_resources == [url, url]


def test_pre_registered_credentials_come_first(auth_server):
    auth_server.add_client(
        Registered(
            "pre",
            "pre-secret",
            ["http://127.0.0.1:0/callback"],
            token_endpoint_auth_method="client_secret_basic",
        )
    )
    # a fixed redirect port, as a pre-registered client has
    with socket_port() as port:
        auth_server.clients["pre"].redirect_uris = [f"http://127.0.0.1:{port}/callback"]
    with protected_mcp(auth_server) as (url, _app):
        auth = oauth(
            client_id="pre",
            client_secret="pre-secret",
            issuer=auth_server.issuer,
            redirect_uri=f"http://127.0.0.1:{port}/callback",
        )
        with auth, Client.http(url, auth=auth) as client:
            client.list_tools()
    assert auth_server.registrations == 0
    assert auth_server.authorize_requests[0]["client_id"] == "pre"


def test_a_client_id_metadata_document_is_used_where_supported(auth_server):
    auth_server.client_id_metadata_documents = True
    document = "https://app.example/mcp-client.json"
    with protected_mcp(auth_server) as (url, _app):
        auth = oauth(client_metadata_url=document)
        with auth, Client.http(url, auth=auth) as client:
            client.list_tools()
    assert auth_server.registrations == 0
    assert auth_server.authorize_requests[0]["client_id"] == document


def test_pre_registered_credentials_are_not_shown_to_another_issuer(auth_server):
    with protected_mcp(auth_server) as (url, _app):
        auth = oauth(client_id="pre", client_secret="x", issuer="https://other.example")
        with auth, pytest.raises(RegistrationError, match=r"other\.example"):
            Client.http(url, auth=auth)
    assert auth_server.authorize_requests == []


def test_no_way_to_register_is_a_registration_error(auth_server):
    auth_server.dynamic_registration = False
    with protected_mcp(auth_server) as (url, _app):
        auth = oauth()
        with auth, pytest.raises(RegistrationError, match="client_id="):
            Client.http(url, auth=auth)


def test_the_user_declining_is_authorization_denied(auth_server):
    auth_server.deny = True
    with protected_mcp(auth_server) as (url, _app):
        auth = oauth()
        with auth, pytest.raises(AuthorizationDenied) as caught:
            Client.http(url, auth=auth)
    assert caught.value.error == "access_denied"
    assert auth_server.grants == {}


def test_a_token_endpoint_error_carries_its_code(auth_server):
    auth_server.add_client(
        Registered("pre", "right", [], token_endpoint_auth_method="client_secret_basic")
    )
    with protected_mcp(auth_server) as (url, _app):
        auth = oauth(client_id="pre", client_secret="wrong")
        auth_server.clients["pre"].redirect_uris = []  # any redirect is refused at /authorize
        auth_server.clients["pre"].check_redirect_uri = lambda _uri: True  # type: ignore[method-assign]
        with auth, pytest.raises(TokenEndpointError) as caught:
            Client.http(url, auth=auth)
    assert caught.value.error == "invalid_client"
    assert "wrong" not in str(caught.value)


def test_missing_metadata_is_a_discovery_error(auth_server):
    with protected_mcp(auth_server) as (url, app):
        app.auth = AuthServer()  # names an issuer that serves nothing
        app.auth.issuer = auth_server.issuer + "/nowhere"
        app.auth.valid = auth_server.valid  # type: ignore[method-assign]
        auth = oauth()
        with auth, pytest.raises(DiscoveryError, match="no authorization server metadata"):
            Client.http(url, auth=auth)


def test_no_redirect_in_time_is_a_timeout_and_leaves_no_thread(auth_server):
    with protected_mcp(auth_server) as (url, _app):
        auth = OAuth(open_url=lambda _url: None, authorize_timeout=0.3, timeout=WAIT)
        with auth, pytest.raises(AuthorizationTimeout):
            Client.http(url, auth=auth)


def test_cancel_during_authorization_closes_the_listener(auth_server):
    shown = threading.Event()
    with protected_mcp(auth_server) as (url, _app):
        auth = OAuth(open_url=lambda _url: shown.set(), authorize_timeout=WAIT * 4, timeout=WAIT)
        canceller = threading.Thread(target=lambda: (wait_event(shown, "the URL"), auth.cancel()))
        canceller.start()
        with auth, pytest.raises(AuthorizationCancelled):
            Client.http(url, auth=auth)
        canceller.join(WAIT)


def test_ctrl_c_during_authorization_cancels_it(auth_server):
    shown = threading.Event()
    listeners: list[str] = []

    def show(url: str) -> None:
        listeners.append(url)
        shown.set()

    with protected_mcp(auth_server) as (url, _app):
        auth = OAuth(open_url=show, authorize_timeout=WAIT * 4, timeout=WAIT)
        presser = threading.Thread(
            target=lambda: (wait_event(shown, "the URL"), _thread.interrupt_main())
        )
        presser.start()
        with auth, pytest.raises(KeyboardInterrupt):
            Client.http(url, auth=auth)
        presser.join(WAIT)
    redirect = httpx.URL(listeners[0]).params["redirect_uri"]
    with pytest.raises(httpx.ConnectError):
        httpx.get(redirect, timeout=WAIT)  # the listener is closed


def test_the_file_store_is_private_and_round_trips(tmp_path: Path):
    path = tmp_path / "cache" / "tokens.json"
    store = FileTokenStore(path)
    tokens = TokenSet(
        "secret-access", "https://mcp.example/mcp", "https://as.example", refresh_token="r"
    )
    store.set_tokens(tokens.resource, tokens)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert FileTokenStore(path).get_tokens(tokens.resource) == tokens
    assert "secret-access" not in repr(tokens) and "r'" not in repr(tokens)


def test_tokens_are_kept_in_the_given_store(auth_server):
    store = MemoryTokenStore()
    with protected_mcp(auth_server) as (url, _app):
        for _ in range(2):
            auth = oauth(store=store)
            with auth, Client.http(url, auth=auth) as client:
                client.list_tools()
    assert auth_server.grants == {"authorization_code": 1}  # the second run reused them


class socket_port:
    """A free loopback port (the socket is closed on exit, the number stays free)."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_a_redirect_with_another_state_is_rejected(auth_server):
    def forged(url: str) -> None:
        redirect = httpx.URL(url).params["redirect_uri"]
        httpx.get(redirect, params={"code": "stolen", "state": "forged"}, timeout=WAIT)

    with protected_mcp(auth_server) as (url, _app):
        auth = OAuth(open_url=forged, authorize_timeout=WAIT, timeout=WAIT)
        with auth, pytest.raises(AuthorizationRejected, match="state"):
            Client.http(url, auth=auth)
    assert auth_server.grants == {}  # the code never reached the token endpoint


def test_no_token_code_or_secret_is_logged(auth_server, caplog):
    caplog.set_level(logging.DEBUG)
    with protected_mcp(auth_server) as (url, _app):
        auth = oauth()
        with auth, Client.http(url, auth=auth) as client:
            client.list_tools()
            auth_server.expire_all()
            client.list_tools()
    secrets = [t.access_token for t in auth_server.tokens.values()]
    secrets += [t.refresh_token for t in auth_server.tokens.values() if t.refresh_token]
    secrets += [c.client_secret for c in auth_server.clients.values() if c.client_secret]
    # every record but the test authorization server's own (authlib logs what it issues)
    logged = "\n".join(
        record.getMessage() for record in caplog.records if not record.name.startswith("authlib")
    )
    assert "authorizing" in logged  # the client did log its steps
    assert secrets and not [s for s in secrets if s in logged]


def test_the_handshake_waits_for_the_user_to_sign_in(auth_server, monkeypatch):
    import mcp_sync.client

    monkeypatch.setattr(mcp_sync.client, "INIT_TIMEOUT", 0.2)  # shorter than the sign-in

    def slow_user(url: str) -> None:
        threading.Event().wait(0.5)  # the user reads the consent page
        browser(url)

    with protected_mcp(auth_server) as (url, _app):
        auth = OAuth(open_url=slow_user, authorize_timeout=WAIT, timeout=WAIT)
        with auth, Client.http(url, auth=auth) as client:
            assert client.list_tools()
