"""Cancellation storms: random plans of calls and cancels, and the judge of a storm.

A storm sends hundreds of ``work`` calls to the storm server (``tests/peers/storm_server.py``)
and cancels many of them at random moments. :func:`judge` then holds three records against
each other -- the calls the client made (:class:`CallPlan`), every message the server wrote
(as the client read it) and the handlers' own journal -- and asserts the guarantees:

* a request whose cancellation won (its handler's token fired with the client's reason, or
  it never started) gets nothing more, of any kind: no result, no error; no progress or log
  message that its handler *began* after the token fired was written (each such call
  returned False), and exactly the ones that returned True are on the wire;
* every other request is answered exactly once, with its own result, and none of its
  notifications was withheld;
* exactly one of completion and cancellation wins per request, by the handler's record;
* on the wire itself, nothing about a request whose cancellation won follows the answer to
  any request the client wrote after that cancellation;
* at 2026-07-28 a call gets log messages only at the level its ``_meta`` asked for;
* the server writes nothing else: no request (2026-07-28: never), no
  ``notifications/cancelled``, no answer to a cancellation, however malformed.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ERAS = (LEGACY, MODERN)

ENVELOPE: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "storm", "version": "0"},
    "io.modelcontextprotocol/logLevel": "debug",
}
"""The ``_meta`` of every 2026-07-28 request of a storm (it asks for log messages)."""

LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"

CANCEL_ENVELOPE = {k: v for k, v in ENVELOPE.items() if k != LOG_LEVEL_KEY}
"""What the TypeScript client puts in its cancellations' ``_meta``."""

INIT_PARAMS = {
    "protocolVersion": LEGACY,
    "capabilities": {},
    "clientInfo": {"name": "storm", "version": "0"},
}

STEP_KINDS = ("progress", "log", "spin", "pause")


def stamp(params: dict[str, Any], era: str, log_level: str | None = "debug") -> dict[str, Any]:
    """``params`` as a request of ``era`` sends them: at 2026 the envelope merged in, asking
    for log messages at ``log_level`` and above (``None``: for none)."""
    if era != MODERN:
        return params
    meta = {k: v for k, v in ENVELOPE.items() if k != LOG_LEVEL_KEY}
    if log_level is not None:
        meta[LOG_LEVEL_KEY] = log_level
    out = dict(params)
    out["_meta"] = {**dict(params.get("_meta") or {}), **meta}
    return out


def work_params(plan: CallPlan) -> dict[str, Any]:
    return {
        "name": "work",
        "arguments": {"tag": plan.tag, "steps": plan.steps, "honour": plan.honour},
    }


@dataclass
class CallPlan:
    """One call of a storm, and what the client did to it."""

    tag: str
    steps: list[str]
    honour: bool
    cancel_at: str
    """``never``, ``at once``, ``later`` (after a random moment), ``on progress`` (when its
    first progress arrives), ``after answer`` (once answered: a completed cancel),
    ``timeout`` (the client's own timeout cancels it), ``answer crossing`` (the server's
    answer is on its way but not yet read when the client cancels: the completion wins)."""
    delay: int = 0
    timeout: float | None = None
    log_level: str | None = "debug"
    """The log level the call asks for at 2026-07-28 (its handler logs at ``info``)."""
    request_id: Any = None
    progress_token: Any = None
    cancels_sent: int = 0
    outcome: str = ""
    """What the client saw: ``result``, ``cancelled``, ``error``."""

    @property
    def reason(self) -> str:
        """The reason its cancellation carries (a timeout's says so)."""
        if self.timeout is not None:
            return f"timed out after {self.timeout:g} s"
        return f"storm cancels {self.tag}"


def make_plans(
    rng: random.Random, count: int, prefix: str = "c", *, timeouts: bool = False
) -> list[CallPlan]:
    """``count`` random calls: random steps (some handlers ignore their token), about a
    third never cancelled, the rest cancelled at every kind of moment (with ``timeouts``,
    some by the client's own short timeout)."""
    plans = []
    moments = [
        "never",
        "at once",
        "later",
        "on progress",
        "after answer",
        "answer crossing",
        "timeout",
    ]
    for n in range(count):
        steps = [rng.choice(STEP_KINDS) for _ in range(rng.randrange(0, 9))]
        cancel_at = rng.choices(moments, weights=[30, 15, 30, 15, 5, 5, 10 if timeouts else 0])[0]
        honour = rng.random() < 0.5
        if not honour:  # goes on reporting after its token fired: all of it must be withheld
            steps += ["pause", "progress", "log"]
        if cancel_at == "on progress":  # the handler waits for the cancel its progress brings
            at = rng.randrange(len(steps) + 1)
            steps[at:at] = ["progress", "hold"]
        timeout = rng.choice([0.0005, 0.001, 0.002, 0.004]) if cancel_at == "timeout" else None
        plan = CallPlan(
            f"{prefix}{n}", steps, honour, cancel_at, delay=rng.randrange(0, 3000), timeout=timeout
        )
        plan.log_level = rng.choices(["debug", "info", "warning", None], weights=[60, 15, 15, 10])[
            0
        ]
        plans.append(plan)
    return plans


