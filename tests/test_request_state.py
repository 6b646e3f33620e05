"""Sealed requestState: round trips, every kind of tampering, key rings, and two processes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import subprocess
import threading
from typing import Any

import pytest
from support.paths import PYTHON, ROOT
from support.processes import user_env

from mcp_sync.errors import (
    PayloadTooLarge,
    RequestStateError,
    StateExpired,
    StateKeyUnknown,
    StateMalformed,
    StateMismatch,
    StateReplayed,
    StateTampered,
    StateTooLarge,
)
from mcp_sync.jsonrpc import INVALID_PARAMS
from mcp_sync.request_state import (
    DEFAULT_ENV_VAR,
    DEFAULT_TTL,
    MIN_KEY_BYTES,
    KeyRing,
    MemoryReplayGuard,
    StateSealer,
    encryption_available,
    generate_key,
    params_digest,
)

SECRET_A = b"a" * MIN_KEY_BYTES
SECRET_B = b"b" * MIN_KEY_BYTES
METHOD = "tools/call"
PARAMS: dict[str, Any] = {"name": "book", "arguments": {"city": "Oslo", "nights": 2}}
PAYLOAD = {"answers": {"dates": {"action": "accept", "content": {"from": "2026-12-24"}}}, "step": 2}


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def ring(**keys: bytes) -> KeyRing:
    return KeyRing(keys, current=next(iter(keys)))


def sealer(keys: KeyRing | None = None, **options: Any) -> StateSealer:
    return StateSealer(keys or ring(k1=SECRET_A), **options)


def retry_params(state: str, **extra: Any) -> dict[str, Any]:
    """The retry's params: the original ones plus what a client adds on the retry."""
    return {
        **PARAMS,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
        "inputResponses": {"dates": {"action": "accept"}},
        "requestState": state,
        **extra,
    }


