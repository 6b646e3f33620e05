"""``check-cancel`` against a URL whose server accepts connections but never answers: the
checks end, bounded by ``init_timeout``, instead of waiting for ever on the ``initialize``
POST (which is sent in the checker's own thread)."""

from __future__ import annotations

import io
import socket
import threading

from support.waiting import WAIT

from mcp_sync.cli.check_cancel import ServerUnavailable, run_checks


def test_check_cancel_of_a_server_that_never_answers_ends_saying_so():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # connections complete in the kernel; nobody reads them
    out = io.StringIO()
    outcome: list[BaseException | int] = []

    def check() -> None:
        try:
            outcome.append(
                run_checks(
                    command=None,
                    url=f"http://127.0.0.1:{listener.getsockname()[1]}/mcp",
                    slow_tool=None,
                    slow_args={},
                    race_calls=0,
                    grace=0.1,
                    verbose=False,
                    out=out,
                    init_timeout=0.5,
                )
            )
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=check, name="check-cancel")
    thread.start()
    try:
        thread.join(WAIT * 6)
        assert not thread.is_alive(), (
            f"check-cancel still waits on a silent server; so far:\n{out.getvalue()}"
        )
    finally:
        listener.close()  # resets the silent connections: a stuck checker gets errors and ends
        thread.join(WAIT)
    # the command line prints this one line (exit 1) instead of a table
    assert len(outcome) == 1 and isinstance(outcome[0], ServerUnavailable), (
        outcome,
        out.getvalue(),
    )
    assert "initialize: no answer from http://127.0.0.1:" in str(
        outcome[0]
    ) and "within 0.5 s" in str(outcome[0])
