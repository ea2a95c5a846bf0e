"""The REST hot path: the plainest ``POST /tools/execute`` (issue 12) answered without
FastAPI's routing, dependency solving and exception layers, which cost several times the
pipeline itself for a pure tool.

FastAPI stays the reference, as the SDK does for ``/mcp`` (:mod:`toolkeeper.mcp.lean`):
:func:`plan` takes a request only when the route would certainly run the pipeline with
it — a JSON body the route's own model accepts, one bearer token this process has already
verified for an agent acting as itself, plain headers. Anything else, and anything in
doubt, goes to FastAPI unchanged (the buffered body replayed), so every refusal keeps its
one home. Once the pipeline has run, its result is answered by the route's own
:func:`~toolkeeper.api.routes.execute.answer`, and an exception by the app's own handler.
The body guards and CORS sit outside this shortcut, as they sit outside the route.
``rest_fast_path: false`` turns it off. ``tests/api/test_lean_execute_differential.py``
sends the same requests both ways and requires the same answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from toolkeeper.api.errors import HANDLERS
from toolkeeper.api.limits import _buffered, _replaying
from toolkeeper.api.routes.execute import answer
from toolkeeper.api.schemas import ExecuteBody
from toolkeeper.builtins.agent_call import CHAIN_HEADER, parse_chain
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import CallRequest, Principal

PATH = "/tools/execute"
_WANTED = {b"authorization", b"idempotency-key", CHAIN_HEADER.lower().encode(),
           b"content-type"}
_MAX_KEY = 255  # the route's Header(max_length=…) bounds
_MAX_CHAIN = 8192


@dataclass(frozen=True, slots=True)
class Plan:
    """A request the lean path answers: the call and who makes it."""

    request: CallRequest
    principal: Principal


def _headers(raw: list[tuple[bytes, bytes]]) -> dict[bytes, str] | None:
    """The headers the route reads, or ``None`` when one is repeated (the route's reading
    of a repeated header is FastAPI's to decide)."""
    found: dict[bytes, str] = {}
    for key, value in raw:
        name = key.lower()
        if name in _WANTED:
            if name in found:
                return None
            found[name] = value.decode("latin-1")
    return found


def _caller(gw: Gateway, authorization: str | None) -> Principal | None:
    """The agent this process already verified the token of; ``None`` sends the request
    the long way (a token to look up in the store, a 401, a person acting for an agent)."""
    if authorization is None or not authorization.startswith("Bearer "):
        return None
    token = authorization[7:]
    if not token or " " in token:
        return None
    found = gw.cached_principal(token)
    return found if found is not None and found.agent is not None else None


def plan(gw: Gateway, headers: dict[bytes, str], body: bytes) -> Plan | None:
    """The call the route would run for this request, or ``None`` to leave it to FastAPI."""
    if headers.get(b"content-type", "").split(";")[0].strip().lower() != "application/json":
        return None
    key = headers.get(b"idempotency-key")
    chain = headers.get(CHAIN_HEADER.lower().encode())
    if (key is not None and len(key) > _MAX_KEY) or (chain is not None
                                                      and len(chain) > _MAX_CHAIN):
        return None
    who = _caller(gw, headers.get(b"authorization"))
    if who is None:
        return None
    try:
        # the route's own parser (Starlette's Request.json is json.loads: big integers stay
        # integers, NaN is read) and FastAPI's python-mode validation of the parsed body
        parsed = ExecuteBody.model_validate(json.loads(body))
        path = parse_chain(chain)
    except (ValidationError, ValueError, RecursionError):
        return None
    if parsed.agent not in (None, who.agent):
        return None
    return Plan(replace(parsed.request(key), chain=path), who)


class ExecuteShortcut:
    """``POST /tools/execute`` of the plainest shape straight to the pipeline; every other
    request (and every other path) to ``app``."""

    def __init__(self, app: ASGIApp, *, gw: Gateway) -> None:
        self.app, self.gw = app, gw

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (scope["type"] == "http" and scope["path"] == PATH
                and scope["method"] == "POST"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope["headers"])
        messages, body = await _buffered(receive)
        lean = plan(self.gw, headers, body) if headers is not None else None
        if lean is None:
            await self.app(scope, _replaying(messages, receive), send)
            return
        try:
            response = answer(await self.gw.call_served(lean.request, lean.principal))
        except Exception as exc:  # answered as the app's handlers answer it
            response = await _handled(scope, exc)
        await response(scope, receive, send)


async def _handled(scope: Scope, exc: Exception) -> Response:
    """``exc`` answered by the app's handler for its type (:data:`HANDLERS`, nearest class
    first, as Starlette looks it up); an exception without one propagates, as it would
    from the route."""
    for cls in type(exc).__mro__:
        handler: Any = HANDLERS.get(cls)
        if handler is not None:
            response: Response = await handler(Request(scope), exc)
            return response
    raise exc


__all__ = ["ExecuteShortcut", "Plan", "plan"]