def replace_char(text: str, index: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    new = alphabet[(alphabet.index(text[index]) + 1) % len(alphabet)]
    return text[:index] + new + text[index + 1 :]


def parts(state: str) -> list[str]:
    return state.split(".")


# --------------------------------------------------------------------------- round trip


def test_round_trip_returns_the_payload_and_ignores_what_changes_between_rounds() -> None:
    s = sealer()
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    assert isinstance(state, str) and state.isascii()
    assert s.open(state, method=METHOD, params=retry_params(state)) == PAYLOAD
    # a second sealer on the same ring (another thread, another request) opens it too
    assert sealer().open(state, method=METHOD, params=PARAMS) == PAYLOAD


def test_open_verified_reports_the_bindings() -> None:
    clock = Clock()
    s = sealer(clock=clock, ttl=30)
    first = s.seal(None, method=METHOD, params=PARAMS)
    opened = s.open_verified(first, method=METHOD, params=PARAMS)
    assert opened.payload is None
    assert opened.key_id == "k1"
    assert opened.issued_at == pytest.approx(clock.now)
    assert opened.expires_at == pytest.approx(clock.now + 30)
    second = s.open_verified(
        s.seal(None, method=METHOD, params=PARAMS), method=METHOD, params=PARAMS
    )
    assert opened.nonce != second.nonce, "every seal has its own nonce"


def test_the_payload_is_readable_but_the_principal_is_not() -> None:
    state = sealer().seal(
        {"step": "secret-free"}, method=METHOD, params=PARAMS, principal="alice@example.com"
    )
    body = json.loads(base64.urlsafe_b64decode(parts(state)[2] + "=" * (-len(parts(state)[2]) % 4)))
    assert body["p"] == {"step": "secret-free"}
    assert "alice" not in json.dumps(body)


# --------------------------------------------------------------------------- tampering


def test_a_changed_payload_character_is_a_bad_signature() -> None:
    s = sealer()
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    p = parts(state)
    offset = len(p[0]) + len(p[1]) + 2
    for index in range(offset, offset + len(p[2])):
        with pytest.raises(StateTampered):
            s.open(replace_char(state, index), method=METHOD, params=PARAMS)


def test_a_changed_signature_character_is_a_bad_signature() -> None:
    s = sealer()
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    for index in range(len(state) - 43, len(state)):
        with pytest.raises(StateTampered):
            s.open(replace_char(state, index), method=METHOD, params=PARAMS)


def test_a_changed_key_id_is_unknown_or_a_bad_signature() -> None:
    state = sealer(ring(k1=SECRET_A)).seal(PAYLOAD, method=METHOD, params=PARAMS)
    moved = state.replace("v1.k1.", "v1.k2.", 1)
    with pytest.raises(StateKeyUnknown):
        sealer(ring(k1=SECRET_A)).open(moved, method=METHOD, params=PARAMS)
    with pytest.raises(StateTampered):  # the ring holds k2, but k1's signature does not fit it
        sealer(ring(k1=SECRET_A, k2=SECRET_B)).open(moved, method=METHOD, params=PARAMS)


def test_a_foreign_key_ring_cannot_open_a_state() -> None:
    state = sealer(ring(k1=SECRET_A)).seal(PAYLOAD, method=METHOD, params=PARAMS)
    with pytest.raises(StateTampered):  # same key id, another secret
        sealer(ring(k1=SECRET_B)).open(state, method=METHOD, params=PARAMS)
    with pytest.raises(StateKeyUnknown):
        sealer(ring(other=SECRET_A)).open(state, method=METHOD, params=PARAMS)
    with pytest.raises(StateKeyUnknown):
        sealer(KeyRing.ephemeral()).open(state, method=METHOD, params=PARAMS)


def seal_by_hand(secret: bytes, body: bytes, key_id: str = "k1") -> str:
    """A state in the documented format, signed with ``secret``, around any body."""
    signed = f"v1.{key_id}.{base64.urlsafe_b64encode(body).rstrip(b'=').decode()}"
    signature = (
        base64.urlsafe_b64encode(hmac.new(secret, signed.encode(), hashlib.sha256).digest())
        .rstrip(b"=")
        .decode()
    )
    return f"{signed}.{signature}"


def test_a_state_forged_with_another_secret_is_rejected_and_never_parsed() -> None:
    with pytest.raises(StateTampered):
        sealer().open(seal_by_hand(SECRET_B, b"not json at all"), method=METHOD, params=PARAMS)


def test_an_authentic_but_incomplete_body_is_malformed() -> None:
    for body in (
        b"not json",
        b"[1,2]",
        b'{"p":1}',
        b'{"m":"tools/call","d":"x","iat":true,"exp":1,"n":"n","p":1}',
    ):
        with pytest.raises(StateMalformed):
            sealer().open(seal_by_hand(SECRET_A, body), method=METHOD, params=PARAMS)


# --------------------------------------------------------------------------- bindings


def test_expiry_follows_the_injected_clock() -> None:
    clock = Clock()
    s = sealer(clock=clock)
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    clock.now += DEFAULT_TTL - 0.01
    assert s.open(state, method=METHOD, params=PARAMS) == PAYLOAD
    clock.now += 0.01
    with pytest.raises(StateExpired):
        s.open(state, method=METHOD, params=PARAMS)


def test_the_ttl_is_configurable() -> None:
    clock = Clock()
    state = sealer(clock=clock, ttl=5).seal(PAYLOAD, method=METHOD, params=PARAMS)
    clock.now += 5
    with pytest.raises(StateExpired):
        sealer(clock=clock, ttl=600).open(state, method=METHOD, params=PARAMS)
    with pytest.raises(ValueError):
        sealer(ttl=0)


def test_another_method_is_a_mismatch() -> None:
    s = sealer()
    state = s.seal(PAYLOAD, method="tools/call", params=PARAMS)
    with pytest.raises(StateMismatch) as caught:
        s.open(state, method="prompts/get", params=PARAMS)
    assert caught.value.reason == "method_mismatch"


@pytest.mark.parametrize(
    "changed",
    [
        {"name": "book", "arguments": {"city": "Bergen", "nights": 2}},
        {"name": "book", "arguments": {"city": "Oslo", "nights": 2, "extra": None}},
        {"name": "book"},
        {"name": "cancel", "arguments": {"city": "Oslo", "nights": 2}},
        {},
    ],
)
def test_other_params_are_a_mismatch(changed: dict[str, Any]) -> None:
    s = sealer()
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    with pytest.raises(StateMismatch) as caught:
        s.open(state, method=METHOD, params={**changed, "requestState": state})
    assert caught.value.reason == "params_mismatch"


def test_the_params_digest_is_canonical() -> None:
    reordered = {
        "arguments": {"nights": 2.0, "city": "Oslo"},
        "name": "book",
        "_meta": {"progressToken": 7},
    }
    assert params_digest(reordered) == params_digest(PARAMS)
    assert (
        params_digest(None)
        == params_digest({})
        == params_digest({"_meta": {}, "inputResponses": {}, "requestState": "x"})
    )
    assert params_digest({"a": 1.5}) != params_digest({"a": 1})
    assert params_digest([1, 2]) != params_digest([2, 1]) != params_digest({})  # type: ignore[arg-type]
    # only the top level is excluded: a tool argument called _meta still counts
    assert params_digest({"arguments": {"_meta": 1}}) != params_digest({"arguments": {}})


def test_the_principal_is_bound() -> None:
    s = sealer()
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS, principal="alice")
    assert s.open(state, method=METHOD, params=PARAMS, principal="alice") == PAYLOAD
    for other in ("bob", None, "alice "):
        with pytest.raises(StateMismatch) as caught:
            s.open(state, method=METHOD, params=PARAMS, principal=other)
        assert caught.value.reason == "principal_mismatch"
    anonymous = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    with pytest.raises(StateMismatch):
        s.open(anonymous, method=METHOD, params=PARAMS, principal="alice")


