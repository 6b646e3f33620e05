"""Shared helpers of the test suite, one job per module (``tests`` is on ``sys.path``, set by
``pythonpath`` in ``pyproject.toml``, so tests import them as ``support.<module>``):

* :mod:`support.paths` -- the repository root, the test interpreter, the peer scripts' folder.
* :mod:`support.waiting` -- the bounds of every wait (``WAIT``, ``PEER_WAIT``) and the bounded
  waits :func:`~support.waiting.wait_until` and :func:`~support.waiting.wait_event`.
* :mod:`support.threads` -- what a thread is blocked in; joining the threads a test started.
* :mod:`support.messages` -- building and picking JSON-RPC messages.
* :mod:`support.recording` -- transport wrappers that record every decoded message.
* :mod:`support.probes` -- what handlers and callbacks record for the test to wait on.
* :mod:`support.storm` -- cancellation storms: random plans of calls and cancels, and their judge.
* :mod:`support.line_client` -- a client that is only JSON lines, keeping every line it reads.
* :mod:`support.endpoints` -- endpoint pairs, recorded raw transports, gated handlers, raw peers.
* :mod:`support.sessions` -- a served :class:`~mcp_sync.Server` with a connected client; a fake
  server.
* :mod:`support.processes` -- running programs with deadlines on their output.
* :mod:`support.node` -- the Node.js peers installed in ``tests/node``.
* :mod:`support.peers_2026` -- the peers that speak 2026-07-28 and what their client scripts print.
* :mod:`support.http` -- the Streamable HTTP test server, raw HTTP sessions, an SSE reader.
* :mod:`support.interop` -- the official ``mcp`` SDK's peers and their events files.
* :mod:`support.listen` -- the ``subscriptions/listen`` tests' servers, envelope and routed
  client endpoint.
"""
