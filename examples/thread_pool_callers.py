"""One Client shared by a thread pool of callers; some calls are cancelled from other threads.

Run it::

    python examples/thread_pool_callers.py                   # 8 callers, 4 threads, 1 s calls
    python examples/thread_pool_callers.py --calls 12 --workers 6 --seconds 0.5

It spawns ``slow_server.py`` (next to this file) and shares one :class:`~mcp_sync.Client`
between every thread. Two ways of cancelling from *another* thread are shown:

1. blocking callers in a :class:`~concurrent.futures.ThreadPoolExecutor`, each passing a
   :class:`~mcp_sync.CancelToken` to ``call_tool``; the main thread cancels every other
   token once that call has started on the server (the caller gets ``Cancelled``);
2. :class:`~mcp_sync.PendingCall` futures from ``client.call_tool_future``; a canceller
   thread calls ``PendingCall.cancel()`` on every third one while it runs on the server.

The calls to be cancelled are long ones (10 x ``--seconds``, at least 5 s) that nobody wants
to wait for; the others run ``--seconds`` and complete.

Results are collected with ``concurrent.futures.as_completed`` and ``wait`` (a
``PendingCall`` is a ``Future``). At the end the server reports how many ``slow`` runs it
completed and how many it stopped because they were cancelled: the two counts must match
ours, since a cancelled call really stops on the server.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import sys
import threading
from collections import Counter
from pathlib import Path

from mcp_sync import Cancelled, CancelToken, Client, PendingCall

SERVER = Path(__file__).with_name("slow_server.py")


def say(text: str) -> None:
    print(text, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=8, help="calls in each part")
    parser.add_argument("--workers", type=int, default=4, help="threads in the caller pool")
    parser.add_argument("--seconds", type=float, default=1.0, help="how long each slow call works")
    options = parser.parse_args(argv)
    outcomes: Counter[str] = Counter()
    args = {"seconds": options.seconds}
    # calls that will be cancelled are long, so the cancel cannot race their completion
    long_args = {"seconds": max(5.0, 10 * options.seconds)}

    with Client.stdio([sys.executable, str(SERVER)]) as client:
        # -- 1. blocking callers in a pool, cancelled through CancelTokens ----------------------
        say(
            f"part 1: {options.calls} blocking callers on {options.workers} threads, every other one cancelled by token"
        )
        tokens = [CancelToken() for _ in range(options.calls)]
        started = [threading.Event() for _ in range(options.calls)]

        def caller(i: int) -> str:
            # on_progress asks the server for progress: the first report means "running"
            arguments = long_args if i % 2 else args
            result = client.call_tool(
                "slow", arguments, cancel_token=tokens[i], on_progress=lambda *_: started[i].set()
            )
            return result.content[0].text  # type: ignore[union-attr,no-any-return]

        with concurrent.futures.ThreadPoolExecutor(
            options.workers, thread_name_prefix="caller"
        ) as pool:
            futures = {pool.submit(caller, i): i for i in range(options.calls)}
            for i in range(1, options.calls, 2):
                if not started[i].wait(30):  # starts once a pool thread is free for it
                    say(f"   call {i} never started")
                    return 1
                tokens[i].cancel(f"caller {i} is no longer needed")
            for future in concurrent.futures.as_completed(futures, timeout=60):
                i = futures[future]
                try:
                    say(f"   call {i}: completed: {future.result()}")
                    outcomes["completed by token callers"] += 1
                except Cancelled as exc:
                    say(f"   call {i}: cancelled: {exc.reason}")
                    outcomes["cancelled by CancelToken"] += 1

        # -- 2. PendingCall futures, cancelled by a canceller thread ----------------------------
        say(
            f"part 2: {options.calls} PendingCall futures, every third one cancelled from a canceller thread"
        )
        running = [threading.Event() for _ in range(options.calls)]
        doomed = list(range(0, options.calls, 3))
        calls: list[PendingCall] = [
            client.call_tool_future(
                "slow",
                long_args if i in doomed else args,
                on_progress=lambda *_, i=i: running[i].set(),
            )
            for i in range(options.calls)
        ]

        def canceller() -> None:
            for i in doomed:
                if running[i].wait(30):
                    calls[i].cancel("the canceller thread changed its mind")

        thread = threading.Thread(target=canceller, name="canceller")
        thread.start()
        _done, not_done = concurrent.futures.wait(calls, timeout=60)
        thread.join()
        if not_done:
            say(f"   {len(not_done)} calls did not settle")
            return 1
        for i, call in enumerate(calls):
            if call.cancelled():
                say(f"   call {i} (request {call.request_id}): cancelled: {call.cancel_reason}")
                outcomes["cancelled by PendingCall.cancel"] += 1
            else:
                call.result()
                outcomes["completed futures"] += 1

        server_counts = (
            client.call_tool("stats", {"wait_seconds": 5}, timeout=10).structured_content or {}
        )

    completed = outcomes["completed by token callers"] + outcomes["completed futures"]
    cancelled = outcomes["cancelled by CancelToken"] + outcomes["cancelled by PendingCall.cancel"]
    say(
        f"summary: {completed} completed, {cancelled} cancelled "
        f"({outcomes['cancelled by CancelToken']} by CancelToken, {outcomes['cancelled by PendingCall.cancel']} by PendingCall.cancel)"
    )
    say(
        f"server: {server_counts.get('completed', 0)} completed, "
        f"{server_counts.get('stopped by cancellation', 0)} stopped by cancellation"
    )
    agree = (
        server_counts.get("completed", 0) == completed
        and server_counts.get("stopped by cancellation", 0) == cancelled
    )
    say("client and server agree" if agree else "client and server DISAGREE")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
