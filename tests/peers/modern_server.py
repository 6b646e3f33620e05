"""A dual-era mcp_sync stdio server for the 2026-07-28 tests (raw JSON lines, real peers).

    python modern_server.py [--workers N]

Markers go to stderr (and are appended to ``$PEER_EVENTS_FILE`` when set), one per line.
Tools:
    echo(text)                 the text back
    slow(seconds, tag="")      waits ``seconds`` or until cancelled: "STARTED slow <tag>", then
                               "CANCELLED slow <tag>" or "FINISHED slow <tag>"
    stubborn(tag="")           "STARTED stubborn <tag>"; waits for its cancellation, then
                               still reports progress, logs, and returns; "FINISHED stubborn
                               <tag> progress=<sent> log=<sent>"
    chatty()                   one log message at each level; returns how many were sent
    whoami()                   what the handler knows of its own request (version, client
                               capabilities and info, log level, era, ctx.session's view)
    ask()                      ctx.session.elicit(...) (a real request on a 2025 session)
Resources: mem://greeting (text), template mem://items/{name}. Prompt: greet(name).
"""

from __future__ import annotations

import functools
import os
import sys

import peer_events

from mcp_sync import Context, Server

event = functools.partial(peer_events.event, echo=True)  # markers also go to stderr


workers = int(sys.argv[sys.argv.index("--workers") + 1]) if "--workers" in sys.argv else 4
server = Server(
    "modern-probe",
    "3.1.4",
    instructions="A probe server for the 2026-07-28 tests.",
    max_workers=workers,
    extensions={"io.example/probe": {"level": 1}},
    ttl_ms=60000,
    cache_scope="public",
)


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def slow(seconds: float, ctx: Context, tag: str = "") -> str:
    """Wait ``seconds`` unless cancelled."""
    event(f"STARTED slow {tag}")
    if ctx.wait(seconds):
        event(f"CANCELLED slow {tag}")
        return "stopped"
    event(f"FINISHED slow {tag}")
    return f"slept {seconds}"


@server.tool()
def stubborn(ctx: Context, tag: str = "") -> str:
    """Ignore the cancellation: report progress, log and return after it."""
    event(f"STARTED stubborn {tag}")
    ctx.wait(30)
    progress = ctx.report_progress(1, 2, "after the cancel")
    logged = ctx.error("after the cancel")
    event(f"FINISHED stubborn {tag} progress={progress} log={logged}")
    return "late"


@server.tool()
def chatty(ctx: Context) -> int:
    """One log message at each level, least severe first."""
    levels = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
    return sum(ctx.log(level, f"at {level}") for level in levels)


@server.tool()
def whoami(ctx: Context) -> dict:
    """What the handler knows about its own request."""
    return {
        "protocolVersion": ctx.protocol_version,
        "era": ctx.era.value,
        "clientCapabilities": ctx.client_capabilities,
        "clientInfo": ctx.client_info,
        "logLevel": ctx.log_level,
        "sessionPeerCapabilities": ctx.session.peer_capabilities,
        "sessionProtocolVersion": ctx.session.protocol_version,
        "sessionSupportsElicitation": ctx.session.peer_supports("elicitation"),
    }


@server.tool()
def ask(ctx: Context) -> str:
    """Ask the user for a name."""
    answer = ctx.session.elicit(
        "Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
    )
    return f"{answer.action}:{(answer.content or {}).get('name')}"


@server.resource("mem://greeting")
def greeting() -> str:
    """A greeting."""
    return "hello"


@server.resource("mem://items/{name}")
def item(name: str) -> str:
    """One item."""
    return f"item {name}"


@server.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello {name}"


@server.completion("prompt:greet", "name")
def complete_name(value: str, context: dict) -> list[str]:
    return [n for n in ("Ada", "Alan") if n.startswith(value)]


if __name__ == "__main__":
    event(f"modern-probe starting pid={os.getpid()}")
    server.run()
