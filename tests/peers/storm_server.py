"""A server for cancellation storms, written with the public API only, whose handlers keep
their own record (the *journal*) of what they did and saw.

Tool ``work(tag, steps, honour)`` runs ``steps`` in order -- ``"progress"`` (report
progress), ``"log"`` (log a message naming ``tag``), ``"spin"`` (busy loop), ``"pause"``
(wait a moment, waking on cancellation), ``"hold"`` (wait for the cancellation, bounded) --
and returns ``{"tag": tag}``. With ``honour`` it
stops at the first step after its token fired; without, it ignores the token and goes on to
the end, reporting and logging as it goes, and returns late.

The journal's events, each with a sequence number from one counter (so their order is the
order they happened in this process): ``start``, ``cancel`` (the request's token fired,
with its reason; recorded by the token's callback, which runs right after the cancellation
won), ``progress``/``log`` (``began``: the sequence number when the call began, ``sent``:
what it returned), ``return``.

Tool ``settle()`` returns once no ``work`` handler is running and every answer to one has
been queued for writing (bounded): its own answer, queued after them, is then the last
thing written about the storm, so a client that read it has read everything.

Run as a script it serves stdio and, at stdin EOF, writes the journal (one JSON object per
line) to the file named by ``STORM_JOURNAL``.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
from typing import Any

if __name__ == "__main__":  # run as a script from the working tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from mcp_sync import Context, Server

SETTLE_LIMIT = 30.0
HOLD_LIMIT = 10.0


class Journal:
    """The handlers' own record, in the order things happened."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self.events: list[dict[str, Any]] = []
        self._running = 0
        self._idle = threading.Condition(self._lock)

    def next_seq(self) -> int:
        with self._lock:
            return next(self._seq)

    def add(self, tag: str, kind: str, **detail: Any) -> int:
        with self._lock:
            seq = next(self._seq)
            self.events.append({"seq": seq, "tag": tag, "kind": kind, **detail})
            return seq

    def enter(self) -> None:
        with self._lock:
            self._running += 1

    def leave(self) -> None:
        with self._lock:
            self._running -= 1
            self._idle.notify_all()

    def dump(self, path: str) -> None:
        """Write the events to ``path``, one JSON object per line."""
        with self._lock, open(path, "w", encoding="utf-8") as out:
            for event in self.events:
                out.write(json.dumps(event) + "\n")

    @staticmethod
    def load(path: Any) -> list[dict[str, Any]]:
        """The events :meth:`dump` wrote to ``path``."""
        with open(path, encoding="utf-8") as lines:
            return [json.loads(line) for line in lines]

    def wait_idle(self, limit: float) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, limit)


def build_server(journal: Journal, *, max_workers: int = 3) -> Server:
    """The storm server, recording into ``journal``."""
    server = Server("storm", "1.0.0", max_workers=max_workers)

    @server.tool()
    def work(tag: str, steps: list[str], honour: bool, ctx: Context) -> dict[str, str]:
        """Run ``steps``; stop early on cancellation only if ``honour``."""
        journal.enter()
        try:
            journal.add(tag, "start", request_id=ctx.request_id)
            token = ctx.cancel_token
            token.add_callback(lambda t: journal.add(tag, "cancel", reason=t.reason))
            progress = 0
            for step in steps:
                if honour and token.cancelled:
                    break
                if step == "progress":
                    progress += 1
                    began = journal.next_seq()
                    sent = ctx.report_progress(progress, message=tag)
                    journal.add(tag, "progress", began=began, sent=sent, value=progress)
                elif step == "log":
                    began = journal.next_seq()
                    sent = ctx.log("info", {"storm": tag, "began": began})
                    journal.add(tag, "log", began=began, sent=sent)
                elif step == "spin":
                    for _ in range(2000):
                        if honour and token.cancelled:
                            break
                elif step == "pause":
                    ctx.wait(0.0005)
                elif step == "hold":
                    journal.add(tag, "hold", cancelled=ctx.wait(HOLD_LIMIT))
            journal.add(tag, "return")
            return {"tag": tag}
        finally:
            journal.leave()

    @server.tool()
    def settle() -> bool:
        """True once no ``work`` handler runs and no request but this one is in flight."""
        if not journal.wait_idle(SETTLE_LIMIT):
            return False
        (session,) = server.sessions()
        pause = threading.Event()
        for _ in range(int(SETTLE_LIMIT / 0.001)):
            if session.endpoint.in_flight()[0] == 1:  # answers are queued in order: ours is last
                return True
            pause.wait(0.001)
        return False

    return server


if __name__ == "__main__":
    if os.environ.get("STORM_SWITCH_INTERVAL"):
        sys.setswitchinterval(float(os.environ["STORM_SWITCH_INTERVAL"]))
    journal = Journal()
    workers = int(os.environ.get("STORM_WORKERS", "3"))
    build_server(journal, max_workers=workers).run()
    journal.dump(os.environ["STORM_JOURNAL"])
