"""The async face: :class:`AsyncClient` and its namespaces, over the one :class:`Core`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

import httpx

from toolkeeper.client._core import Core, Limits, unanswered
from toolkeeper.client._errors import ServerUnavailable
from toolkeeper.client._models import (
    AgentTools,
    Approval,
    AuditPage,
    AuditVerification,
    Outcome,
    Superseded,
    ToolView,
    TurnDecided,
    agent_tools,
    call_result,
    from_json,
)
from toolkeeper.client.backend import RemoteBackend
from toolkeeper.errors import stopped
from toolkeeper.model.call import CallRequest, CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.toolbox.toolbox import Toolbox

MAX_WAIT_PER_REQUEST_S = 30.0
"""The server's cap on one ``/approvals/{id}/wait``; longer waits loop."""

BatchMode = Literal["sequential", "parallel_safe"]


def execute_body(tool: str, arguments: Any, *, action: str | None,
                 idempotency_key: str | None, turn_group_id: str | None,
                 **fields: Any) -> dict[str, Any]:
    """The body of one call. Without a key and a turn group the server would give the call
    a fresh key that never dedupes, so a key is generated here, once per logical call, and
    every retry of this client re-sends it. With a turn group, the server's default key
    (tool, action, arguments, turn group) already names the logical call: a re-run of the
    same turn dedupes across processes, which a random key would prevent."""
    if idempotency_key is None and turn_group_id is None:
        idempotency_key = f"tkc-{uuid.uuid4().hex}"
    body = {"tool": tool, "arguments": {} if arguments is None else arguments,
            "action": action, "idempotency_key": idempotency_key,
            "turn_group_id": turn_group_id, **fields}
    return {k: v for k, v in body.items() if v is not None or k == "arguments"}