# --------------------------------------------------------------------------- size and garbage


def test_oversize_states_are_rejected_before_parsing() -> None:
    big = sealer(max_chars=100_000).seal({"blob": "x" * 5000}, method=METHOD, params=PARAMS)
    with pytest.raises(StateTooLarge):  # authentic, but over this sealer's bound
        sealer(max_chars=1000).open(big, method=METHOD, params=PARAMS)
    with pytest.raises(StateTooLarge):
        sealer().open("\x00" * 70_000, method=METHOD, params=PARAMS)


def test_sealing_an_oversize_payload_is_a_local_error() -> None:
    with pytest.raises(PayloadTooLarge) as caught:
        sealer(max_chars=1000).seal({"blob": "x" * 5000}, method=METHOD, params=PARAMS)
    assert not isinstance(caught.value, RequestStateError)


@pytest.mark.parametrize(
    "garbage",
    [
        None,
        42,
        b"v1.k1.e30.AAAA",
        ["v1"],
        "",
        "v1",
        "v1.k1",
        "v1.k1.e30",
        "v1.k1.e30.short",
        "v2.k1.e30." + "A" * 43,
        "v1.k1.e30." + "A" * 44,
        "v1.k1.e30=." + "A" * 43,
        "v1..e30." + "A" * 43,
        "v1.k1.e30.x." + "A" * 43,
        "v1.k1.é30." + "A" * 43,
        " v1.k1.e30." + "A" * 43,
        "v1.k1.e30." + "A" * 43 + "\n",
    ],
)
def test_garbage_is_malformed(garbage: object) -> None:
    with pytest.raises(StateMalformed):
        sealer().open(garbage, method=METHOD, params=PARAMS)


def test_every_failure_is_one_invalid_params_error_with_a_reason() -> None:
    clock = Clock()
    s = sealer(clock=clock, ttl=1)
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    failures: dict[str, Any] = {
        "malformed": lambda: s.open("nonsense", method=METHOD, params=PARAMS),
        "too_large": lambda: s.open("x" * 70_000, method=METHOD, params=PARAMS),
        "bad_signature": lambda: s.open(
            replace_char(state, len(state) - 1), method=METHOD, params=PARAMS
        ),
        "unknown_key": lambda: s.open(
            state.replace(".k1.", ".k9.", 1), method=METHOD, params=PARAMS
        ),
        "method_mismatch": lambda: s.open(state, method="resources/read", params=PARAMS),
        "params_mismatch": lambda: s.open(state, method=METHOD, params={}),
    }
    for reason, attempt in failures.items():
        with pytest.raises(RequestStateError) as caught:
            attempt()
        error = caught.value.to_error_object()
        assert error["code"] == INVALID_PARAMS
        assert error["data"] == {"reason": reason}
        assert "requestState" in error["message"] and state not in error["message"]
    clock.now += 1
    with pytest.raises(StateExpired) as expired:
        s.open(state, method=METHOD, params=PARAMS)
    assert expired.value.to_error_object()["data"] == {"reason": "expired"}


# --------------------------------------------------------------------------- key rings


