"""CancelToken.any(*tokens): cancelled when any source is, first reason wins, nothing leaks.

Before the change there was no ``CancelToken.any``; ``child()`` keeps children alive from the
parent, so a long-lived token accumulated one link per combined token ever made.
"""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
from support.waiting import WAIT

from mcp_sync.cancel import CancelToken


def links(token: CancelToken) -> int:
    """Callbacks a live token still holds (what would leak)."""
    callbacks = token._callbacks
    return 0 if callbacks is None else len(callbacks)


def test_cancelled_by_the_first_source_with_its_reason_and_unlinked_from_the_others():
    a, b, c = CancelToken(), CancelToken(), CancelToken()
    combined = CancelToken.any(a, b, c)
    assert not combined.cancelled and (links(a), links(b), links(c)) == (1, 1, 1)
    fired = []
    combined.add_callback(lambda t: fired.append(t.reason))
    assert b.cancel("user stop")
    assert combined.cancelled and combined.reason == "user stop" and fired == ["user stop"]
    assert (links(a), links(c)) == (0, 0), "the combined token stayed linked to live sources"
    a.cancel("later")
    assert combined.reason == "user stop" and fired == ["user stop"]


def test_an_already_cancelled_source_cancels_at_once_and_links_nothing():
    a, done = CancelToken(), CancelToken()
    done.cancel("app stopping")
    combined = CancelToken.any(a, done)
    assert combined.cancelled and combined.reason == "app stopping"
    assert links(a) == 0


def test_cancelling_the_combined_token_leaves_the_sources_alone():
    a, b = CancelToken(), CancelToken()
    combined = CancelToken.any(a, b)
    assert combined.cancel("mine")
    assert not a.cancelled and not b.cancelled
    assert (links(a), links(b)) == (0, 0)
    a.cancel("theirs")
    assert combined.reason == "mine"


def test_no_tokens_gives_a_plain_token_and_nesting_works():
    assert not CancelToken.any().cancelled
    a, b, c = CancelToken(), CancelToken(), CancelToken()
    outer = CancelToken.any(CancelToken.any(a, b), c)
    a.cancel("deep")
    assert outer.cancelled and outer.reason == "deep"


def test_a_timeout_source_cancels_the_combined_token():
    stop = CancelToken()
    combined = CancelToken.any(stop, CancelToken.with_timeout(0.01))
    assert combined.wait(WAIT), "the timeout source never cancelled the combined token"
    assert combined.reason == "timeout"
    assert links(stop) == 0


def test_a_dropped_combined_token_is_freed_and_unlinked():
    lifetime, other = CancelToken(), CancelToken()
    refs = []
    for _ in range(100):
        combined = CancelToken.any(lifetime, other)
        combined.add_callback(lambda t: None)
        refs.append(weakref.ref(combined))
    del combined
    gc.collect()
    assert all(ref() is None for ref in refs), "the sources kept a dropped combined token alive"
    assert (links(lifetime), links(other)) == (0, 0), (
        "links of dropped tokens stayed in the sources"
    )
    assert lifetime.cancel("bye")  # nothing left to forward to, nothing fails


def test_freed_without_the_cycle_collector():
    source = CancelToken()
    ref = weakref.ref(CancelToken.any(source))
    gc_was = gc.isenabled()
    gc.disable()
    try:
        assert ref() is None, "a reference cycle keeps the combined token until a gc pass"
        assert links(source) == 0
    finally:
        if gc_was:
            gc.enable()


@pytest.mark.parametrize("rounds", [300])
def test_stress_concurrent_source_cancels_race_creation_and_each_other(fast_switching, rounds):
    for _ in range(rounds):
        a, b, idle = CancelToken(), CancelToken(), CancelToken()
        barrier = threading.Barrier(3)
        made: list[CancelToken] = []

        def create() -> None:
            barrier.wait(WAIT)
            made.append(CancelToken.any(a, idle, b))

        def cancel(token: CancelToken, reason: str) -> None:
            barrier.wait(WAIT)
            token.cancel(reason)

        threads = [
            threading.Thread(target=create),
            threading.Thread(target=cancel, args=(a, "a")),
            threading.Thread(target=cancel, args=(b, "b")),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
            assert not t.is_alive()
        (combined,) = made
        assert combined.cancelled, "sources were cancelled but the combined token was not"
        assert combined.reason in ("a", "b")
        assert links(idle) == 0, "a link stayed behind in a live source"
        # the reason is the one of a source cancelled before the combined token
        first = a if combined.reason == "a" else b
        assert first.cancelled
