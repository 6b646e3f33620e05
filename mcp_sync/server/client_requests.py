"""The params of the requests a server makes of its client (``elicitation/create``,
``sampling/createMessage``), built the same way whether they go on the wire as requests
(2025-11-25) or into an ``input_required`` answer (2026-07-28)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["elicit_params", "create_message_params"]


def elicit_params(
    message: str,
    requested_schema: Mapping[str, Any] | None = None,
    *,
    url: str | None = None,
    elicitation_id: str | None = None,
    mint_id: bool = True,
) -> dict[str, Any]:
    """``elicitation/create`` params: URL mode with ``url``, form mode otherwise (an empty
    object schema without ``requested_schema``).

    In URL mode the ``elicitationId`` is ``elicitation_id``, else a fresh one when
    ``mint_id`` (2025-11-25; 2026-07-28 has no elicitation ids, and a fresh one in every round
    would change the question)."""
    params: dict[str, Any] = {"message": message}
    if url is not None:
        params.update({"mode": "url", "url": url})
        if elicitation_id is not None or mint_id:
            params["elicitationId"] = elicitation_id or uuid.uuid4().hex
    else:
        params["requestedSchema"] = (
            dict(requested_schema) if requested_schema else {"type": "object", "properties": {}}
        )
    return params


def create_message_params(
    messages: Iterable[Mapping[str, Any]],
    *,
    max_tokens: int,
    system_prompt: str | None = None,
    extra_params: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``sampling/createMessage`` params; ``extra_params`` by their wire names."""
    params: dict[str, Any] = {
        "messages": [dict(m) for m in messages],
        "maxTokens": max_tokens,
        **(extra_params or {}),
    }
    if system_prompt is not None:
        params["systemPrompt"] = system_prompt
    return params
