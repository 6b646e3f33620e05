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

from mcp_sync import Context, InputRequired, Server

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


# -- 2026-07-28: input rounds (SEP-2322) and the stateless diagnostics (SEP-2575) -------------
def _form(message: str, field: str, kind: str = "string") -> dict[str, Any]:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


def _sample(text: str, max_tokens: int) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": text}}
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [message], "maxTokens": max_tokens},
    }


ROOTS: dict[str, Any] = {"method": "roots/list", "params": {}}


def _answered(ctx: Context, asked: dict[str, Any]) -> InputRequired | None:
    """``None`` once every key of ``asked`` has an answer, else the round asking them (again)."""
    if all(key in ctx.input_responses for key in asked):
        return None
    return InputRequired(asked, state={"asked": sorted(asked)})


def _content(answer: Any) -> dict[str, Any]:
    content = answer.get("content") if isinstance(answer, dict) else None
    return content if isinstance(content, dict) else {}


@server.tool()
def test_input_required_result_elicitation(ctx: Context) -> str | InputRequired:
    """Asks the user's name through an input round (key ``user_name``)."""
    missing = _answered(ctx, {"user_name": _form("What is your name?", "name")})
    if missing is not None:
        return missing
    return f"Hello, {_content(ctx.input_responses['user_name']).get('name', 'stranger')}!"


@server.tool()
def test_input_required_result_sampling(ctx: Context) -> str | InputRequired:
    """Asks the client's model a question through an input round (key ``capital_question``)."""
    missing = _answered(ctx, {"capital_question": _sample("What is the capital of France?", 100)})
    if missing is not None:
        return missing
    answer = ctx.input_responses["capital_question"]
    return f"The model said: {json.dumps(answer.get('content') if isinstance(answer, dict) else answer)}"


@server.tool()
def test_input_required_result_list_roots(ctx: Context) -> str | InputRequired:
    """Asks for the client's roots through an input round (key ``client_roots``)."""
    missing = _answered(ctx, {"client_roots": ROOTS})
    if missing is not None:
        return missing
    roots = ctx.input_responses["client_roots"]
    found = roots.get("roots", []) if isinstance(roots, dict) else []
    return f"The client has {len(found)} root(s)"


@server.tool()
def test_input_required_result_request_state(ctx: Context) -> str | InputRequired:
    """Asks for a confirmation (key ``confirm``) with a state to echo back."""
    missing = _answered(ctx, {"confirm": _form("Please confirm", "ok", "boolean")})
    if missing is not None:
        return missing
    return f"Confirmed: {_content(ctx.input_responses['confirm']).get('ok')}"


@server.tool()
def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequired:
    """Asks for a name, a model's greeting and the roots in one round."""
    missing = _answered(
        ctx,
        {
            "user_name": _form("What is your name?", "name"),
            "greeting": _sample("Generate a greeting", 50),
            "client_roots": ROOTS,
        },
    )
    if missing is not None:
        return missing
    return f"Got all three answers for {_content(ctx.input_responses['user_name']).get('name')}"


@server.tool()
def test_input_required_result_multi_round(ctx: Context) -> str | InputRequired:
    """Two rounds: a name (``step1``), then a favourite colour (``step2``)."""
    gathered = dict(ctx.request_state_payload or {}).get("gathered", {})
    gathered.update({key: _content(value) for key, value in ctx.input_responses.items()})
    if "step1" not in gathered:
        return InputRequired(
            {"step1": _form("Step 1: What is your name?", "name")}, state={"gathered": gathered}
        )
    if "step2" not in gathered:
        return InputRequired(
            {"step2": _form("Step 2: What is your favorite color?", "color")},
            state={"gathered": gathered},
        )
    return f"{gathered['step1'].get('name')} likes {gathered['step2'].get('color')}"


@server.tool()
def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequired:
    """Asks for a confirmation; its sealed state is refused once tampered with."""
    missing = _answered(ctx, {"confirm": _form("Please confirm", "ok", "boolean")})
    return missing if missing is not None else "confirmed"


@server.tool()
def test_input_required_result_capabilities(ctx: Context) -> str | InputRequired:
    """Asks only for the kinds of input this request's client capabilities declare."""
    wanted = {
        "elicitation": ("user_name", _form("What is your name?", "name")),
        "sampling": ("capital_question", _sample("What is the capital of France?", 100)),
        "roots": ("client_roots", ROOTS),
    }
    asked = dict(value for name, value in wanted.items() if name in ctx.client_capabilities)
    missing = _answered(ctx, asked) if asked else None
    return missing if missing is not None else f"answered: {sorted(ctx.input_responses)}"


@server.tool()
def test_missing_capability(ctx: Context) -> str:
    """Asks the client's model: a request that does not declare sampling gets -32021."""
    ctx.session.create_message(
        [{"role": "user", "content": {"type": "text", "text": "hello"}}], max_tokens=10
    )
    return "sampled"


@server.tool()
def test_streaming_elicitation(ctx: Context) -> str:
    """Asks the user through ``ctx.session.elicit``: at 2026-07-28 an input round on the
    request's own answer, never a request on the stream."""
    answer = ctx.session.elicit(
        "What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
    )
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


@server.tool()
def test_logging_tool(ctx: Context) -> str:
    """Logs at info level: sent only when the request's ``_meta`` asks for a log level."""
    ctx.info("test_logging_tool ran")
    return "logged"


@server.tool()
def test_trigger_tool_change() -> str:
    """Raises ``notifications/tools/list_changed`` (for ``subscriptions/listen`` streams)."""
    server.notify_list_changed("tools")
    return "tools list changed"


@server.tool()
def test_trigger_prompt_change() -> str:
    """Raises ``notifications/prompts/list_changed`` (for ``subscriptions/listen`` streams)."""
    server.notify_list_changed("prompts")
    return "prompts list changed"


@server.tool(
    description="Mirrors its region and priority in Mcp-Param headers (SEP-2243)",
    input_schema={
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "query": {"type": "string"},
        },
        "required": ["region"],
    },
)
def test_header_params(**arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True)


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


@server.prompt()
def test_input_required_result_prompt(ctx: Context) -> str | InputRequired:
    """A prompt that asks what context to use (key ``user_context``) before it is built."""
    missing = _answered(
        ctx, {"user_context": _form("What context should the prompt use?", "context")}
    )
    if missing is not None:
        return missing
    return f"Use this context: {_content(ctx.input_responses['user_context']).get('context')}"


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
