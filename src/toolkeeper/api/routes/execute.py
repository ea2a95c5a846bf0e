"""``POST /tools/execute`` and ``POST /tools/execute-batch``: the pipeline over HTTP.

A call that ran the pipeline answers 200 with its result whatever its status, except
the statuses SPEC §7 names (401, 404, 409, 422, 429 and 503 with ``Retry-After``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Annotated, Any

import anyio
import orjson
from fastapi import Header, Response

from toolkeeper.api.auth import Caller, GatewayDep
from toolkeeper.api.errors import ApiError
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.schemas import BatchBody, CheckOut, ErrorOut, ExecuteBody
from toolkeeper.builtins.agent_call import CHAIN_HEADER, parse_chain
from toolkeeper.model.call import CallResult, Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason

router = RouteTable(tags=["execution"])

_HTTP_OF_CALL: dict[str, int] = {
    Reason.UNAUTHENTICATED: 401,
    Reason.TOOL_NOT_FOUND: 404,
    Reason.INVALID_ARGUMENTS: 422,
    Reason.IDEMPOTENCY_KEY_REUSED: 422,
    Reason.IDEMPOTENCY_IN_PROGRESS: 409,
    Reason.RATE_LIMITED: 429,
    Reason.APPROVALS_PENDING_LIMIT: 429,
    Reason.STORE_UNAVAILABLE: 503,
}
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut} for code in (400, 401, 403, 404, 409, 413, 415, 422, 429, 503)}


def acting_as(caller: Principal, agent: str | None) -> Principal:
    """The principal the call runs as: an agent token is its agent; an admin or operator
    may act for an agent of its own tenant."""
    if caller.agent is not None and agent in (None, caller.agent):
        return caller
    if agent is None:
        raise ApiError(422, Reason.INVALID_ARGUMENTS, "this token is not an agent's: name the "
                       "agent the call is made for in 'agent'")
    if not caller.has_role(Role.OPERATOR):
        raise ApiError(403, Reason.FORBIDDEN, "only admins and operators act for an agent")
    return Principal(name=f"{caller.name} for {agent}", tenant_id=caller.tenant_id,
                     roles=frozenset({Role.AGENT}), agent=agent, token_id=caller.token_id,
                     subject=caller.subject, issuer=caller.issuer, scopes=caller.scopes)


def answer(res: CallResult) -> Response:
    """The result body, or the error that SPEC §7 assigns to its reason."""
    body = res.to_dict(omit_empty=False)
    status = _HTTP_OF_CALL.get(res.reason) if isinstance(res.reason, str) else None
    if status is None:
        return Response(orjson.dumps(body), media_type="application/json")
    headers = None
    if res.retry_after is not None:
        headers = {"Retry-After": str(max(1, math.ceil(res.retry_after)))}
    raise ApiError(status, str(res.reason), res.message or str(res.reason), body, headers)


ChainHeader = Annotated[str | None, Header(alias=CHAIN_HEADER, max_length=8192)]
"""The agent_call chain a callee agent hands on when it calls back (``a,b``)."""


def chain_of(header: str | None) -> tuple[str, ...]:
    try:
        return parse_chain(header)
    except ValueError as exc:
        raise ApiError(422, Reason.INVALID_ARGUMENTS, str(exc)) from None


@router.post("/tools/execute", response_model=CallResult, responses=ERRORS,
             summary="Run one call through the pipeline")
async def execute(body: ExecuteBody, gw: GatewayDep, caller: Caller,
                  idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
                  chain: ChainHeader = None) -> Response:
    who = acting_as(caller, body.agent)
    request = replace(body.request(idempotency_key), chain=chain_of(chain))
    return answer(await gw.call_served(request, who))


@router.post("/tools/check", response_model=CheckOut, responses=ERRORS,
             summary="Ask the gate about one call without running it")
async def check(body: ExecuteBody, gw: GatewayDep, caller: Caller,
                idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
                chain: ChainHeader = None) -> Response:
    """``allowed: true`` when the call may run now (send it to ``/tools/execute``); else
    the result that stops it, as ``/tools/execute`` would answer it — an approval or a
    preview is created, a refusal recorded once. For agent frameworks that run checks of
    their own between the gate and the tool. Rate limits are counted by the call itself."""
    who = acting_as(caller, body.agent)
    request = replace(body.request(idempotency_key), chain=chain_of(chain))
    if gw.store.is_local:
        res = await gw.check(request, who)
    else:  # network round trips: off the server's loop, as call_served does
        res = await anyio.to_thread.run_sync(lambda: gw.run_sync(gw.check(request, who)))
    if res is None:
        return Response(b'{"allowed":true,"result":null}', media_type="application/json")
    answer(res)  # raises the error SPEC §7 assigns to its reason
    body_out = {"allowed": False, "result": res.to_dict(omit_empty=False)}
    return Response(orjson.dumps(body_out), media_type="application/json")


@router.post("/tools/execute-batch", response_model=list[CallResult], responses=ERRORS,
             summary="Run an ordered list of calls (sequential or parallel_safe)")
async def execute_batch(body: BatchBody, gw: GatewayDep, caller: Caller,
                        chain: ChainHeader = None) -> list[dict[str, Any]]:
    who = acting_as(caller, body.agent)
    path = chain_of(chain)
    requests = [replace(c.request(None), chain=path) for c in body.calls]
    results = await anyio.to_thread.run_sync(
        lambda: gw.run_sync(gw.batch(requests, mode=body.mode, principal=who)))
    return [r.to_dict(omit_empty=False) for r in results]
