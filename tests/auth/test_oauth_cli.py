"""``mcp-sync ... --url URL --oauth``: the command line authorizes through the default
``open_url`` (prints the URL and opens a browser; here the browser is the test)."""

from __future__ import annotations

import webbrowser

import httpx
import pytest
from support.oauth_server import AuthServer, protected_mcp
from support.waiting import WAIT

from mcp_sync.cli.main import main
from mcp_sync.cli.parser import EXIT_ERROR, EXIT_USAGE

pytestmark = pytest.mark.timeout(60)


def test_tools_with_oauth_prints_the_url_and_opens_it(monkeypatch, capsys):
    opened: list[str] = []

    def browser(url: str, *args: object, **kwargs: object) -> bool:
        opened.append(url)
        with httpx.Client(timeout=WAIT) as http:
            assert http.get(url, follow_redirects=True).status_code == 200
        return True

    monkeypatch.setattr(webbrowser, "open", browser)
    with AuthServer() as auth_server, protected_mcp(auth_server) as (url, _app):
        assert main(["tools", "--url", url, "--oauth", "--oauth-scope", "notes:write"]) == 0
    out, err = capsys.readouterr()
    assert "read_notes" in out and "write_note" in out
    assert opened and opened[0] in err  # printed as well as opened
    assert auth_server.authorize_requests[0]["scope"] == "notes:read notes:write"


def test_a_refused_sign_in_is_one_line_not_a_traceback(monkeypatch, capsys):
    monkeypatch.setattr(
        webbrowser, "open", lambda url, *a, **k: httpx.get(url, follow_redirects=True)
    )
    with AuthServer(deny=True) as auth_server, protected_mcp(auth_server) as (url, _app):
        assert main(["tools", "--url", url, "--oauth"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "access_denied" in err and "Traceback" not in err


def test_client_id_without_oauth_is_a_usage_error(capsys):
    code = main(["tools", "--url", "http://127.0.0.1:9/mcp", "--client-id", "x"])
    assert code == EXIT_USAGE
    assert "go with --oauth" in capsys.readouterr().err
