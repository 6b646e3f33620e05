"""HTTP to the authorization server and metadata endpoints: bounded reads, no token in any
message, and the session adapter authlib's protocol client posts through."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from ..errors import AuthorizationError

__all__ = [
    "MAX_METADATA_BYTES",
    "HttpAnswer",
    "is_loopback",
    "require_secure",
    "get_json",
    "post",
    "AuthlibSession",
]

MAX_METADATA_BYTES = 256 * 1024
"""The largest metadata, registration or token answer read (bytes); a larger one is an
error of the step that asked for it."""


@dataclass(frozen=True)
class HttpAnswer:
    """A fully read, bounded HTTP answer."""

    status_code: int
    headers: httpx.Headers
    content: bytes

    def json(self) -> Any:
        """The body as JSON (raises ``ValueError``)."""
        return json.loads(self.content)

    def raise_for_status(self) -> None:
        """Raise for a 4xx/5xx (as authlib expects of a response)."""
        if self.status_code >= 400:
            raise AuthorizationError(f"HTTP {self.status_code}")


def is_loopback(url: str) -> bool:
    """True for ``localhost`` and addresses in 127.0.0.0/8 or ``::1``."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_secure(url: str, what: str, error: type[AuthorizationError]) -> None:
    """Refuse an endpoint that is not HTTPS (plain HTTP is allowed on loopback only)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "https" or (scheme == "http" and is_loopback(url)):
        return
    raise error(f"the {what} {url!r} is not an HTTPS URL")


def _read(response: httpx.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise ValueError(f"answer larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _send(client: httpx.Client, request: httpx.Request, limit: int) -> HttpAnswer:
    response = client.send(request, stream=True, follow_redirects=False)
    try:
        return HttpAnswer(response.status_code, response.headers, _read(response, limit))
    finally:
        response.close()


def get_json(client: httpx.Client, url: str, limit: int = MAX_METADATA_BYTES) -> HttpAnswer:
    """GET ``url`` asking for JSON (raises ``httpx.HTTPError`` or ``ValueError``)."""
    request = client.build_request("GET", url, headers={"Accept": "application/json"})
    return _send(client, request, limit)


def post(
    client: httpx.Client,
    url: str,
    *,
    json_body: Any = None,
    form: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    limit: int = MAX_METADATA_BYTES,
) -> HttpAnswer:
    """POST JSON or a form to ``url`` (raises ``httpx.HTTPError`` or ``ValueError``)."""
    all_headers = {"Accept": "application/json", **(headers or {})}
    if json_body is not None:
        request = client.build_request("POST", url, json=json_body, headers=all_headers)
    else:
        request = client.build_request(
            "POST", url, content=urlencode(list((form or {}).items())), headers=all_headers
        )
    return _send(client, request, limit)


class AuthlibSession:
    """What :class:`authlib.oauth2.client.OAuth2Client` calls ``session``: ``post()`` of a
    form, with authlib's client authentication (``client_secret_basic``/``_post``,
    ``private_key_jwt``) applied, over our ``httpx.Client`` and bounded reads."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def post(
        self,
        url: str,
        data: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        **_kwargs: Any,
    ) -> HttpAnswer:
        body = urlencode(list((data or {}).items()))
        all_headers = dict(headers or {})
        if auth is not None and hasattr(auth, "prepare"):
            url, all_headers, body = auth.prepare("POST", url, all_headers, body)
        request = self.client.build_request("POST", url, content=body, headers=all_headers)
        return _send(self.client, request, MAX_METADATA_BYTES)

    def request(self, method: str, url: str, **kwargs: Any) -> HttpAnswer:
        return self.post(url, **kwargs)