def _request_body(req: CallRequest | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(req, CallRequest):
        fields = {"task_id": req.task_id, "step_id": req.step_id, "trace_id": req.trace_id,
                  "approval_id": req.approval_id, "preview_token": req.preview_token,
                  "scopes": list(req.scopes) if req.scopes is not None else None,
                  "critical": req.critical}
        return execute_body(req.tool, req.arguments, action=req.action,
                            idempotency_key=req.idempotency_key,
                            turn_group_id=req.turn_group_id, **fields)
    spec = dict(req)
    return execute_body(spec.pop("tool"), spec.pop("arguments", None),
                        action=spec.pop("action", None),
                        idempotency_key=spec.pop("idempotency_key", None),
                        turn_group_id=spec.pop("turn_group_id", None), **spec)


class _Shared(httpx.AsyncBaseTransport):
    """Another client's transport, left open when this client closes."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """The owning client closes it."""


class AsyncCalls:
    """Recorded calls (``/calls``)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def get(self, call_id: str) -> Outcome:
        return Outcome.model_validate(await self._core.json("GET", f"/calls/{call_id}"))

    async def list(self, *, status: str | None = None, limit: int = 100) -> list[Outcome]:
        params = {"limit": limit, **({"status": status} if status else {})}
        rows = await self._core.json("GET", "/calls", params=params)
        return [Outcome.model_validate(r) for r in rows]

    async def resolve(self, call_id: str, status: Literal["succeeded", "failed"], *,
                      output: Any = None, note: str | None = None) -> Outcome:
        """Record the real outcome of an ``unknown`` call (operator or approver token)."""
        body = {"status": status, "output": output, "note": note}
        return Outcome.model_validate(await self._core.json(
            "POST", f"/calls/{call_id}/resolve", json=body, retry_safe=False))


class AsyncApprovals:
    """Approvals: the inbox, decisions (approver token), confirmations (agent token)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def list(self, *, status: str | None = "pending", limit: int = 100) -> list[Approval]:
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            params["status"] = status
        rows = await self._core.json("GET", "/approvals", params=params)
        return [Approval.model_validate(r) for r in rows]

    async def get(self, approval_id: str) -> Approval:
        return Approval.model_validate(await self._core.json("GET", f"/approvals/{approval_id}"))

    async def approve(self, approval_id: str, *, arguments: dict[str, Any] | None = None,
                      note: str | None = None) -> Approval:
        """Approve; with ``arguments`` the approval binds those edited arguments."""
        return await self._decide(approval_id, "approve",
                                  {"arguments": arguments, "note": note})

    async def deny(self, approval_id: str, *, note: str | None = None) -> Approval:
        return await self._decide(approval_id, "deny", {"note": note})

    async def confirm(self, approval_id: str) -> Approval:
        """Resolve a confirm gate (the requesting agent's own token may)."""
        return await self._decide(approval_id, "confirm", None)

    async def _decide(self, approval_id: str, verb: str, body: Any) -> Approval:
        # never re-sent after a lost answer: a second approve would be refused anyway
        data = await self._core.json("POST", f"/approvals/{approval_id}/{verb}", json=body,
                                     retry_safe=False)
        return Approval.model_validate(data)

    async def wait(self, approval_id: str, timeout_s: float = 10.0) -> Approval:
        """One long-poll: the approval once decided, else its pending state after
        ``timeout_s`` (at most 30 s per request)."""
        wait = max(0.0, min(timeout_s, MAX_WAIT_PER_REQUEST_S))
        data = await self._core.json(
            "GET", f"/approvals/{approval_id}/wait", params={"timeout_s": wait},
            timeout=wait + self._core.limits.timeout)
        return Approval.model_validate(data)

    async def wait_for_decision(self, approval_id: str, timeout_s: float) -> Approval:
        """The approval once decided (approved, denied, consumed or expired), or its
        pending state after ``timeout_s`` seconds in all (long-polls in a loop)."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            approval = await self.wait(approval_id, deadline - time.monotonic())
            if approval.decided or time.monotonic() >= deadline:
                return approval


class AsyncDiscovery:
    """What an agent may call, and what it could have and why not."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def enabled(self, agent: str) -> AgentTools:
        return agent_tools(await self._core.json("GET", f"/discovery/agents/{agent}/enabled"))

    async def unavailable(self, agent: str) -> AgentTools:
        """Tenant-available tools the agent lacks, each with ``why_unavailable``."""
        return agent_tools(await self._core.json(
            "GET", f"/discovery/agents/{agent}/unavailable"))

    async def tool(self, tool_id: str) -> ToolView:
        """One tool by registry id (an agent token: only a tool it may call, else 404)."""
        return from_json(ToolView, await self._core.json("GET", f"/tools/{tool_id}"))


class AsyncAudit:
    """The audit trail (operator or approver token)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def list(self, *, call_id: str | None = None, agent: str | None = None,
                   tool: str | None = None, types: Sequence[str] | None = None,
                   since: datetime | None = None, until: datetime | None = None,
                   cursor: int = 0, limit: int = 100) -> AuditPage:
        params: dict[str, Any] = {"call_id": call_id, "agent": agent, "tool": tool,
                                  "type": list(types) if types else None,
                                  "since": since.isoformat() if since else None,
                                  "until": until.isoformat() if until else None,
                                  "cursor": cursor, "limit": limit}
        data = await self._core.json(
            "GET", "/audit", params={k: v for k, v in params.items() if v is not None})
        return AuditPage.model_validate(data)

    async def verify(self) -> AuditVerification:
        return AuditVerification.model_validate(await self._core.json("GET", "/audit/verify"))


class AsyncClient:
    """The REST client, async face. ``async with AsyncClient(url, token) as tk: …``"""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0,
                 max_retries: int = 3, max_wait_s: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        limits = Limits(timeout=timeout, max_retries=max_retries, max_wait_s=max_wait_s)
        self._core = Core(base_url, token, limits=limits, transport=transport)
        self._transport = transport
        self.calls = AsyncCalls(self._core)
        self.approvals = AsyncApprovals(self._core)
        self.discovery = AsyncDiscovery(self._core)
        self.audit = AsyncAudit(self._core)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._core.aclose()

    def with_token(self, token: str) -> AsyncClient:
        """A client of the same server, bounds and transport with another token (an
        approver's, for a decision); close it (``async with``) — the transport stays open."""
        lim = self._core.limits
        shared = None if self._transport is None else _Shared(self._transport)
        return AsyncClient(self._core.base_url, token, timeout=lim.timeout,
                           max_retries=lim.max_retries, max_wait_s=lim.max_wait_s,
                           transport=shared)

    def toolbox_backend(self, *, approver_token: str | None = None) -> RemoteBackend:
        """The Toolbox backend over this client (what ``build_tools`` looks for)."""
        return RemoteBackend(self, approver_token=approver_token)

    def toolbox(self, agent: str, *, approver_token: str | None = None) -> Toolbox:
        """The Toolbox of ``agent`` on this server (this token's tenant): the same interface
        as in-process. Decisions are made with ``approver_token`` unless one is given."""
        return Toolbox(self.toolbox_backend(approver_token=approver_token), agent=agent)

    async def execute(self, tool: str, arguments: Any = None, *, action: str | None = None,
                      idempotency_key: str | None = None, turn_group_id: str | None = None,
                      **fields: Any) -> CallResult:
        """Run one call; a stopped call returns its result (status and reason), never
        raises. ``fields``: ``approval_id``, ``preview_token``, ``task_id``, ``step_id``,
        ``trace_id``, ``scopes``, ``agent`` (an operator acting for an agent)."""
        return await self._core.execute(execute_body(
            tool, arguments, action=action, idempotency_key=idempotency_key,
            turn_group_id=turn_group_id, **fields))

    async def execute_request(self, request: CallRequest, *,
                              agent: str | None = None) -> CallResult:
        """Run one :class:`CallRequest` as :meth:`execute` does (``critical`` matters in a
        batch only, so it is not sent)."""
        body = _request_body(request)
        body.pop("critical", None)
        if agent is not None:
            body["agent"] = agent
        return await self._core.execute(body)

    async def check_request(self, request: CallRequest, *,
                            agent: str | None = None) -> CallResult | None:
        """Ask the gate about ``request`` without running it (``POST /tools/check``):
        ``None`` when it may run now, else the result that stops it — an approval or a
        preview is created as :meth:`execute` would create it."""
        body = _request_body(request)
        body.pop("critical", None)
        if agent is not None:
            body["agent"] = agent
        return await self._core.check(body)

    async def call_or_raise(self, tool: str, arguments: Any = None, **kw: Any) -> CallResult:
        """Like :meth:`execute`, but a call that did not succeed raises as
        ``Gateway.call_or_raise`` does (``ApprovalRequired``, ``CallDenied``,
        ``CallFailed``), with the same ``reason``."""
        res = await self.execute(tool, arguments, **kw)
        if res.status is not CallStatus.SUCCEEDED:
            raise stopped(res)
        return res

    async def execute_batch(self, requests: Sequence[CallRequest | Mapping[str, Any]], *,
                            mode: BatchMode = "sequential",
                            agent: str | None = None) -> list[CallResult]:
        """Run calls in order (SPEC §5); results in request order. Each call gets an
        idempotency key as :meth:`execute` does, so a retried batch never runs a call
        twice."""
        bodies = [_request_body(r) for r in requests]
        body: dict[str, Any] = {"calls": bodies, "mode": mode}
        if agent is not None:
            body["agent"] = agent
        try:
            rows = await self._core.json("POST", "/tools/execute-batch", json=body,
                                         retry_safe=True)
        except ServerUnavailable as exc:
            return [unanswered(str(b["tool"]), b.get("action"), exc, b) for b in bodies]
        return [call_result(r) for r in rows]

    async def decide_turn(self, turn_group_id: str, decision: str, *, tool: str | None = None,
                          action: str | None = None, continued_as: str | None = None,
                          pending: int | None = None,
                          note: str | None = None) -> TurnDecided:
        """Record a supersede decision taken before an irreversible call (``supersede``,
        ``absorb``, ``force_complete`` or ``queue`` with ``continued_as``, the new turn
        group). Retried on a lost answer: the audit may then hold the decision twice."""
        body = {k: v for k, v in {"decision": decision, "tool": tool, "action": action,
                                  "continued_as": continued_as, "pending": pending,
                                  "note": note}.items() if v is not None}
        return TurnDecided.model_validate(await self._core.json(
            "POST", f"/turns/{turn_group_id}/decisions", json=body, retry_safe=True))

    async def supersede(self, turn_group_id: str) -> Superseded:
        """Stop later irreversible calls of a turn group (a regenerated answer)."""
        return Superseded.model_validate(await self._core.json(
            "POST", f"/turns/{turn_group_id}/supersede", retry_safe=True))

    async def wait_for_decision(self, approval_id: str, timeout_s: float) -> Approval:
        """See :meth:`AsyncApprovals.wait_for_decision`."""
        return await self.approvals.wait_for_decision(approval_id, timeout_s)