def test_a_rotated_key_still_verifies_until_it_is_dropped() -> None:
    old_state = sealer(ring(old=SECRET_A)).seal(PAYLOAD, method=METHOD, params=PARAMS)
    rotated = KeyRing({"old": SECRET_A, "new": SECRET_B}, current="new")
    s = sealer(rotated)
    assert s.open(old_state, method=METHOD, params=PARAMS) == PAYLOAD
    new_state = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    assert parts(new_state)[1] == "new"
    with pytest.raises(StateKeyUnknown):
        sealer(ring(new=SECRET_B)).open(old_state, method=METHOD, params=PARAMS)
    assert sealer(ring(new=SECRET_B)).open(new_state, method=METHOD, params=PARAMS) == PAYLOAD


def test_key_ring_from_string_and_env() -> None:
    k1, k2 = generate_key(), generate_key()
    keys = KeyRing.from_string(f" 2026-12:{k1} , 2026-11:{k2}=,")
    assert keys.current_id == "2026-12"
    assert list(keys.ids()) == ["2026-12", "2026-11"]
    assert keys.secret("2026-11") == base64.urlsafe_b64decode(k2 + "=" * (-len(k2) % 4))
    from_env = KeyRing.from_env(environ={DEFAULT_ENV_VAR: f"2026-12:{k1}"})
    assert from_env.secret("2026-12") == keys.secret("2026-12")
    assert k1 not in repr(keys) and "2026-12" in repr(keys)
    mapped = KeyRing.from_mapping({"a": k1, "b": SECRET_B}, current="b")
    assert mapped.current_id == "b" and mapped.secret("b") == SECRET_B


@pytest.mark.parametrize(
    "text",
    [
        "",
        "k1",
        f"k1:{'A' * 10}",
        f"k1:{generate_key()},k1:{generate_key()}",
        f"bad.id:{generate_key()}",
        f"k1:{generate_key()}!",
        f"{'x' * 65}:{generate_key()}",
    ],
)
def test_bad_key_ring_configuration_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        KeyRing.from_string(text)


def test_key_ring_constructor_checks() -> None:
    with pytest.raises(ValueError):
        KeyRing({}, current="k1")
    with pytest.raises(ValueError):
        KeyRing({"k1": b"short"}, current="k1")
    with pytest.raises(ValueError):
        KeyRing({"k1": SECRET_A}, current="k2")
    with pytest.raises(ValueError):
        KeyRing.from_env("MCP_SYNC_TEST_UNSET_VARIABLE", environ={})


def test_ephemeral_rings_are_all_different() -> None:
    a, b = KeyRing.ephemeral(), KeyRing.ephemeral()
    assert a.current_id != b.current_id
    state = sealer(a).seal(PAYLOAD, method=METHOD, params=PARAMS)
    assert sealer(a).open(state, method=METHOD, params=PARAMS) == PAYLOAD
    with pytest.raises(StateKeyUnknown):
        sealer(b).open(state, method=METHOD, params=PARAMS)


# --------------------------------------------------------------------------- two processes

CHILD = """
import json, sys
from mcp_sync.errors import RequestStateError
from mcp_sync.request_state import KeyRing, StateSealer
mode, ring_kind = sys.argv[1], sys.argv[2]
keys = KeyRing.from_env() if ring_kind == "env" else KeyRing.ephemeral()
sealer = StateSealer(keys)
request = json.loads(sys.stdin.read())
if mode == "seal":
    print(sealer.seal(request["payload"], method=request["method"], params=request["params"]))
else:
    try:
        print(json.dumps({"payload": sealer.open(request["state"], method=request["method"], params=request["params"])}))
    except RequestStateError as exc:
        print(json.dumps({"error": exc.to_error_object()}))
"""


