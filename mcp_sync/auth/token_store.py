"""Where tokens and client registrations are kept: :class:`MemoryTokenStore` (the default,
gone with the process) or :class:`FileTokenStore` (a JSON file readable by its owner only,
mode 0600, replaced atomically). Any object with the four methods of :class:`TokenStore`
will do (a keyring, a database): each is called under the store user's lock, one at a time
per store, and must not block for long.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .registration import ClientRegistration

__all__ = ["TokenSet", "TokenStore", "MemoryTokenStore", "FileTokenStore"]


@dataclass(frozen=True)
class TokenSet:
    """The tokens for one MCP server (``resource``). Tokens never appear in ``repr``.

    Attributes:
        expires_at: when the access token expires (seconds since the epoch), or ``None``.
        scope: the scopes granted (the answer's ``scope``, else what was asked for).
        requested_scope: what was asked for (the base of a step-up's union).
        issuer: the authorization server that issued them.
    """

    access_token: str
    resource: str
    issuer: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    expires_at: float | None = None
    scope: str | None = None
    requested_scope: str | None = None
    issued_at: float | None = None

    def __repr__(self) -> str:
        return (
            f"TokenSet(resource={self.resource!r}, issuer={self.issuer!r}, "
            f"scope={self.scope!r}, expires_at={self.expires_at!r}, "
            f"refresh_token={'<set>' if self.refresh_token else None})"
        )

    def expires_within(self, seconds: float) -> bool:
        """True when the access token expires in less than ``seconds`` -- or than half its
        lifetime, when that is shorter (so a token that lives less than the leeway is not
        refreshed on every request)."""
        if self.expires_at is None:
            return False
        if self.issued_at is not None:
            seconds = min(seconds, (self.expires_at - self.issued_at) / 2)
        return self.expires_at - time.time() < seconds

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenSet:
        """The inverse of :meth:`to_json`."""
        return cls(**data)


@runtime_checkable
class TokenStore(Protocol):
    """Keeps tokens per MCP server (its canonical URL) and registrations per issuer."""

    def get_tokens(self, resource: str) -> TokenSet | None:
        """The tokens for ``resource``, if any."""

    def set_tokens(self, resource: str, tokens: TokenSet | None) -> None:
        """Keep ``tokens`` for ``resource`` (``None``: forget them)."""

    def get_client(self, issuer: str) -> ClientRegistration | None:
        """The registration at ``issuer``, if any."""

    def set_client(self, issuer: str, client: ClientRegistration | None) -> None:
        """Keep ``client`` for ``issuer`` (``None``: forget it)."""


class MemoryTokenStore:
    """A :class:`TokenStore` in memory (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[str, TokenSet] = {}
        self._clients: dict[str, ClientRegistration] = {}

    def get_tokens(self, resource: str) -> TokenSet | None:
        with self._lock:
            return self._tokens.get(resource)

    def set_tokens(self, resource: str, tokens: TokenSet | None) -> None:
        with self._lock:
            if tokens is None:
                self._tokens.pop(resource, None)
            else:
                self._tokens[resource] = tokens

    def get_client(self, issuer: str) -> ClientRegistration | None:
        with self._lock:
            return self._clients.get(issuer)

    def set_client(self, issuer: str, client: ClientRegistration | None) -> None:
        with self._lock:
            if client is None:
                self._clients.pop(issuer, None)
            else:
                self._clients[issuer] = client


class FileTokenStore:
    """A :class:`TokenStore` in one JSON file, created with mode 0600 and replaced atomically
    (write to a temporary file beside it, then rename). Its folder is created (mode 0700) if
    missing; ``~`` is expanded. A file that is not this store's JSON is an error, never silently overwritten."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {"tokens": {}, "clients": {}}
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"{self.path} is not a token store")
        return {"tokens": data.get("tokens") or {}, "clients": data.get("clients") or {}}

    def _save(self, data: dict[str, dict[str, Any]]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".tokens-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(data, file)
            os.replace(temp, self.path)
        except BaseException:
            try:
                os.unlink(temp)
            except FileNotFoundError:
                pass
            raise

    def get_tokens(self, resource: str) -> TokenSet | None:
        with self._lock:
            found = self._load()["tokens"].get(resource)
        return TokenSet.from_json(found) if found else None

    def set_tokens(self, resource: str, tokens: TokenSet | None) -> None:
        with self._lock:
            data = self._load()
            if tokens is None:
                data["tokens"].pop(resource, None)
            else:
                data["tokens"][resource] = tokens.to_json()
            self._save(data)

    def get_client(self, issuer: str) -> ClientRegistration | None:
        with self._lock:
            found = self._load()["clients"].get(issuer)
        return ClientRegistration.from_json(found) if found else None

    def set_client(self, issuer: str, client: ClientRegistration | None) -> None:
        with self._lock:
            data = self._load()
            if client is None:
                data["clients"].pop(issuer, None)
            else:
                data["clients"][issuer] = client.to_json()
            self._save(data)
