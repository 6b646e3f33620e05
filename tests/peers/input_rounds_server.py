"""A stdio mcp_sync server whose handlers ask the client for input (elicitation, sampling,
roots), for the input-round tests (tests/test_input_rounds_stdio.py and the official client
interop).

The key ring that seals ``requestState`` comes from ``MCP_SYNC_STATE_KEYS`` when it is set
(processes given the same value open each other's states), else it is ephemeral.
``INPUT_ROUNDS_CLOCK_SKEW=S`` runs the sealer's clock S seconds ahead (a state sealed by a
process without it has expired here when S exceeds the TTL of 600 s).

Tools:
    book(room)        ctx.session.elicit for a name, then "ROOM booked for NAME"
    plan(topic)       elicit, then list_roots, then create_message: three rounds
    deploy(env)       the explicit form: returns InputRequired, reads ctx.input_responses
    careless()        elicit inside ``try/except Exception`` (which must not catch the signal)
    entries()         how often each handler was entered in this process, as JSON
Prompt ``greeting`` and resource ``memo://today`` ask for a name as well.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter

from mcp_sync import Context, InputRequired, Server
from mcp_sync.request_state import DEFAULT_ENV_VAR, KeyRing, StateSealer

NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

SKEW = float(os.environ.get("INPUT_ROUNDS_CLOCK_SKEW", "0"))
ring = KeyRing.from_env() if os.environ.get(DEFAULT_ENV_VAR) else KeyRing.ephemeral()
server = Server(
    "input-rounds",
    version="1.0.0",
    request_state_sealer=StateSealer(ring, clock=lambda: time.time() + SKEW),
)
_lock = threading.Lock()
_entries: Counter[str] = Counter()


def entered(name: str) -> None:
    with _lock:
        _entries[name] += 1


def ask_name(ctx: Context) -> str:
    answer = ctx.session.elicit("Your name?", NAME_FORM)
    return str(answer.content["name"]) if answer.action == "accept" and answer.content else "nobody"


@server.tool()
def book(room: str, ctx: Context) -> str:
    """Book a room for someone."""
    entered("book")
    return f"{room} booked for {ask_name(ctx)}"


@server.tool()
def plan(topic: str, ctx: Context) -> str:
    """Ask for a name, the roots and a model's idea, in three rounds."""
    entered("plan")
    name = ask_name(ctx)
    roots = [str(root.uri) for root in ctx.session.list_roots()]
    idea = ctx.session.create_message(
        [{"role": "user", "content": {"type": "text", "text": topic}}], max_tokens=20
    )
    text = idea.content.text if getattr(idea.content, "type", None) == "text" else "?"
    return f"{name} plans {text} in {','.join(roots)}"


@server.tool()
def deploy(env: str, ctx: Context) -> str | InputRequired:
    """The explicit form: asks for a confirmation with its own key and state."""
    entered("deploy")
    answer = ctx.input_responses.get("confirm")
    if answer is None:
        return InputRequired(
            {
                "confirm": {
                    "method": "elicitation/create",
                    "params": {"message": f"Deploy to {env}?", "requestedSchema": NAME_FORM},
                }
            },
            state={"env": env},
        )
    return f"deployed to {ctx.request_state_payload['env']} by {answer['content']['name']}"


@server.tool()
def careless(ctx: Context) -> str:
    """Asks inside a broad ``except Exception``."""
    entered("careless")
    try:
        return f"hello {ask_name(ctx)}"
    except Exception as exc:  # noqa: BLE001 - the point of the tool
        return f"swallowed {type(exc).__name__}"


@server.tool()
def entries() -> str:
    """How often each handler was entered in this process."""
    with _lock:
        return json.dumps(dict(_entries), sort_keys=True)


@server.prompt()
def greeting(ctx: Context) -> str:
    """Greets the person who answers."""
    entered("greeting")
    return f"Say hello to {ask_name(ctx)}"


@server.resource("memo://today", mime_type="text/plain")
def memo(ctx: Context) -> str:
    """Today's memo, for the person who answers."""
    entered("memo")
    return f"memo for {ask_name(ctx)}"


if __name__ == "__main__":
    server.run()
