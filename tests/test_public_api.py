"""The package root's public names, pinned: adding or dropping one is a deliberate change.
The HTTP names are imported lazily, so ``import mcp_sync`` never loads httpx."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import mcp_sync

PUBLIC_NAMES = {
    "AppStats",
    "AuthHook",
    "BearerAuth",
    "CancelToken",
    "Cancelled",
    "CapabilityError",
    "Client",
    "ConnectionClosed",
    "Context",
    "Endpoint",
    "FeatureRemoved",
    "EndpointStats",
    "HttpClientTransport",
    "HttpError",
    "HttpServerHandle",
    "InputRequired",
    "McpError",
    "McpWsgiApp",
    "MemoryTransport",
    "PeerMisbehaved",
    "PendingCall",
    "ReconnectPolicy",
    "RequestNotSent",
    "RequestTimeout",
    "ResponseTooLarge",
    "Server",
    "ServerExited",
    "ServerHandle",
    "ServerSession",
    "ServerStats",
    "SessionEnded",
    "StdioTransport",
    "SubprocessTransport",
    "TaskCall",
    "TaskState",
    "Transport",
    "mcp_header",
    "memory_pair",
    "serve_http",
    "__version__",
}


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_exported_names_are_exactly_these() -> None:
    assert len(mcp_sync.__all__) == len(set(mcp_sync.__all__)), "a name is listed twice"
    assert set(mcp_sync.__all__) == PUBLIC_NAMES


def test_every_exported_name_resolves_and_http_ones_come_from_mcp_sync_http() -> None:
    import mcp_sync.http

    for name in sorted(PUBLIC_NAMES):
        assert getattr(mcp_sync, name) is not None, name
    assert set(mcp_sync._HTTP_NAMES) == set(mcp_sync.http.__all__), (
        "the root exports mcp_sync.http's names"
    )
    for name in mcp_sync.http.__all__:
        assert getattr(mcp_sync, name) is getattr(mcp_sync.http, name), name


def test_dir_lists_the_lazy_names_and_an_unknown_name_is_an_attribute_error() -> None:
    assert set(dir(mcp_sync)) >= PUBLIC_NAMES
    with pytest.raises(AttributeError, match="no_such_name"):
        mcp_sync.no_such_name  # noqa: B018


def test_import_mcp_sync_loads_no_http_code() -> None:
    out = run_python(
        """
        import sys
        import mcp_sync
        from mcp_sync import Client, Server
        print(sorted(name for name in ("httpx", "mcp_sync.http") if name in sys.modules))
        """
    )
    assert out == "[]"


def test_the_http_server_names_work_without_httpx() -> None:
    """httpx is the client's extra: serving HTTP needs only the standard library."""
    out = run_python(
        """
        import sys
        sys.modules["httpx"] = None  # any import of httpx now fails
        from mcp_sync import McpWsgiApp, Server, serve_http
        handle = serve_http(Server("t").wsgi_app(), "127.0.0.1", 0)
        try:
            print(type(handle.app).__name__ if hasattr(handle, "app") else "served")
        finally:
            handle.stop()
        """
    )
    assert out in {"McpWsgiApp", "served"}


AUTH_CLIENT_NAMES = {
    "OAuth",
    "OAuthClientCredentials",
    "TokenStore",
    "MemoryTokenStore",
    "FileTokenStore",
    "TokenSet",
    "ClientRegistration",
    "ResourceMetadata",
    "ServerMetadata",
    "BearerChallenge",
    "parse_challenge",
    "LoopbackListener",
    "open_in_browser",
}
"""mcp_sync.auth's client names (the resource-server names are pinned beside them)."""


def test_the_auth_client_names_are_pinned() -> None:
    pytest.importorskip("authlib")
    import mcp_sync.auth

    assert set(mcp_sync.auth.__all__) >= AUTH_CLIENT_NAMES
    for name in AUTH_CLIENT_NAMES:
        assert getattr(mcp_sync.auth, name) is not None, name
