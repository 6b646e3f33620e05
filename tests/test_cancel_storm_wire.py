"""The cancellation storm end to end, judged by the raw wire.

The storm server (``tests/peers/storm_server.py``, public API only) runs as a subprocess; the
client is nothing but JSON lines written to its stdin and every line read back from its
stdout, so nothing in our client can hide a stray message. At 2026-07-28 every request
carries the envelope and a cancellation carries the TypeScript client's envelope, an empty
``_meta`` or none (the official Python client's); at 2025-11-25 the storm follows
``initialize``. Between the calls go cancellations that must be ignored: of unknown ids, of
answered requests, twice, and malformed ones (no ``requestId``, ``null``, ``true``, a float).
Request ids are integers and strings of the same value (``3`` and ``"3"`` in flight together).

The handlers' journal (written by the server at exit) and the wire are held against each
other by :func:`support.storm.judge`.
"""

from __future__ import annotations

import os
import random
import subprocess
import threading
import zlib
from typing import Any

import pytest
from peers.storm_server import Journal
from support.line_client import LineClient, same_id
from support.paths import PEERS, PYTHON, ROOT
from support.storm import (
    CANCEL_ENVELOPE,
    ERAS,
    INIT_PARAMS,
    LEGACY,
    MODERN,
    CallPlan,
    check_era,
    judge,
    make_plans,
    spin,
    stamp,
    work_params,
)
from support.waiting import WAIT

CALLS = 300
STORM_WAIT = 60.0
JUNK_CANCELS: list[dict[str, Any]] = [
    {"requestId": 10**9, "reason": "unknown id"},
    {"requestId": "no such id"},
    {"reason": "no requestId"},
    {"requestId": None},
    {"requestId": True},
    {"requestId": 1.5},
    {},
]


class ChildLines:
    """A child process's stdin and stdout as lines, nothing more."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr: Any) -> None:
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env
        )

    def read_line(self) -> bytes | None:
        assert self.process.stdout is not None
        return self.process.stdout.readline() or None

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def finish(self, client: LineClient) -> int:
        """Close stdin, read to the end, reap the child; its exit code."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        client.join(STORM_WAIT)
        return self.process.wait(WAIT)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(WAIT)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                stream.close()


def request(request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def cancellation(params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


def drive(client: LineClient, era: str, plans: list[CallPlan], rng: random.Random) -> None:
    """Send every call and its cancellation, interleaved at random, with junk cancels."""
    lock = threading.Lock()
    answered: set[str] = set()
    cancelled: set[str] = set()
    by_id = {(type(p.request_id), p.request_id): p for p in plans}
    by_token = {p.progress_token: p for p in plans}

    def cancel_params(plan: CallPlan) -> dict[str, Any]:
        params: dict[str, Any] = {"requestId": plan.request_id, "reason": plan.reason}
        style = rng.choice(["none", "envelope", "empty"] if era == MODERN else ["none", "empty"])
        if style == "envelope":
            params["_meta"] = dict(CANCEL_ENVELOPE)
        elif style == "empty":
            params["_meta"] = {}
        return params

    def cancel(plan: CallPlan, *, again: bool = False) -> None:
        with lock:
            if plan.tag in cancelled and not again:
                return
            cancelled.add(plan.tag)
        client.write(cancellation(cancel_params(plan)))

    def on_message(message: Any) -> None:  # on the reader thread: cancel on the first progress
        if not isinstance(message, dict):
            return
        if message.get("method") == "notifications/progress":
            plan = by_token.get((message.get("params") or {}).get("progressToken"))
            if plan is not None and plan.cancel_at == "on progress":
                cancel(plan)
        elif "method" not in message:
            plan = by_id.get((type(message.get("id")), message.get("id")))
            if plan is not None:
                with lock:
                    answered.add(plan.tag)

    client.on_message = on_message  # before the first call is written
    later: list[CallPlan] = []
    after_answer: list[CallPlan] = []
    for plan in plans:
        params = stamp(_with_token(work_params(plan), plan), era, plan.log_level)
        client.write(request(plan.request_id, "tools/call", params))
        if plan.cancel_at == "at once":
            cancel(plan)
        elif plan.cancel_at == "later":
            later.append(plan)
        elif plan.cancel_at in ("after answer", "answer crossing"):  # the same, on the wire
            after_answer.append(plan)
        if rng.random() < 0.05:
            client.write(cancellation(dict(rng.choice(JUNK_CANCELS))))
        if later and rng.random() < 0.5:
            target = later.pop(rng.randrange(len(later)))
            spin(target.delay)
            cancel(target)
            if rng.random() < 0.1:
                cancel(target, again=True)  # a second cancel: ignored
        for waiting in list(after_answer):
            with lock:
                done = waiting.tag in answered
            if done:
                after_answer.remove(waiting)
                cancel(waiting)  # a cancel of a completed request: ignored
    for plan in later:
        cancel(plan)
    for plan in after_answer:
        client.wait_answer(plan.request_id, STORM_WAIT)
        cancel(plan)


def _with_token(params: dict[str, Any], plan: CallPlan) -> dict[str, Any]:
    out = dict(params)
    out["_meta"] = {"progressToken": plan.progress_token}
    return out


@pytest.mark.parametrize("era", ERAS)
def test_cancellation_storm_on_the_raw_wire(era: str, fast_switching: None, tmp_path: Any) -> None:
    rng = random.Random(zlib.crc32(era.encode()))
    plans = make_plans(rng, CALLS, prefix="w")
    for n, plan in enumerate(plans):
        plan.request_id = n // 2 if n % 2 == 0 else str(n // 2)  # 3 and "3": two requests
        plan.progress_token = f"token-{n}" if n % 3 else 10_000 + n
    journal_path = tmp_path / "journal.jsonl"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "STORM_JOURNAL": str(journal_path),
        "STORM_WORKERS": "3",
        "STORM_SWITCH_INTERVAL": "1e-6",
    }
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        child = ChildLines([PYTHON, str(PEERS / "storm_server.py")], env, stderr)
        client = LineClient(child)
        try:
            if era == LEGACY:
                client.write(request("init", "initialize", INIT_PARAMS))
                assert "result" in client.wait_answer("init", STORM_WAIT)
                client.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
            drive(client, era, plans, rng)
            client.write(
                request("settle", "tools/call", stamp({"name": "settle", "arguments": {}}, era))
            )
            settled = client.wait_answer("settle", STORM_WAIT)
            assert settled["result"]["structuredContent"] == {"result": True}, settled
            code = child.finish(client)
        finally:
            child.kill()
            client.join()
    assert code == 0, (tmp_path / "stderr.txt").read_text()
    for plan in plans:
        plan.cancels_sent = sum(
            1
            for m in client.sent
            if m.get("method") == "notifications/cancelled"
            and "requestId" in m["params"]
            and same_id(m["params"]["requestId"], plan.request_id)
        )
    journal = Journal.load(journal_path)
    # the settle answer is the last thing about the storm; after it, nothing at all
    assert client.received[-1].get("id") == "settle", client.received[-3:]
    verdict = judge(
        plans, client.received, journal, era=era, other_ids=["init", "settle"], sent=client.sent
    )
    verdict.check_mix()
    assert verdict.counts["ordered after cancel"] > 0, dict(verdict.counts)
    check_era(client.received, era)
