"""2026-07-28 under a real ``gunicorn -w 4 -k gthread``: any worker serves any request.

The app (``tests/peers/gunicorn_modern_app.py``) reads its ``requestState`` key ring from
``MCP_SYNC_STATE_KEYS``; its handlers append markers naming their worker's pid to one file.
Each worker takes at most ``THREADS`` connections (``--worker-connections``) and the server
closes every connection after its answer (``--keep-alive 0``), so a worker holding that many
open streams accepts nothing more: holding the streams of three workers routes every new
request to the fourth. That makes the spread deterministic:

1. 16 held calls fill all four workers (4 each: every worker serves calls).
2. For each worker in turn, its held streams are closed (those handlers see their tokens),
   then it alone serves ``server/discover``, the lists, the first round of an input request,
   and the retry of the round the previous worker answered (so every retry lands on another
   worker than its first round), before it is filled again.
3. The rest of the 200 ``tools/call`` requests run from 16 threads at random: quick calls,
   input rounds (each round its own connection, any worker) and calls cancelled by closing
   their stream after a random number of keep-alive comments.

Judged from both ends: every call ends exactly once (answered, or cancelled and never
answered), every cancelled handler's ``CANCELLED`` marker, gunicorn's access log (the worker
that served each ``Mcp-Method``), and after ``SIGTERM`` the master and all four workers gone.
A second test drives the same deployment with mcp_sync's own ``Client.http``.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.http import ACCEPT_BOTH
from support.paths import PEERS, PYTHON
from support.processes import Proc, user_env

from mcp_sync import Client, Context
from mcp_sync.request_state import DEFAULT_ENV_VAR, generate_key

pytest.importorskip("gunicorn")

MODERN = "2026-07-28"
WORKERS = 4
THREADS = 4
CALLS = 200
LIMIT = 60.0
"""Bound of every wait on the deployment (a busy 2-core machine runs 4 workers and 16 client
threads)."""
ELICITATION: dict[str, Any] = {"elicitation": {"form": {}}}
ADA = {"action": "accept", "content": {"name": "Ada"}}
ACCESS = re.compile(r"^ACCESS <(\d+)> (\S+) (\d{3})$")


# -- the deployment ---------------------------------------------------------------------------
class Markers:
    """The handlers' markers (``KIND TOOL TAG PID``), read from the shared file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[tuple[str, str, str, int]]:
        if not self.path.exists():
            return []
        found = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            kind, tool, tag, pid = line.split()
            found.append((kind, tool, tag, int(pid)))
        return found

    def of(self, kind: str, tag: str) -> list[int]:
        """The pids of the ``kind`` markers written for ``tag``."""
        return [pid for k, _, t, pid in self.lines() if (k, t) == (kind, tag)]

    def wait(self, kind: str, tags: list[str], timeout: float = LIMIT) -> dict[str, int]:
        """Wait until each of ``tags`` has a ``kind`` marker: ``{tag: pid}``."""
        end = time.monotonic() + timeout
        pause = threading.Event()
        while True:
            seen = {t: pid for k, _, t, pid in self.lines() if k == kind and t in tags}
            if len(seen) == len(tags):
                return seen
            missing = sorted(set(tags) - set(seen))
            assert time.monotonic() < end, f"no {kind} marker within {timeout} s for {missing}"
            pause.wait(0.01)


