"""Sealed ``requestState`` strings for multi round-trip requests (revision 2026-07-28).

A server that answers ``input_required`` hands the client an opaque ``requestState``; the
client echoes it byte-exact on its retry. The string comes back from the client, so it is
attacker-controlled: :class:`StateSealer` protects it with HMAC-SHA256 and binds it to

* the method of the request (``tools/call``, ``prompts/get``, ``resources/read``),
* a SHA-256 digest of the request's params in canonical JSON (every top-level member except
  ``_meta``, ``inputResponses`` and ``requestState``),
* an expiry (issued at + time to live),
* an optional principal (the authenticated user or audience the state was issued to),
* the id of the key that signed it, looked up in a :class:`KeyRing`.

By default the payload is **signed, not encrypted**: anyone holding the string can read it
(it is base64url-encoded JSON). Put in it what the handler needs to resume -- the answers
gathered so far, its own progress -- never secrets, tokens or data the client must not see.
``StateSealer(..., encrypt=True)`` seals with AES-256-GCM instead, when the optional
``cryptography`` package is installed (see :func:`encryption_available`); the bindings and
checks are the same.

:meth:`StateSealer.open` checks, in this order and before the payload is parsed: the type and
size of the string, its shape, the key id, the signature (compared in constant time) or the
authentication tag; then the expiry, the method, the params digest and the principal. Every failure raises a subclass of
:class:`~mcp_sync.errors.RequestStateError`, an :class:`~mcp_sync.errors.McpError` with code ``-32602``
(invalid params) whose ``data`` names the reason, so a server can send it as the answer.

A sealed state can be replayed until it expires unless the sealer has a
:class:`ReplayGuard`: then each state opens once and again raises :class:`~mcp_sync.errors.StateReplayed`
(the spec asks a server to enforce single use itself). :class:`MemoryReplayGuard` guards one
process; several processes need a guard backed by a store they share.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import heapq
import hmac
import json
import math
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import (
    PayloadTooLarge,
    StateExpired,
    StateKeyUnknown,
    StateMalformed,
    StateMismatch,
    StateReplayed,
    StateTampered,
    StateTooLarge,
)

__all__ = [
    "DEFAULT_TTL",
    "DEFAULT_ENV_VAR",
    "EXCLUDED_PARAMS",
    "MAX_STATE_CHARS",
    "MIN_KEY_BYTES",
    "KeyRing",
    "OpenedState",
    "StateSealer",
    "ReplayGuard",
    "MemoryReplayGuard",
    "encryption_available",
    "generate_key",
    "params_digest",
]

DEFAULT_TTL = 600.0
"""Seconds a sealed state stays valid unless the sealer is given another ``ttl``."""

DEFAULT_ENV_VAR = "MCP_SYNC_STATE_KEYS"
"""The environment variable :meth:`KeyRing.from_env` reads by default."""

MAX_STATE_CHARS = 65536
"""Default bound on the length of a state string, checked before anything is parsed."""

MIN_KEY_BYTES = 32
"""The shortest secret a :class:`KeyRing` accepts (256 bits, the HMAC-SHA256 block output)."""

EXCLUDED_PARAMS = frozenset({"_meta", "inputResponses", "requestState"})
"""Top-level params members left out of the params digest (they change between rounds)."""

_VERSION = "v1"
_KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_B64 = r"[A-Za-z0-9_-]"
_SIG_CHARS = 43  # 32 bytes of HMAC-SHA256, base64url without padding
_STATE = re.compile(rf"{_VERSION}\.({_KEY_ID.pattern})\.({_B64}+)\.({_B64}{{{_SIG_CHARS}}})")
_SEALED_VERSION = "e1"
_SEALED = re.compile(
    rf"{_SEALED_VERSION}\.({_KEY_ID.pattern})\.({_B64}{{40,}})"
)  # nonce + tag at least
_AEAD_NONCE_BYTES = 12
_ENCRYPTION_LABEL = b"mcp_sync requestState AES-256-GCM key"
_PRINCIPAL_LABEL = b"mcp_sync requestState principal\x00"


# --------------------------------------------------------------------------- encoding


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _normalise(value: Any) -> Any:
    """``value`` with integral floats as ints, so ``1.0`` and ``1`` digest alike."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("params hold a number JSON cannot carry")
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    return value