def run_child(
    mode: str, request: dict[str, Any], *, keys: str | None, ring_kind: str = "env"
) -> str:
    env = user_env()
    env.pop(DEFAULT_ENV_VAR, None)
    if keys is not None:
        env[DEFAULT_ENV_VAR] = keys
    done = subprocess.run(
        [PYTHON, "-c", CHILD, mode, ring_kind],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def shared_keys() -> str:
    return f"current:{generate_key()},previous:{generate_key()}"


def test_a_state_sealed_in_another_process_opens_here(shared_keys: str) -> None:
    state = run_child(
        "seal", {"payload": PAYLOAD, "method": METHOD, "params": PARAMS}, keys=shared_keys
    )
    here = StateSealer(KeyRing.from_env(environ={DEFAULT_ENV_VAR: shared_keys}))
    assert here.open(state, method=METHOD, params=retry_params(state)) == PAYLOAD
    with pytest.raises(StateMismatch):
        here.open(state, method=METHOD, params={"name": "other"})


def test_a_state_sealed_here_opens_in_another_process(shared_keys: str) -> None:
    here = StateSealer(KeyRing.from_env(environ={DEFAULT_ENV_VAR: shared_keys}))
    state = here.seal(PAYLOAD, method=METHOD, params=PARAMS)
    answer = json.loads(
        run_child(
            "open",
            {"state": state, "method": METHOD, "params": retry_params(state)},
            keys=shared_keys,
        )
    )
    assert answer == {"payload": PAYLOAD}
    tampered = json.loads(
        run_child(
            "open",
            {"state": replace_char(state, 20), "method": METHOD, "params": PARAMS},
            keys=shared_keys,
        )
    )
    assert tampered["error"]["code"] == INVALID_PARAMS
    assert tampered["error"]["data"] == {"reason": "bad_signature"}


def test_a_process_holding_only_the_previous_key_and_one_rotated_past_it_agree() -> None:
    old, new = generate_key(), generate_key()
    state = run_child(
        "seal", {"payload": PAYLOAD, "method": METHOD, "params": PARAMS}, keys=f"old:{old}"
    )
    rotated = StateSealer(KeyRing.from_string(f"new:{new},old:{old}"))
    assert rotated.open(state, method=METHOD, params=PARAMS) == PAYLOAD
    fresh = rotated.seal(PAYLOAD, method=METHOD, params=PARAMS)
    stale = json.loads(
        run_child("open", {"state": fresh, "method": METHOD, "params": PARAMS}, keys=f"old:{old}")
    )
    assert stale["error"]["data"] == {"reason": "unknown_key"}


def test_ephemeral_rings_fail_across_processes() -> None:
    state = StateSealer(KeyRing.ephemeral()).seal(PAYLOAD, method=METHOD, params=PARAMS)
    answer = json.loads(
        run_child(
            "open",
            {"state": state, "method": METHOD, "params": PARAMS},
            keys=None,
            ring_kind="ephemeral",
        )
    )
    assert answer["error"]["data"] == {"reason": "unknown_key"}


# --------------------------------------------------------------------------- optional encryption

needs_cryptography = pytest.mark.skipif(
    not encryption_available(), reason="cryptography is not installed"
)


def b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@needs_cryptography
def test_an_encrypted_state_round_trips_and_hides_its_payload() -> None:
    s = sealer(encrypt=True)
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS, principal="alice")
    prefix, key_id, blob = parts(state)
    assert (prefix, key_id) == ("e1", "k1")
    assert b"2026-12-24" not in b64decode(blob) and b"tools/call" not in b64decode(blob)
    assert s.open(state, method=METHOD, params=retry_params(state), principal="alice") == PAYLOAD
    # either form opens with the same ring, so switching encryption on or off keeps states valid
    assert sealer().open(state, method=METHOD, params=PARAMS, principal="alice") == PAYLOAD
    plain = sealer().seal(PAYLOAD, method=METHOD, params=PARAMS)
    assert s.open(plain, method=METHOD, params=PARAMS) == PAYLOAD


@needs_cryptography
@pytest.mark.parametrize("padding", ["", "x", "xx"])
def test_every_changed_character_of_an_encrypted_state_is_refused(padding: str) -> None:
    s = sealer(ring(k1=SECRET_A, k2=SECRET_B), encrypt=True)
    state = s.seal({**PAYLOAD, "pad": padding}, method=METHOD, params=PARAMS)
    for index in range(len("e1.k1."), len(state)):
        # the last character may only change bits that base64 leaves unused
        with pytest.raises((StateTampered, StateMalformed)):
            s.open(replace_char(state, index), method=METHOD, params=PARAMS)
    with pytest.raises(StateTampered):  # the key id is authenticated too
        s.open(state.replace("e1.k1.", "e1.k2.", 1), method=METHOD, params=PARAMS)
    with pytest.raises(StateKeyUnknown):
        s.open(state.replace("e1.k1.", "e1.k9.", 1), method=METHOD, params=PARAMS)
    with pytest.raises(StateTampered):
        sealer(ring(k1=SECRET_B)).open(state, method=METHOD, params=PARAMS)
    for garbage in (
        "e1.k1.short",
        "e1.k1." + "A" * 41,
        "e1.k1." + "A" * 45,
        "e1.k1." + "A" * 40 + "=",
    ):
        with pytest.raises(StateMalformed):
            s.open(garbage, method=METHOD, params=PARAMS)