@dataclass
class Deployment:
    url: str
    proc: Proc
    workers: list[int]
    markers: Markers

    def access(self) -> list[tuple[int, str, int]]:
        """``(worker pid, Mcp-Method, status)`` of every request gunicorn logged."""
        rows = []
        for line in self.proc.text("stdout").splitlines():
            match = ACCESS.match(line.strip())
            if match:
                rows.append((int(match[1]), match[2], int(match[3])))
        return rows


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    argv = [
        PYTHON, "-m", "gunicorn", "-k", "gthread", "--workers", str(WORKERS),
        "--threads", str(THREADS), "--worker-connections", str(THREADS), "--keep-alive", "0",
        "--bind", "127.0.0.1:0", "--no-control-socket", "--graceful-timeout", "10",
        "--access-logfile", "-", "--access-logformat", "ACCESS %(p)s %({mcp-method}i)s %(s)s",
        "--pythonpath", str(PEERS), "gunicorn_modern_app:app",
    ]  # fmt: skip
    env = user_env(
        **{DEFAULT_ENV_VAR: f"ring-1:{generate_key()}", "PEER_EVENTS_FILE": str(tmp_path / "ev")}
    )
    with Proc(argv, env=env) as proc:
        line = proc.wait_for("stderr", "Listening at: ", LIMIT)
        match = re.search(r"Listening at: (http://127\.0\.0\.1:\d+)", line)
        assert match, line
        workers: list[int] = []
        index = 0
        while len(workers) < WORKERS:  # one "Booting worker with pid: N" line per worker
            booting = re.search(
                r"Booting worker with pid: (\d+)", proc.line_at("stderr", index, LIMIT)
            )
            if booting:
                workers.append(int(booting[1]))
            index += 1
        yield Deployment(match.group(1) + "/mcp", proc, workers, Markers(tmp_path / "ev"))
        proc.send_signal(signal.SIGTERM)
        finished = proc.finish(LIMIT)
        assert finished.code == 0, finished.describe()
        assert "Traceback" not in finished.stderr, finished.describe()
        gone = time.monotonic() + LIMIT
        while any(alive(pid) for pid in workers) and time.monotonic() < gone:
            threading.Event().wait(0.05)
        assert not [pid for pid in workers if alive(pid)], "gunicorn workers left behind"


# -- a raw 2026-07-28 client -----------------------------------------------------------------
def call_body(
    request_id: str, name: str, arguments: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, **extra, "_meta": envelope()},
    }


def plain(request_id: str, method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": envelope()}}


def envelope() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": ELICITATION,
        "io.modelcontextprotocol/clientInfo": {"name": "gunicorn-workers-test", "version": "1"},
    }


def request(http: httpx.Client, url: str, body: dict[str, Any]) -> httpx.Request:
    headers = {
        "Accept": ACCEPT_BOTH,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": body["method"],
    }
    if body["method"] == "tools/call":
        headers["Mcp-Name"] = body["params"]["name"]
    return http.build_request("POST", url, content=json.dumps(body), headers=headers)