def spin(n: int) -> None:
    for _ in range(n):
        pass


def _key(value: Any) -> tuple[type, Any]:
    return (type(value), value)


@dataclass
class Verdict:
    """How the requests of a storm ended, by the handler's record."""

    counts: Counter[str] = field(default_factory=Counter)

    def check_mix(self) -> None:
        """The storm really raced: every kind of ending happened."""
        for kind in (
            "answered",
            "cancel won while running",
            "cancel won while queued",
            "cancel lost",
        ):
            assert self.counts[kind] > 0, f"no request ended as {kind!r}: {dict(self.counts)}"
        assert self.counts["withheld after cancel"] > 0, dict(self.counts)


def check_era(received: list[Any], era: str) -> None:
    """Every result the server wrote is of ``era``: ``resultType`` on each at 2026-07-28, on
    none at 2025-11-25 (so the storm really ran in the era it names)."""
    results = [
        m["result"] for m in received if isinstance(m, dict) and isinstance(m.get("result"), dict)
    ]
    assert results, "no result on the wire"
    typed = [r for r in results if "resultType" in r]
    if era == MODERN:
        assert len(typed) == len(results), f"a 2026-07-28 result without resultType: {results}"
    else:
        assert typed == [], f"a 2025-11-25 result with resultType: {typed}"


def _answer_after_cancel(
    plan: CallPlan, sent: list[Any], answer_at: dict[tuple[type, Any], int]
) -> int | None:
    """Where on the wire the first answer to a request written after ``plan``'s first
    cancellation is (``None`` if there is none)."""
    target = _key(plan.request_id)
    first = next(
        (
            n
            for n, m in enumerate(sent)
            if isinstance(m, dict)
            and m.get("method") == "notifications/cancelled"
            and isinstance(m.get("params"), dict)
            and "requestId" in m["params"]
            and _key(m["params"]["requestId"]) == target
        ),
        None,
    )
    if first is None:
        return None
    later = [
        answer_at.get(_key(m["id"]))
        for m in sent[first + 1 :]
        if isinstance(m, dict) and "method" in m and "id" in m
    ]
    positions = [p for p in later if p is not None]
    return min(positions) if positions else None


