"""Resources (fixed and templated), prompts and completions, served and read in-process.

Run it::

    python examples/resources_and_prompts.py
    python examples/resources_and_prompts.py --city Lyon --style pirate

The server registers:

* a fixed resource ``config://app`` (JSON) and a resource template
  ``weather://{city}/today`` whose variable becomes the function's argument;
* a prompt ``forecast_report(city, style)`` rendered into messages;
* completers for the template's ``city`` and the prompt's ``style`` argument.

A client connected over an in-memory pair (``memory_pair()``, no process, no socket) lists
and reads them, renders the prompt, and asks for completions.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mcp_sync import Client, Server, memory_pair

server = Server("weather-desk", version="1.0.0")

CITIES = ["Lisbon", "London", "Lyon", "Madrid", "Milan"]
STYLES = ["formal", "friendly", "pirate"]


@server.resource("config://app", mime_type="application/json")
def app_config() -> dict[str, Any]:
    """The application's settings."""
    return {"units": "metric", "cities": CITIES}


@server.resource("weather://{city}/today", mime_type="text/plain")
def weather_today(city: str) -> str:
    """Today's weather in a city."""
    if city not in CITIES:
        raise ValueError(f"no forecast for {city!r}")
    return f"{city}: {len(city) + 14} C, light wind"


@server.prompt()
def forecast_report(city: str, style: str = "friendly") -> list[dict[str, str]]:
    """Ask for a weather report on a city, in a style.

    Args:
        city: the city to report on.
        style: formal, friendly or pirate.
    """
    return [
        {"role": "user", "content": f"Write a {style} weather report for {city}."},
        {"role": "assistant", "content": f"Here is the {style} report for {city}:"},
    ]


@server.completion("resource:weather://{city}/today", "city")
def complete_city(value: str, context: dict[str, str]) -> list[str]:
    return [c for c in CITIES if c.lower().startswith(value.lower())]


@server.completion("prompt:forecast_report", "style")
def complete_style(value: str, context: dict[str, str]) -> list[str]:
    return [s for s in STYLES if s.startswith(value.lower())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--city", default="Lisbon")
    parser.add_argument("--style", default="friendly")
    options = parser.parse_args(argv)

    server_end, client_end = memory_pair()
    with server.serve_in_thread(server_end), Client.connect(client_end) as client:
        print("resources:", ", ".join(f"{r.uri} ({r.name})" for r in client.list_resources()))
        print(
            "templates:",
            ", ".join(f"{t.uri_template} ({t.name})" for t in client.list_resource_templates()),
        )

        config = client.read_resource("config://app").contents[0]
        print(f"read config://app [{config.mime_type}]: {config.text}")  # type: ignore[union-attr]
        uri = f"weather://{options.city}/today"
        weather = client.read_resource(uri).contents[0]
        print(f"read {uri}: {weather.text}")  # type: ignore[union-attr]

        for prompt in client.list_prompts():
            args = ", ".join(f"{a.name}{'' if a.required else '?'}" for a in prompt.arguments or [])
            print(f"prompt: {prompt.name}({args}): {prompt.description}")
        rendered = client.get_prompt(
            "forecast_report", {"city": options.city, "style": options.style}
        )
        for message in rendered.messages:
            print(f"  {message.role}: {message.content.text}")  # type: ignore[union-attr]

        cities = client.complete(
            {"type": "ref/resource", "uri": "weather://{city}/today"}, "city", "L"
        )
        print(f"complete city 'L' -> {cities.completion.values}")
        styles = client.complete({"type": "ref/prompt", "name": "forecast_report"}, "style", "p")
        print(f"complete style 'p' -> {styles.completion.values}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
