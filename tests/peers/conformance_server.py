"""The fixture server of the official conformance suite (``@modelcontextprotocol/conformance``),
written with mcp_sync's public API only: ``python conformance_server.py``.

It serves Streamable HTTP (``Server.run("http")``; with ``--json-response``, an app that
answers every request as plain JSON instead of SSE) on a free loopback port and announces
``mcp_sync: serving conformance-fixture at http://127.0.0.1:PORT/mcp`` on stderr. Its tools,
resources and prompts are the ones the suite's server scenarios call by name (they mirror the
TypeScript SDK's "everything" server); each scenario's description in the suite says what it
expects, and tests/conformance/test_conformance_suite.py runs them against this program.
"""

from __future__ import annotations

import base64
import io
import json
import sys
import threading
import wave
from typing import Any

from mcp_sync import Context, Server

# a 1x1 red pixel
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def _silent_wav() -> str:
    """A tenth of a second of 8 kHz mono silence, base64."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(1)
        wav.setframerate(8000)
        wav.writeframes(b"\x80" * 800)
    return base64.b64encode(out.getvalue()).decode("ascii")


WAV = _silent_wav()

# the suite's JSON Schema 2020-12 probe, published verbatim (scenario json-schema-2020-12)
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

SEP1034_DEFAULTS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Your name", "default": "John Doe"},
        "age": {"type": "integer", "description": "Your age", "default": 30},
        "score": {"type": "number", "description": "Your score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "Your status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verified?", "default": True},
    },
}

SEP1330_ENUMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}

server = Server("conformance-fixture", version="1.0.0")


# -- tools -----------------------------------------------------------------------------------
@server.tool()
def test_simple_text() -> str:
    """Returns one text block."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> dict:
    """Returns a PNG image."""
    return {"type": "image", "data": PNG, "mimeType": "image/png"}


@server.tool()
def test_audio_content() -> dict:
    """Returns a WAV clip."""
    return {"type": "audio", "data": WAV, "mimeType": "audio/wav"}


@server.tool()
def test_embedded_resource() -> dict:
    """Returns an embedded text resource."""
    return {
        "type": "resource",
        "resource": {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        },
    }


@server.tool()
def test_multiple_content_types() -> list:
    """Returns text, an image and an embedded resource."""
    return [
        {"type": "text", "text": "Multiple content types test:"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {
            "type": "resource",
            "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": json.dumps({"test": "data", "value": 123}),
            },
        },
    ]


@server.tool()
def test_tool_with_logging(ctx: Context) -> str:
    """Logs three messages at info level while it runs."""
    ctx.info("Tool execution started")
    ctx.wait(0.05)
    ctx.info("Tool processing data")
    ctx.wait(0.05)
    ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool()
def test_error_handling() -> str:
    """Always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@server.tool()
def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    for step, progress in enumerate((0, 50, 100)):
        if step:
            ctx.wait(0.05)
        ctx.report_progress(progress, 100)
    return "Tool with progress executed successfully"


@server.tool()
def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model.

    Args:
        prompt: The prompt to send to the LLM.
    """
    answer = ctx.session.create_message(
        [{"role": "user", "content": {"type": "text", "text": prompt}}], max_tokens=100
    )
    content = answer.content
    text = getattr(content, "text", None) if not isinstance(content, list) else None
    return f"LLM response: {text if text is not None else content}"


@server.tool()
def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a name and an email address.

    Args:
        message: The message to show the user.
    """
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    answer = ctx.session.elicit(message, schema)
    return f"User response: action={answer.action}, content={json.dumps(answer.content)}"


@server.tool()
def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Asks for input with a default for every primitive type."""
    answer = ctx.session.elicit(
        "Please review and update the form fields with defaults", SEP1034_DEFAULTS
    )
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


@server.tool()
def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Asks for input with every enum schema variant."""
    answer = ctx.session.elicit("Please select options from the enum fields", SEP1330_ENUMS)
    return f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}"


@server.tool(description="Tool with JSON Schema 2020-12 features", input_schema=JSON_SCHEMA_2020_12)
def json_schema_2020_12_tool(**arguments: Any) -> str:
    return "ok"


@server.tool()
def test_reconnection(ctx: Context) -> str:
    """Answers after a short pause (SSE polling probe)."""
    ctx.wait(0.1)
    return "Reconnection test completed"


# -- resources -------------------------------------------------------------------------------
@server.resource("test://static-text", mime_type="text/plain", description="A static text resource")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource(
    "test://static-binary", mime_type="image/png", description="A static binary resource (a PNG)"
)
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@server.resource(
    "test://watched-resource", mime_type="text/plain", description="A resource clients subscribe to"
)
def watched_resource() -> str:
    return "Watched resource content"


@server.resource(
    "test://template/{id}/data", mime_type="application/json", description="Data by id"
)
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# -- prompts ---------------------------------------------------------------------------------
@server.prompt()
def test_simple_prompt() -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two arguments.

    Args:
        arg1: First test argument.
        arg2: Second test argument.
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list:
    """A prompt embedding a resource.

    Args:
        resourceUri: URI of the resource to embed.
    """
    embedded = {
        "uri": resourceUri,
        "mimeType": "text/plain",
        "text": "Embedded resource content for testing.",
    }
    return [
        {"role": "user", "content": {"type": "resource", "resource": embedded}},
        {
            "role": "user",
            "content": {"type": "text", "text": "Please process the embedded resource above."},
        },
    ]


@server.prompt()
def test_prompt_with_image() -> list:
    """A prompt with an image."""
    return [
        {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
        {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}},
    ]


@server.completion("prompt:test_prompt_with_arguments", "arg1")
def complete_arg1(value: str, context: dict) -> list:
    return [word for word in ("paris", "park", "party") if word.startswith(value)]


def main(argv: list[str]) -> None:
    """Serve until Ctrl-C (SIGINT); ``--json-response`` answers every request as plain JSON
    instead of an SSE stream."""
    if "--json-response" not in argv:
        server.run("http", port=0, grace=2.0)
        return
    handle = server.serve_http(port=0, json_response=True, shutdown_grace=2.0)
    print(f"mcp_sync: serving {server.name} at {handle.url}", file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        handle.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