def judge(
    plans: Iterable[CallPlan],
    received: list[Any],
    journal: list[dict[str, Any]],
    *,
    era: str,
    other_ids: Iterable[Any] = (),
    sent: list[Any] | None = None,
) -> Verdict:
    """Assert the guarantees of a storm (see the module docstring); ``received`` is every
    message the server wrote, decoded, in order; ``other_ids`` the ids of the client's
    requests that are not storm calls (``initialize``, ``settle``).

    With ``sent`` (every message the client wrote, in the order written) the wire's own order
    is checked too: the server reads in order and queues what it writes in order, so once it
    answers a request written after a cancellation that won, nothing more about the cancelled
    request may follow on the wire.
    """
    plans = list(plans)
    by_id = {_key(p.request_id): p for p in plans}
    assert len(by_id) == len(plans), "two storm calls shared an id"
    by_token = {_key(p.progress_token): p for p in plans if p.progress_token is not None}
    by_tag = {p.tag: p for p in plans}
    others = {_key(i) for i in other_ids}

    responses: dict[str, list[Any]] = defaultdict(list)
    progress: Counter[str] = Counter()
    logs: Counter[str] = Counter()
    last_about: dict[str, int] = {}
    answer_at: dict[tuple[type, Any], int] = {}
    for position, message in enumerate(received):
        assert isinstance(message, dict), (
            f"the server wrote a line that is not a JSON object: {message!r}"
        )
        assert message.get("jsonrpc") == "2.0", message
        if "method" in message:
            assert "id" not in message, f"the server sent a request: {message}"
            method, params = message["method"], message.get("params") or {}
            if method == "notifications/progress":
                plan = by_token.get(_key(params.get("progressToken")))
                assert plan is not None, f"progress for no storm call: {message}"
                progress[plan.tag] += 1
                last_about[plan.tag] = position
            elif method == "notifications/message":
                data = params.get("data")
                assert isinstance(data, dict) and data.get("storm") in by_tag, (
                    f"a log message of no call: {message}"
                )
                logs[data["storm"]] += 1
                last_about[data["storm"]] = position
            else:
                raise AssertionError(f"the server sent an unexpected notification: {message}")
            continue
        key = _key(message.get("id"))
        answer_at.setdefault(key, position)
        if key in others:
            continue
        plan = by_id.get(key)
        assert plan is not None, (
            f"an answer to no request of ours (a cancellation answered?): {message}"
        )
        responses[plan.tag].append(message)
        last_about[plan.tag] = position

    events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in journal:
        events[event["tag"]].append(event)
    verdict = Verdict()
    counts = verdict.counts
    for plan in plans:
        mine = events.get(plan.tag, [])
        answered = responses.get(plan.tag, [])
        where = f"call {plan.tag} (id {plan.request_id!r}, cancel {plan.cancel_at}, honour={plan.honour})"
        assert len(answered) <= 1, f"{where}: answered {len(answered)} times: {answered}"
        started = [e for e in mine if e["kind"] == "start"]
        cancels = [e for e in mine if e["kind"] == "cancel"]
        assert len(started) <= 1 and len(cancels) <= 1, f"{where}: {mine}"
        assert all(e["reason"] == plan.reason for e in cancels), (
            f"{where}: its token fired for another reason: {cancels}"
        )
        if cancels:
            assert plan.cancels_sent, f"{where}: its token fired but the client never cancelled it"
        holds = [e for e in mine if e["kind"] == "hold"]
        assert all(e["cancelled"] for e in holds), (
            f"{where}: held for a cancellation that never came: {mine}"
        )
        # at 2026 a call gets log messages only at the level it asked for (info is logged)
        logs_wanted = era != MODERN or plan.log_level in ("debug", "info")
        unwanted = [e for e in mine if e["kind"] == "log" and not logs_wanted]
        assert not any(e["sent"] for e in unwanted), (
            f"{where}: a log message it did not ask for was written"
        )
        reports = [
            e for e in mine if e["kind"] == "progress" or (e["kind"] == "log" and logs_wanted)
        ]
        sent_progress = sum(1 for e in reports if e["kind"] == "progress" and e["sent"])
        sent_logs = sum(1 for e in reports if e["kind"] == "log" and e["sent"])
        assert progress[plan.tag] == sent_progress, (
            f"{where}: {progress[plan.tag]} progress notifications on the wire, the handler sent {sent_progress}"
        )
        assert logs[plan.tag] == sent_logs, (
            f"{where}: {logs[plan.tag]} log messages on the wire, the handler sent {sent_logs}"
        )
        cancel_won = bool(cancels) or not started
        assert cancel_won != bool(answered), (
            f"{where}: cancellation won={cancel_won} (token fired={bool(cancels)}, started={bool(started)})"
            f" but answers={answered}"
        )
        if cancel_won and sent is not None:
            bound = _answer_after_cancel(plan, sent, answer_at)
            if bound is not None:
                assert last_about.get(plan.tag, -1) < bound, (
                    f"{where}: a message about it followed the answer to a request written after its"
                    " cancellation"
                )
                counts["ordered after cancel"] += 1
        if not started:
            assert plan.cancels_sent, f"{where}: never ran and was never cancelled"
            assert mine == [], f"{where}: {mine}"
            counts["cancel won while queued"] += 1
            continue
        if cancels:
            fired = cancels[0]["seq"]
            late = [e for e in reports if e["began"] > fired and e["sent"]]
            assert late == [], f"{where}: written after its cancellation won: {late}"
            counts["withheld after cancel"] += sum(1 for e in reports if not e["sent"])
            counts["cancel won while running"] += 1
            continue
        assert all(e["sent"] for e in reports), (
            f"{where}: a notification of a running request was withheld: {reports}"
        )
        (answer,) = answered
        assert "result" in answer, f"{where}: answered with an error: {answer}"
        assert answer["result"].get("structuredContent") == {"tag": plan.tag}, (
            f"{where}: got another result: {answer}"
        )
        counts["cancel lost" if plan.cancels_sent else "answered"] += 1
    return verdict