@needs_cryptography
def test_an_encrypted_state_is_bound_like_a_signed_one() -> None:
    clock = Clock()
    s = sealer(encrypt=True, clock=clock, ttl=10)
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    with pytest.raises(StateMismatch):
        s.open(state, method="prompts/get", params=PARAMS)
    with pytest.raises(StateMismatch):
        s.open(state, method=METHOD, params={"name": "book"})
    clock.now += 10
    with pytest.raises(StateExpired):
        s.open(state, method=METHOD, params=PARAMS)


@needs_cryptography
def test_an_encrypted_state_opens_in_another_process(shared_keys: str) -> None:
    state = StateSealer(KeyRing.from_string(shared_keys), encrypt=True).seal(
        PAYLOAD, method=METHOD, params=PARAMS
    )
    answer = json.loads(
        run_child("open", {"state": state, "method": METHOD, "params": PARAMS}, keys=shared_keys)
    )
    assert answer == {"payload": PAYLOAD}


WITHOUT_CRYPTOGRAPHY = """
import json, sys
sys.modules["cryptography"] = None  # as if it were not installed
from mcp_sync.errors import StateMalformed
from mcp_sync.request_state import KeyRing, StateSealer, encryption_available
assert not encryption_available()
keys = KeyRing.from_env()
try:
    StateSealer(keys, encrypt=True)
except RuntimeError:
    pass
else:
    raise SystemExit("encrypt=True accepted without cryptography")
try:
    StateSealer(keys).open(sys.stdin.read(), method="tools/call", params={})
except StateMalformed as exc:
    print(json.dumps(exc.to_error_object()))
"""


@needs_cryptography
def test_without_cryptography_encryption_is_refused_and_encrypted_states_are_malformed(
    shared_keys: str,
) -> None:
    state = StateSealer(KeyRing.from_string(shared_keys), encrypt=True).seal(
        None, method=METHOD, params={}
    )
    env = {**user_env(), DEFAULT_ENV_VAR: shared_keys}
    done = subprocess.run(
        [PYTHON, "-c", WITHOUT_CRYPTOGRAPHY],
        input=state,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"] == {"reason": "malformed"}


# --------------------------------------------------------------------------- single use


def test_with_a_replay_guard_a_state_opens_once() -> None:
    s = sealer(replay_guard=MemoryReplayGuard())
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    with pytest.raises(StateMismatch):  # a refused attempt does not use the state up
        s.open(state, method=METHOD, params={"name": "other"})
    assert s.open(state, method=METHOD, params=PARAMS) == PAYLOAD
    with pytest.raises(StateReplayed) as caught:
        s.open(state, method=METHOD, params=PARAMS)
    assert caught.value.to_error_object()["data"] == {"reason": "replayed"}
    assert (
        s.open(s.seal(PAYLOAD, method=METHOD, params=PARAMS), method=METHOD, params=PARAMS)
        == PAYLOAD
    )
    assert sealer().open(state, method=METHOD, params=PARAMS) == PAYLOAD, (
        "the guard belongs to one sealer"
    )


def test_concurrent_opens_of_one_state_let_exactly_one_through() -> None:
    s = sealer(replay_guard=MemoryReplayGuard())
    state = s.seal(PAYLOAD, method=METHOD, params=PARAMS)
    workers = 8
    barrier = threading.Barrier(workers)
    outcomes: list[str] = []
    lock = threading.Lock()

    def attempt() -> None:
        barrier.wait(timeout=30)
        try:
            s.open(state, method=METHOD, params=PARAMS)
            outcome = "opened"
        except StateReplayed:
            outcome = "replayed"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=attempt) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes) == ["opened"] + ["replayed"] * (workers - 1)


def test_the_memory_guard_forgets_expired_nonces_and_stays_bounded() -> None:
    clock = Clock()
    guard = MemoryReplayGuard(max_entries=2, clock=clock)
    assert guard.claim("a", clock.now + 10) and guard.claim("b", clock.now + 20)
    assert not guard.claim("a", clock.now + 10)
    assert guard.claim("c", clock.now + 30)  # full: "a", expiring soonest, is forgotten
    assert (
        len(guard) == 2
        and not guard.claim("b", clock.now + 20)
        and not guard.claim("c", clock.now + 30)
    )
    clock.now += 25
    assert guard.claim("d", clock.now + 10)  # "b" expired and is forgotten
    assert len(guard) == 2
    with pytest.raises(ValueError):
        MemoryReplayGuard(max_entries=0)