def params_digest(params: Mapping[str, Any] | None) -> str:
    """The base64url SHA-256 of ``params`` in canonical JSON, as bound into a sealed state.

    Canonical JSON: keys sorted, no whitespace, UTF-8, integral floats written as integers.
    The top-level members in :data:`EXCLUDED_PARAMS` are left out; ``None`` digests as ``{}``.
    Params that are not a JSON object (an array) are digested whole.
    """
    if params is None:
        params = {}
    # params that are not an object (never valid for the MRTR methods) digest as they are
    kept = (
        {k: v for k, v in params.items() if k not in EXCLUDED_PARAMS}
        if isinstance(params, Mapping)
        else params
    )
    canonical = json.dumps(
        _normalise(kept), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return _b64encode(hashlib.sha256(canonical.encode("utf-8")).digest())


# --------------------------------------------------------------------------- keys


def encryption_available() -> bool:
    """Whether ``cryptography`` is importable, so that ``StateSealer(encrypt=True)`` works."""
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        return False
    return AESGCM is not None


def generate_key() -> str:
    """A new random secret, base64url-encoded, in the form :meth:`KeyRing.from_env` reads."""
    return secrets.token_urlsafe(MIN_KEY_BYTES)


class KeyRing:
    """The secrets that sign and verify states: one current key signs, every key verifies.

    Args:
        keys: key id -> secret. Ids are 1-64 characters of ``A-Z a-z 0-9 _ -``; every secret
            has at least :data:`MIN_KEY_BYTES` bytes.
        current: the id of the key that signs new states; it must be in ``keys``.

    Rotation: add the new key and make it current; keep the old one (not current) for at
    least the sealer's TTL, so that states it signed still open; then drop it.

    Every process that may receive a retry must hold the same ring -- build it with
    :meth:`from_env` or :meth:`from_mapping` from shared configuration. :meth:`ephemeral`
    is for a single process only.
    """

    def __init__(self, keys: Mapping[str, bytes], *, current: str) -> None:
        if not keys:
            raise ValueError("a key ring needs at least one key")
        for key_id, secret in keys.items():
            if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
                raise ValueError(
                    f"invalid key id {key_id!r}: use 1-64 characters of A-Z a-z 0-9 _ -"
                )
            if not isinstance(secret, bytes) or len(secret) < MIN_KEY_BYTES:
                raise ValueError(
                    f"the secret of key {key_id!r} must be at least {MIN_KEY_BYTES} bytes"
                )
        if current not in keys:
            raise ValueError(f"the current key {current!r} is not in the key ring")
        self._keys = dict(keys)
        self._current = current

    @classmethod
    def from_mapping(
        cls, keys: Mapping[str, bytes | str], *, current: str | None = None
    ) -> KeyRing:
        """A ring from configuration: ``str`` secrets are base64url (padding optional).

        ``current`` defaults to the first key of the mapping.
        """
        decoded = {
            key_id: secret if isinstance(secret, bytes) else _decode_secret(key_id, secret)
            for key_id, secret in keys.items()
        }
        if current is None:
            current = next(iter(decoded), "")
        return cls(decoded, current=current)

    @classmethod
    def from_string(cls, text: str) -> KeyRing:
        """A ring from ``"id:secret,id:secret,..."``; the first key is current.

        Secrets are base64url (as :func:`generate_key` writes them); whitespace around
        entries is ignored.
        """
        pairs: dict[str, bytes | str] = {}
        for entry in text.split(","):
            entry = entry.strip()
            if not entry:
                continue
            key_id, sep, secret = entry.partition(":")
            key_id = key_id.strip()
            if not sep:
                raise ValueError(f"key ring entry {key_id[:64]!r} has no ':' between id and secret")
            if key_id in pairs:
                raise ValueError(f"key id {key_id!r} appears twice")
            pairs[key_id] = secret.strip()
        return cls.from_mapping(pairs)

    @classmethod
    def from_env(
        cls, name: str = DEFAULT_ENV_VAR, *, environ: Mapping[str, str] | None = None
    ) -> KeyRing:
        """A ring from the environment variable ``name``, in the :meth:`from_string` format."""
        env = os.environ if environ is None else environ
        text = env.get(name)
        if not text:
            raise ValueError(f"environment variable {name} is not set")
        return cls.from_string(text)

    @classmethod
    def ephemeral(cls) -> KeyRing:
        """A ring with one random key that lives and dies with this object.

        Another process (a second worker behind a load balancer, a restarted server) cannot
        open its states: their retries fail with :class:`~mcp_sync.errors.StateKeyUnknown`.
        """
        key_id = "ephemeral-" + secrets.token_hex(8)
        return cls({key_id: secrets.token_bytes(MIN_KEY_BYTES)}, current=key_id)

    @property
    def current_id(self) -> str:
        """The id of the key that signs new states."""
        return self._current

    def ids(self) -> Iterator[str]:
        """Every key id in the ring, the current one included."""
        return iter(self._keys)

    def secret(self, key_id: str) -> bytes | None:
        """The secret of ``key_id``, or ``None`` if the ring does not hold it."""
        return self._keys.get(key_id)

    def __repr__(self) -> str:
        return f"KeyRing(ids={list(self._keys)!r}, current={self._current!r})"


def _decode_secret(key_id: str, text: str) -> bytes:
    if not re.fullmatch(rf"{_B64}+=*", text):
        raise ValueError(f"the secret of key {key_id!r} is not base64url")
    try:
        return _b64decode(text.rstrip("="))
    except (binascii.Error, ValueError):
        raise ValueError(f"the secret of key {key_id!r} is not base64url") from None


# --------------------------------------------------------------------------- sealing


@dataclass(frozen=True)
class OpenedState:
    """A verified state: the payload and what was bound with it."""

    payload: Any
    key_id: str
    issued_at: float
    expires_at: float
    nonce: str
    """Random per seal; what a :class:`ReplayGuard` records until ``expires_at``."""


class ReplayGuard(Protocol):
    """Remembers the nonces of opened states, so that each state opens once."""

    def claim(self, nonce: str, expires_at: float) -> bool:
        """Record ``nonce`` until ``expires_at`` (epoch seconds); ``False`` if it was recorded.

        Must be atomic: of concurrent claims of one nonce, exactly one returns ``True``.
        """
        ...


class MemoryReplayGuard:
    """A :class:`ReplayGuard` in this process's memory (thread-safe, bounded).

    Args:
        max_entries: nonces remembered at most. When full, expired ones are forgotten first,
            then those expiring soonest -- a state whose nonce was forgotten that way could be
            opened again, so size it above the states opened per TTL.
        clock: seconds since the epoch, as the sealer's.

    Retries that reach another process are not seen here: behind several workers, implement
    :class:`ReplayGuard` on a shared store (for example a database insert on a unique key).
    """

    def __init__(
        self, *, max_entries: int = 100_000, clock: Callable[[], float] = time.time
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._expiry: dict[str, float] = {}
        self._by_expiry: list[tuple[float, str]] = []

    def claim(self, nonce: str, expires_at: float) -> bool:
        """See :meth:`ReplayGuard.claim`."""
        with self._lock:
            now = self._clock()
            while self._by_expiry and self._by_expiry[0][0] <= now:
                self._expiry.pop(heapq.heappop(self._by_expiry)[1], None)
            if nonce in self._expiry:
                return False
            while len(self._expiry) >= self.max_entries:
                self._expiry.pop(heapq.heappop(self._by_expiry)[1], None)
            self._expiry[nonce] = expires_at
            heapq.heappush(self._by_expiry, (expires_at, nonce))
            return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._expiry)


class StateSealer:
    """Seals payloads into ``requestState`` strings and opens them again.

    Args:
        keys: the :class:`KeyRing`; new states are signed with its current key.
        ttl: seconds a state stays valid (default :data:`DEFAULT_TTL`).
        max_chars: the longest state accepted or produced (default :data:`MAX_STATE_CHARS`).
        clock: seconds since the epoch (default :func:`time.time`); processes sharing a ring
            need clocks that roughly agree.
        encrypt: seal with AES-256-GCM (from the optional ``cryptography`` package, which
            mcp_sync does not depend on), so the payload is confidential as well as
            authenticated. Without it (the default) the payload is signed with HMAC-SHA256 and
            readable by the client. Either sealer opens states of both forms.
        replay_guard: if given, each state opens once; opening it again raises
            :class:`~mcp_sync.errors.StateReplayed`. Claimed only after every other check passed.

    Thread-safe: it holds no mutable state.
    """

    def __init__(
        self,
        keys: KeyRing,
        *,
        ttl: float = DEFAULT_TTL,
        max_chars: int = MAX_STATE_CHARS,
        clock: Callable[[], float] = time.time,
        encrypt: bool = False,
        replay_guard: ReplayGuard | None = None,
    ) -> None:
        if encrypt and not encryption_available():
            raise RuntimeError("encrypt=True needs the cryptography package")
        if not (ttl > 0 and math.isfinite(ttl)):
            raise ValueError("ttl must be a positive number of seconds")
        if max_chars < 128:
            raise ValueError("max_chars must be at least 128")
        self.keys = keys
        self.ttl = ttl
        self.max_chars = max_chars
        self.encrypt = encrypt
        self.replay_guard = replay_guard
        self._clock = clock

    def seal(
        self,
        payload: Any,
        *,
        method: str,
        params: Mapping[str, Any] | None,
        principal: str | None = None,
    ) -> str:
        """A state string carrying ``payload`` (JSON-serialisable), bound to this request.

        Raises:
            PayloadTooLarge: the state would exceed ``max_chars``.
            TypeError, ValueError: ``payload`` or ``params`` is not JSON-serialisable.
        """
        key_id = self.keys.current_id
        secret = self.keys.secret(key_id)
        assert secret is not None  # the ring guarantees its current key
        now = self._clock()
        body = {
            "m": method,
            "d": params_digest(params),
            "iat": round(now * 1000),
            "exp": round((now + self.ttl) * 1000),
            "n": secrets.token_urlsafe(12),
            "p": payload,
        }
        if principal is not None:
            body["sub"] = _principal_tag(secret, principal)
        plain = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
            "utf-8"
        )
        if self.encrypt:
            header = f"{_SEALED_VERSION}.{key_id}"
            nonce = secrets.token_bytes(_AEAD_NONCE_BYTES)
            state = f"{header}.{_b64encode(nonce + _aead(secret).encrypt(nonce, plain, header.encode('ascii')))}"
        else:
            signed = f"{_VERSION}.{key_id}.{_b64encode(plain)}"
            state = f"{signed}.{_sign(secret, signed)}"
        if len(state) > self.max_chars:
            raise PayloadTooLarge(
                f"the sealed state would be {len(state)} characters, more than {self.max_chars}"
            )
        return state

    def open(
        self,
        state: object,
        *,
        method: str,
        params: Mapping[str, Any] | None,
        principal: str | None = None,
    ) -> Any:
        """The payload of ``state``, after every check; see :meth:`open_verified`."""
        return self.open_verified(state, method=method, params=params, principal=principal).payload

    def open_verified(
        self,
        state: object,
        *,
        method: str,
        params: Mapping[str, Any] | None,
        principal: str | None = None,
    ) -> OpenedState:
        """Verify ``state`` against this request and return it with its bindings.

        ``params`` are the retry's params (``_meta``, ``inputResponses`` and
        ``requestState`` may be in them; they are not part of the digest).

        Raises:
            StateTooLarge, StateMalformed, StateKeyUnknown, StateTampered, StateExpired,
            StateMismatch, StateReplayed: all :class:`~mcp_sync.errors.RequestStateError`, ``-32602``.
        """
        if not isinstance(state, str):
            raise StateMalformed("not a string")
        if len(state) > self.max_chars:
            raise StateTooLarge()
        key_id, secret, plain = self._authenticate(state)
        body = _decode_body(plain)
        now_ms = self._clock() * 1000
        if now_ms >= body["exp"]:
            raise StateExpired()
        if not hmac.compare_digest(body["m"].encode("utf-8"), method.encode("utf-8")):
            raise StateMismatch("method_mismatch")
        if not hmac.compare_digest(
            body["d"].encode("ascii"), params_digest(params).encode("ascii")
        ):
            raise StateMismatch("params_mismatch")
        expected_sub = "" if principal is None else _principal_tag(secret, principal)
        if not hmac.compare_digest(
            body.get("sub", "").encode("utf-8"), expected_sub.encode("ascii")
        ):
            raise StateMismatch("principal_mismatch")
        opened = OpenedState(body["p"], key_id, body["iat"] / 1000, body["exp"] / 1000, body["n"])
        if self.replay_guard is not None and not self.replay_guard.claim(
            opened.nonce, opened.expires_at
        ):
            raise StateReplayed()
        return opened

    def _authenticate(self, state: str) -> tuple[str, bytes, bytes]:
        """The key id, its secret and the authenticated body bytes of either form."""
        signed_match = _STATE.fullmatch(state)
        sealed_match = None if signed_match else _SEALED.fullmatch(state)
        match = signed_match or sealed_match
        if match is None:
            raise StateMalformed()
        key_id = match.group(1)
        secret = self.keys.secret(key_id)
        if secret is None:
            raise StateKeyUnknown()
        if signed_match is not None:
            if not hmac.compare_digest(
                _sign(secret, state[: -(_SIG_CHARS + 1)]).encode("ascii"),
                signed_match.group(3).encode("ascii"),
            ):
                raise StateTampered()
            return key_id, secret, _b64decode_part(signed_match.group(2))
        sealed = _b64decode_part(match.group(2))
        try:
            from cryptography.exceptions import InvalidTag
        except ImportError:
            raise StateMalformed("encrypted states need the cryptography package") from None
        try:
            header = f"{_SEALED_VERSION}.{key_id}".encode("ascii")
            plain = _aead(secret).decrypt(
                sealed[:_AEAD_NONCE_BYTES], sealed[_AEAD_NONCE_BYTES:], header
            )
        except InvalidTag:
            raise StateTampered() from None
        return key_id, secret, plain


