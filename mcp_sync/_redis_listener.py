"""The Redis pub/sub listener loop, written once for every Redis-backed part.

:class:`~mcp_sync.server.RedisBus` (list-changed and resource-updated events across worker
processes) and :class:`~mcp_sync.tasks.RedisTaskStore` (task changes across processes) each
run one listener thread. Both need the same loop: connect, subscribe, hand each message on,
and when the connection is lost reconnect with exponential backoff, logging one warning per
outage rather than one per attempt. Only what they subscribe to and what they do on
(re)subscription and on a message differ; those come in as callables.

``redis`` is imported by the callers (it is an optional extra); this module only drives the
objects their ``connect`` returns.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ._waiting import WAIT_SLICE

__all__ = ["run_pubsub_listener"]


def run_pubsub_listener(
    *,
    connect: Callable[[], Any],
    subscribe: Callable[[Any], None],
    subscribed_type: str,
    message_type: str,
    on_subscribed: Callable[[bool], None],
    on_message: Callable[[Any], None],
    stop: threading.Event,
    ready: threading.Event,
    backoff_initial: float,
    backoff_max: float,
    errors: tuple[type[BaseException], ...],
    log: logging.Logger,
    what: str,
) -> None:
    """Listen until ``stop`` is set (run this on the listener thread).

    Args:
        connect: a new Redis client (one per connection attempt).
        subscribe: subscribes the client's ``pubsub()`` object to the channels wanted.
        subscribed_type: the ``type`` of the message confirming the subscription
            (``"subscribe"`` or ``"psubscribe"``).
        message_type: the ``type`` of a published message (``"message"``/``"pmessage"``).
        on_subscribed: called with ``True`` after a reconnection, ``False`` the first time;
            ``ready`` is set just before.
        on_message: called with each published message's ``data``.
        stop, ready: the listener's stop request and its "subscribed now" flag (cleared while
            the connection is lost).
        backoff_initial, backoff_max: the first and the longest wait between reconnection
            attempts, in seconds (doubling in between; back to the first once subscribed).
        errors: the exceptions that mean the connection was lost.
        log: where the outage warning goes; ``what`` starts its message.
    """
    delay = backoff_initial
    lost = False
    while not stop.is_set():
        pubsub: Any = None
        client = connect()
        try:
            pubsub = client.pubsub()
            subscribe(pubsub)
            while not stop.is_set():
                item = pubsub.get_message(timeout=WAIT_SLICE)
                if item is None:
                    continue
                if item["type"] == subscribed_type:
                    ready.set()
                    delay = backoff_initial
                    reconnected, lost = lost, False
                    on_subscribed(reconnected)
                elif item["type"] == message_type:
                    on_message(item["data"])
        except errors as exc:
            if not stop.is_set():
                # one warning per outage, not one per attempt to reconnect
                report = log.warning if ready.is_set() or not lost else log.debug
                report("%s: lost the Redis connection (%s); reconnecting", what, exc)
                ready.clear()
                lost = True
                stop.wait(delay)
                delay = min(delay * 2, backoff_max)
        finally:
            for closing in (pubsub, client):
                if closing is not None:
                    try:
                        closing.close()
                    except Exception:  # pragma: no cover - closing a broken connection
                        log.debug("%s: error closing a Redis connection", what, exc_info=True)
