"""An upstream tool that asks for input (multi-round-trip requests, MCP 2026-07-28
SEP-2322; or, from a 2025-era server, requests sent in the middle of ``tools/call``).

Everything here is read from the upstream, so it is bounded before it goes anywhere: at most
:data:`MAX_REQUESTS` questions of the three kinds an agent can answer (elicitation,
sampling, roots), :data:`MAX_QUESTIONS_CHARS` of JSON in all, an upstream ``requestState``
of at most :data:`MAX_STATE_CHARS`, :data:`MAX_ROUNDS` rounds in one call.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolkeeper.upstream.downstream import Downstream, current

MAX_ROUNDS = 8
"""In-band rounds within one governed call (each a question to the agent)."""
MAX_REQUESTS = 16
MAX_QUESTIONS_CHARS = 256 * 1024
MAX_STATE_CHARS = 32 * 1024
MAX_KEY_CHARS = 200
CAPABILITY = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling",
              "roots/list": "roots"}
"""The client capability each question needs."""


def downstream() -> Downstream | None:
    return current()


def input_required(result: Any) -> bool:
    """Whether an upstream answer is an ``InputRequiredResult`` (wire dict)."""
    return isinstance(result, dict) and result.get("resultType") == "input_required"


def questions(result: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``(inputRequests, requestState)`` of an ``InputRequiredResult``, checked and bounded;
    ``ValueError`` says what is wrong."""
    requests = result.get("inputRequests") or {}
    state = result.get("requestState")
    if not isinstance(requests, dict) or len(requests) > MAX_REQUESTS:
        raise ValueError(f"inputRequests is not an object of at most {MAX_REQUESTS} requests")
    if state is not None and (not isinstance(state, str) or len(state) > MAX_STATE_CHARS):
        raise ValueError(f"requestState is not a string of at most {MAX_STATE_CHARS} chars")
    if not requests and state is None:
        raise ValueError("an InputRequiredResult with neither inputRequests nor requestState")
    for key, req in requests.items():
        if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS:
            raise ValueError("an inputRequests key is not a short string")
        if not isinstance(req, dict) or req.get("method") not in CAPABILITY \
                or not isinstance(req.get("params", {}), dict):
            raise ValueError(f"inputRequests[{key!r}] is not an elicitation, sampling or "
                             "roots request")
    if len(orjson.dumps(requests)) > MAX_QUESTIONS_CHARS:
        raise ValueError(f"inputRequests exceed {MAX_QUESTIONS_CHARS} bytes")
    return requests, state


def needed(requests: dict[str, Any]) -> set[str]:
    """The client capabilities (``elicitation``, ``sampling``, ``roots``) the questions
    need."""
    return {CAPABILITY[r["method"]] for r in requests.values()}


__all__ = ["MAX_ROUNDS", "input_required", "needed", "questions"]