def _b64decode_part(text: str) -> bytes:
    """Decode base64url, refusing the non-canonical spellings of the same bytes."""
    try:
        data = _b64decode(text)
    except (binascii.Error, ValueError):
        raise StateMalformed("undecodable payload") from None
    if _b64encode(data) != text:
        raise StateMalformed("undecodable payload")
    return data


def _aead(secret: bytes) -> Any:
    """AES-256-GCM keyed with a key derived from ``secret`` (needs ``cryptography``)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(hmac.new(secret, _ENCRYPTION_LABEL, hashlib.sha256).digest())


def _sign(secret: bytes, signed: str) -> str:
    return _b64encode(hmac.new(secret, signed.encode("ascii"), hashlib.sha256).digest())


def _principal_tag(secret: bytes, principal: str) -> str:
    """A keyed digest of the principal: bound into the state without being readable in it."""
    return _b64encode(
        hmac.new(secret, _PRINCIPAL_LABEL + principal.encode("utf-8"), hashlib.sha256).digest()
    )


_BODY_TYPES: dict[str, tuple[type, ...]] = {
    "m": (str,),
    "d": (str,),
    "iat": (int,),
    "exp": (int,),
    "n": (str,),
}


def _decode_body(plain: bytes) -> dict[str, Any]:
    """The body; only reached once its signature or authentication tag matched."""
    try:
        body = json.loads(plain.decode("utf-8"))
    except ValueError:
        raise StateMalformed("undecodable payload") from None
    if not isinstance(body, dict) or "p" not in body:
        raise StateMalformed("incomplete payload")
    for name, types in _BODY_TYPES.items():
        if not isinstance(body.get(name), types) or isinstance(body.get(name), bool):
            raise StateMalformed("incomplete payload")
    if not isinstance(body.get("sub", ""), str):
        raise StateMalformed("incomplete payload")
    return body
