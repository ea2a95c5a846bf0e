"""An upstream tool that asks for input (multi-round-trip requests, MCP 2026-07-28
SEP-2322; or, from a 2025-era server, requests sent in the middle of ``tools/call``).

Everything here is read from the upstream, so it is bounded before it goes anywhere: at most
:data:`MAX_REQUESTS` questions of the three kinds an agent can answer (elicitation,
sampling, roots), :data:`MAX_QUESTIONS_CHARS` of JSON in all, an upstream ``requestState``
of at most :data:`MAX_STATE_CHARS`, :data:`MAX_ROUNDS` rounds in one call.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import orjson
from pydantic import TypeAdapter, ValidationError

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
    for key, req in requests.items():  # as the SDK's own types read them
        try:
            _input_request().validate_python(req)
        except ValidationError as exc:
            raise ValueError(f"inputRequests[{key[:50]!r}] is not a valid request "
                             f"({exc.error_count()} errors)") from None
    return requests, state


@cache
def _input_request() -> TypeAdapter[Any]:
    import mcp_types as types

    return TypeAdapter(types.InputRequest)


def needed(requests: dict[str, Any]) -> set[str]:
    """The client capabilities (``elicitation``, ``sampling``, ``roots``) the questions
    need."""
    return {CAPABILITY[r["method"]] for r in requests.values()}


def envelope(plain: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 request's ``_meta`` (``plain``: none declared) with the agent's
    capabilities to answer questions when the request is part of its call, so an upstream
    asks only what the agent can answer."""
    ds = current()
    if ds is None or not ds.client_capabilities:
        return plain
    return {**plain, "io.modelcontextprotocol/clientCapabilities": ds.client_capabilities}


async def reply_to(request: dict[str, Any], nth: int) -> dict[str, Any]:
    """The JSON-RPC response to a 2025-era server's request in the middle of a call: the
    agent's answer when it can be asked now (its side of the call has an ``ask``), an
    empty result to a ``ping``, else an error (at most :data:`MAX_ROUNDS` per call)."""
    rid, method, params = request.get("id"), request.get("method"), request.get("params")
    if method == "ping":
        return {"jsonrpc": "2.0", "id": rid, "result": {}}
    answer = None
    ds = current()
    if (ds is not None and ds.ask is not None and method in CAPABILITY and nth <= MAX_ROUNDS
            and isinstance(params if params is not None else {}, dict)):
        question = {"method": method, "params": params or {}}
        if len(orjson.dumps(question)) <= MAX_QUESTIONS_CHARS:
            answers = await ds.ask({"r": question}, None, True)
            answer = (answers or {}).get("r")
    if isinstance(answer, dict):
        return {"jsonrpc": "2.0", "id": rid, "result": answer}
    return {"jsonrpc": "2.0", "id": rid, "error": {
        "code": -32601, "message": f"the agent cannot answer {str(method)[:100]} now"}}


__all__ = ["MAX_ROUNDS", "envelope", "input_required", "needed", "questions", "reply_to"]