def messages(response: httpx.Response, text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer, JSON or SSE."""
    if response.headers["content-type"].startswith("application/json"):
        return [json.loads(text)]
    return [
        json.loads(line[5:])
        for line in text.splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]


def answer(http: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` and return its one response (the answer must carry exactly one)."""
    response = http.send(request(http, url, body))
    assert response.status_code == 200, response.text
    found = messages(response, response.text)
    replies = [m for m in found if m.get("id") == body["id"]]
    assert len(replies) == 1 and "result" in replies[0], found
    assert [m for m in found if "id" in m and "method" in m] == [], "a request on the stream"
    return replies[0]["result"]  # type: ignore[no-any-return]


def tool_json(result: dict[str, Any]) -> dict[str, Any]:
    assert result["resultType"] == "complete" and not result.get("isError"), result
    return json.loads(result["content"][0]["text"])  # type: ignore[no-any-return]


@dataclass
class Held:
    """A ``hold`` call whose SSE stream is open (no answer read)."""

    tag: str
    response: httpx.Response
    seen: list[bytes] = field(default_factory=list)

    def read_pings(self, count: int) -> None:
        raw = self.response.iter_raw()
        while b"".join(self.seen).count(b": ping") < count:
            self.seen.append(next(raw))

    def close(self) -> None:
        """Cancel the call: close its stream (and connection) without reading the answer."""
        self.response.close()
        assert b"data:" not in b"".join(self.seen), "a held call was answered"


def open_hold(http: httpx.Client, url: str, tag: str) -> Held:
    response = http.send(request(http, url, call_body(tag, "hold", {"tag": tag})), stream=True)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    return Held(tag, response)


@dataclass
class Ledger:
    """What the client saw of each call: ``answered`` or ``cancelled``, once per request id."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    outcomes: dict[str, str] = field(default_factory=dict)

    def end(self, request_id: str, outcome: str) -> None:
        with self.lock:
            assert request_id not in self.outcomes, f"{request_id} ended twice"
            self.outcomes[request_id] = outcome


def book_first(http: httpx.Client, url: str, tag: str, ledger: Ledger) -> dict[str, Any]:
    first = answer(http, url, call_body(f"{tag}/1", "book", {"tag": tag}))
    ledger.end(f"{tag}/1", "answered")
    assert first["resultType"] == "input_required", first
    assert [r["method"] for r in first["inputRequests"].values()] == ["elicitation/create"]
    return first


def book_retry(
    http: httpx.Client, url: str, tag: str, first: dict[str, Any], ledger: Ledger
) -> dict[str, Any]:
    (key,) = first["inputRequests"]
    body = call_body(
        f"{tag}/2",
        "book",
        {"tag": tag},
        inputResponses={key: ADA},
        requestState=first["requestState"],
    )
    done = tool_json(answer(http, url, body))
    ledger.end(f"{tag}/2", "answered")
    assert done["name"] == "Ada"
    return done


def in_parallel(jobs: list[Callable[[], Any]]) -> list[Any]:
    with ThreadPoolExecutor(max_workers=WORKERS * THREADS) as pool:
        return [f.result() for f in [pool.submit(job) for job in jobs]]


def fill(http: httpx.Client, d: Deployment, tags: list[str]) -> dict[int, list[Held]]:
    """Open a held call for each of ``tags`` at once; ``{worker pid: its held calls}``."""
    held = in_parallel([partial(open_hold, http, d.url, tag) for tag in tags])
    pids = d.markers.wait("STARTED", tags)
    by_worker: dict[int, list[Held]] = defaultdict(list)
    for call in held:
        by_worker[pids[call.tag]].append(call)
    return by_worker


def cancel(d: Deployment, calls: list[Held], ledger: Ledger) -> None:
    for call in calls:
        call.close()
        ledger.end(call.tag, "cancelled")
    d.markers.wait("CANCELLED", [c.tag for c in calls])


# -- the test ---------------------------------------------------------------------------------
def test_200_calls_with_cancellations_and_input_rounds_over_4_workers(
    deployment: Deployment,
) -> None:
    d = deployment
    ledger = Ledger()
    discovers: list[dict[str, Any]] = []
    rounds: dict[str, tuple[int, int]] = {}  # book tag -> (pid of round 1, pid of round 2)
    limits = httpx.Limits(max_connections=WORKERS * THREADS * 2)
    with httpx.Client(timeout=LIMIT, limits=limits) as http:
        # 1. fill every worker: each takes exactly THREADS streams
        held = fill(http, d, [f"fill-{i}" for i in range(WORKERS * THREADS)])
        assert sorted(held) == sorted(d.workers), "not every worker serves calls"
        assert {len(calls) for calls in held.values()} == {THREADS}

        # 2. free one worker at a time: it alone serves what comes next
        order = [*d.workers, d.workers[0]]
        pending: tuple[str, dict[str, Any]] | None = None
        for step, worker in enumerate(order):
            cancel(d, held.pop(worker), ledger)
            discovers.append(answer(http, d.url, plain(f"d{step}", "server/discover")))
            listed = answer(http, d.url, plain(f"l{step}", "tools/list"))
            assert {tool["name"] for tool in listed["tools"]} == {"hold", "quick", "book"}
            if pending is not None:  # the previous worker's input round, retried here
                tag, first = pending
                done = book_retry(http, d.url, tag, first, ledger)
                assert done["pid"] == worker
                rounds[tag] = (d.markers.of("ROUND", tag)[0], done["pid"])
                pending = None
            if step < len(d.workers):
                tag = f"route-{step}"
                pending = (tag, book_first(http, d.url, tag, ledger))
                refill = fill(http, d, [f"refill-{step}-{i}" for i in range(THREADS)])
                assert list(refill) == [worker], "a freed worker's slots went elsewhere"
                held[worker] = refill[worker]
        for calls in list(held.values()):
            cancel(d, calls, ledger)
        held.clear()

        # 3. the rest at random, from many threads, on any worker
        seed = random.randrange(2**32)
        rng = random.Random(seed)
        plan: list[tuple[str, int]] = []
        made = len(ledger.outcomes)
        while made < CALLS:
            kind = rng.choices(["quick", "cancel", "book"], weights=[45, 35, 20])[0]
            if kind == "book" and made + 2 > CALLS:
                kind = "quick"
            plan.append((kind, rng.randrange(3)))
            made += 2 if kind == "book" else 1

        quick_pids: dict[str, int] = {}

        def run(index: int, kind: str, pings: int) -> None:
            tag = f"r{index}-{kind}"
            if kind == "quick":
                result = tool_json(answer(http, d.url, call_body(tag, "quick", {"tag": tag})))
                ledger.end(tag, "answered")
                quick_pids[tag] = result["pid"]
            elif kind == "book":
                first = book_first(http, d.url, tag, ledger)
                done = book_retry(http, d.url, tag, first, ledger)
                rounds[tag] = (d.markers.of("ROUND", tag)[0], done["pid"])
            else:
                call = open_hold(http, d.url, tag)
                d.markers.wait("STARTED", [tag])
                call.read_pings(pings)
                call.close()
                ledger.end(tag, "cancelled")

        in_parallel([partial(run, i, k, p) for i, (k, p) in enumerate(plan)])
        cancelled = [tag for tag, outcome in ledger.outcomes.items() if outcome == "cancelled"]
        d.markers.wait("CANCELLED", cancelled)

    # every call ended exactly once, on both ends
    assert len(ledger.outcomes) == CALLS, f"seed {seed}"
    lines = d.markers.lines()
    counts = Counter((kind, tag) for kind, _, tag, _ in lines)
    for tag in cancelled:  # each cancelled handler saw its token, once, and never finished
        assert (counts["STARTED", tag], counts["CANCELLED", tag]) == (1, 1), (tag, seed)
    assert not [line for line in lines if line[0] == "EXPIRED"], (
        f"a held call was never cancelled (seed {seed})"
    )
    for tag, pid in quick_pids.items():
        assert d.markers.of("DONE", tag) == [pid]
    for tag, (first_pid, second_pid) in rounds.items():
        assert counts["ROUND", tag] == 2 and counts["DONE", tag] == 1, (tag, seed)
        assert d.markers.of("ROUND", tag) == [first_pid, second_pid]
    # step 2 retried each input round on another worker than its first round
    routed = [rounds[f"route-{step}"] for step in range(WORKERS)]
    assert all(first != second for first, second in routed), routed
    assert {second for _, second in routed} == set(d.workers)
    assert {pid for *_, pid in lines} == set(d.workers)
    # discover and the lists were answered by every worker (the access log says which)
    assert all(MODERN in found["supportedVersions"] for found in discovers)
    served: dict[str, set[int]] = defaultdict(set)
    for pid, method, status in d.access():
        assert status == 200, (pid, method, status)
        served[method].add(pid)
    for method in ("server/discover", "tools/list", "tools/call"):
        assert served[method] == set(d.workers), (method, served[method])
    assert os.getpid() not in d.workers


# -- the same, through mcp_sync's own client ----------------------------------------------------
def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def test_our_client_calls_cancels_and_answers_input_rounds_over_4_workers(
    deployment: Deployment,
) -> None:
    """``Client.http`` negotiates 2026-07-28 against the deployment; from 8 threads it makes
    quick calls, input rounds (its elicitation handler answers) and calls it cancels with
    ``PendingCall.cancel()`` -- which closes their streams: each cancelled handler sees its
    token in whichever worker runs it."""
    d = deployment

    def elicit(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        return ADA

    kinds = ["quick", "book", "cancel"] * 8
    cancelled: list[str] = []
    lock = threading.Lock()
    with Client.http(d.url, elicitation_handler=elicit) as client:
        assert client.protocol_version == MODERN

        def run(index: int, kind: str) -> None:
            tag = f"c{index}-{kind}"
            if kind == "quick":
                done = json.loads(text_of(client.call_tool("quick", {"tag": tag})))
                assert d.markers.of("DONE", tag) == [done["pid"]]
            elif kind == "book":
                done = json.loads(text_of(client.call_tool("book", {"tag": tag})))
                assert done["name"] == "Ada"
                assert len(d.markers.of("ROUND", tag)) == 2
            else:
                call = client.call_tool_future("hold", {"tag": tag})
                d.markers.wait("STARTED", [tag])
                assert call.cancel("enough") is True
                with lock:
                    cancelled.append(tag)

        in_parallel([partial(run, i, k) for i, k in enumerate(kinds)])
    d.markers.wait("CANCELLED", cancelled)
    lines = d.markers.lines()
    assert not [line for line in lines if line[0] == "EXPIRED"]
    assert {pid for *_, pid in lines} <= set(d.workers)
    # nothing was POSTed for the cancels: at 2026-07-28 the closed stream is the cancel
    assert not [m for _, m, _ in d.access() if m.startswith("notifications/")]
