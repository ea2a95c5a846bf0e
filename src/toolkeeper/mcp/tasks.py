"""Governed calls as MCP tasks: the extension ``io.modelcontextprotocol/tasks`` (SEP-2663,
2026-07-28 era). To a client declaring it (request ``_meta`` client capabilities),
``tools/call`` answers a ``CreateTaskResult`` when an ``approve`` gate stops the call
(``working`` until an approver decides; the next ``tasks/get`` after the decision runs the
call again with the approval and the task's one idempotency key, once whichever worker
polls), when a ``confirm`` gate stops it (``input_required`` with the confirmation as an
elicitation, answered by ``tasks/update``), or when the tool says
``execution.task_support: optional|required`` (run in the background of this process).

Tasks live in the store (:mod:`toolkeeper.store.mcp_tasks`) bound to tenant and agent: an
unknown, expired or another's id answers ``Task not found`` (-32602). The call's answer
(``isError`` included, e.g. ``approval_denied``) completes the task; ``failed`` is the
gateway's own failure (``internal_error``, ``store_unavailable``). Cancelling a task that
waits for a human withdraws its approval (denied, audited): the call never runs; a running
call is not interrupted (cancellation is cooperative), its answer is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolkeeper.canonical import digest
from toolkeeper.errors import OperationRefused
from toolkeeper.mcp import results
from toolkeeper.mcp.state import state_key
from toolkeeper.mcp.task_asks import KEY as ASKED
from toolkeeper.mcp.task_asks import TaskAsks
from toolkeeper.mcp.task_wire import (
    ArgumentSeal,
    TaskParams,
    UpdateParams,
    declared,
    detailed,
    envelope,
    header_name,
    missing_capability,
)
from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.enums import ApprovalStatus, CallStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.mcp_names import Listed
from toolkeeper.model.reasons import Reason
from toolkeeper.services.events import system_event
from toolkeeper.store.db import utcnow
from toolkeeper.store.mcp_tasks import TERMINAL, TaskRow
from toolkeeper.upstream.downstream import DOWNSTREAM

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway
    from toolkeeper.mcp.input_required import Rounds

log = logging.getLogger("toolkeeper.mcp")
Ctx = ServerRequestContext[Any, Any]
T = TypeVar("T")

KEEP_S = 3600.0
"""How long a task stays readable after what it waits for (its approval's expiry, or the
tool's timeout): its ``ttlMs`` is fixed at creation and the task never expires before."""
LEASE_MARGIN_S = 60.0
"""A running call's claim lasts the tool's timeout plus this: a dead runner's task is then
taken over by the next poll (the call's idempotency key replays, never runs it twice)."""
REQUEST_FIELDS = ("tool", "action", "arguments", "idempotency_key", "turn_group_id",
                  "task_id", "step_id", "trace_id")
MAX_BACKGROUND = 256
"""Background calls at once in this process; past it an ``optional`` tool's call runs
synchronously (the extension lets the server choose), a ``required`` one still as a task."""
GATEWAY_FAILURES = frozenset({Reason.INTERNAL_ERROR.value, Reason.STORE_UNAVAILABLE.value})


class Face(Protocol):
    """What tasks need of :class:`toolkeeper.mcp.server.McpFace`."""

    gw: Gateway
    rounds: Rounds

    async def principal(self, ctx: Ctx) -> Principal: ...

    def _question(self, name: str, result: CallResult, arguments: Any) -> str: ...


def support(gw: Gateway, who: Principal, tool: str) -> str:
    """The tool's ``execution.task_support`` (``forbidden`` when unknown)."""
    rec = gw.runtime.catalog.record(who.tenant_id, tool)
    return rec[1].execution.task_support if rec is not None else "forbidden"


def refuse_required(gw: Gateway, who: Principal, tool: str) -> None:
    """A client without the extension may not call a ``required`` task tool (-32021)."""
    if support(gw, who, tool) == "required":
        raise missing_capability()


class Tasks:
    """The tasks of one MCP face: ``tools/call`` hooks and the ``tasks/*`` handlers."""

    def __init__(self, face: Face, confirm_schema: dict[str, Any]) -> None:
        self.face = face
        self.confirm_schema = confirm_schema
        self.gw = face.gw
        self.repo = face.gw.store.mcp_tasks
        self._runs: set[asyncio.Task[None]] = set()
        self._next_purge = 0.0
        self._sealer: ArgumentSeal | None = None
        self.asks = TaskAsks(self)  # an upstream's questions inside a task (task_asks.py)

    def register(self, server: Any, guard: Callable[[Any], Any]) -> None:
        server.add_request_handler("tasks/get", TaskParams, guard(self._get))
        server.add_request_handler("tasks/update", UpdateParams, guard(self._update))
        server.add_request_handler("tasks/cancel", TaskParams, guard(self._cancel))

    def _lease(self, who: Principal, tool: str) -> float:
        rec = self.gw.runtime.catalog.record(who.tenant_id, tool)
        return (rec[1].execution.timeout_s if rec is not None else 30.0) + LEASE_MARGIN_S

    async def _db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.gw.store.is_local:  # SQLite: short and local, as the pipeline does
            return fn(*args, **kwargs)
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))

    # -- tools/call -----------------------------------------------------------------------

    async def begin(self, ctx: Ctx, who: Principal, entry: Listed,
                    request: CallRequest) -> dict[str, Any] | None:
        """Before the call: a task tool's call becomes a background task (or -32021)."""
        wanted = support(self.gw, who, entry.tool)
        if wanted == "forbidden":
            return None
        if not declared(ctx):
            if wanted == "required":
                raise missing_capability()
            return None
        if wanted == "optional" and len(self._runs) >= MAX_BACKGROUND:
            return None
        lease = self._lease(who, entry.tool)
        row, request = await self._create(who, entry.name, request, phase="running",
                                          status="working", wait_s=lease, lease_s=lease,
                                          message="running the call")
        self._spawn(who, row, request)
        return {"resultType": "task", **envelope(row)}

    async def park(self, ctx: Ctx, who: Principal, entry: Listed, request: CallRequest,
                   result: CallResult) -> dict[str, Any] | None:
        """After the call: one stopped for an approval or a confirmation becomes a task."""
        if result.approval_id is None or result.status not in (
                CallStatus.APPROVAL_REQUIRED, CallStatus.CONFIRMATION_REQUIRED) \
                or not declared(ctx):
            return None
        phase, status, message, asks = self._waiting(entry.name, request, result)
        row, _ = await self._create(
            who, entry.name, request, phase=phase, status=status,
            wait_s=await self._approval_left(result.approval_id), message=message,
            approval_id=result.approval_id, input_requests=asks)
        return {"resultType": "task", **envelope(row)}

    def _waiting(self, name: str, request: CallRequest, result: CallResult
                 ) -> tuple[str, str, str, dict[str, Any] | None]:
        aid = result.approval_id
        if result.status is CallStatus.APPROVAL_REQUIRED:
            return ("approval", "working",
                    f"waiting for approval {aid}: an approver must approve or deny it "
                    f"(POST /approvals/{aid}/approve or /deny, or the console); once "
                    "approved the call runs once and this task completes with its result",
                    None)
        ask = types.ElicitRequest(params=types.ElicitRequestFormParams(
            message=self.face._question(name, result, request.arguments),
            requested_schema=self.confirm_schema))
        return ("confirm", "input_required",
                f"waiting for the user to confirm approval {aid} (answer the input request "
                "with tasks/update)",
                {f"confirm-{aid}": ask.model_dump(by_alias=True, mode="json",
                                                  exclude_none=True)})

    async def _approval_left(self, approval_id: str) -> float:
        rec = await self._db(self.gw.store.approvals.get, approval_id)
        return max(0.0, (rec.expires_at - utcnow()).total_seconds()) if rec else 0.0

    async def _create(self, who: Principal, name: str, request: CallRequest, *, phase: str,
                      status: str, wait_s: float, message: str, lease_s: float | None = None,
                      approval_id: str | None = None,
                      input_requests: dict[str, Any] | None = None
                      ) -> tuple[TaskRow, CallRequest]:
        """Durably created before the client hears of it (its tasks/get resolves at once)."""
        task_id = "tsk_" + secrets.token_urlsafe(24)
        key = request.idempotency_key or f"mcp-task:{task_id}"
        request = CallRequest(**{f: getattr(request, f) for f in REQUEST_FIELDS
                                 if f != "idempotency_key"}, idempotency_key=key)
        now = time.time()
        row = TaskRow(id=task_id, tenant_id=who.tenant_id, agent=who.agent or "", tool=name,
                      status=status, phase=phase, status_message=message,
                      approval_id=approval_id,
                      request=self._stored(request, task_id, who),
                      input_requests=input_requests, result=None, error=None,
                      poll_ms=500, created_at=now, updated_at=now,
                      expires_at=now + wait_s + KEEP_S,
                      lease_until=now + lease_s if lease_s is not None else None)
        await self._db(self.repo.create, row)
        if now >= self._next_purge:  # expired tasks go even without a retention sweep
            self._next_purge = now + 60.0
            await self._db(self.repo.purge_expired, now)
        return row, request

    def _stored(self, request: CallRequest, task_id: str, who: Principal) -> dict[str, Any]:
        kept = {f: getattr(request, f) for f in REQUEST_FIELDS if f != "arguments"}
        kept["sealed_arguments"] = self._seal().seal(request.arguments, task_id,
                                                     who.tenant_id, who.agent or "")
        return kept

    async def _rerun(self, row: TaskRow) -> CallRequest:
        """The stored call, again, with the approval it waited for: with the arguments the
        approver edited when they did (and the approval kept them unmasked)."""
        kept = dict(row.request)
        kept.pop(ASKED, None)
        arguments = self._seal().open(kept.pop("sealed_arguments"), row.id, row.tenant_id,
                                      row.agent)
        rec = None if row.approval_id is None else \
            await self._db(self.gw.store.approvals.get, row.approval_id)
        if rec is not None and rec.edited_digest is not None \
                and digest(rec.edited_arguments) == rec.edited_digest:
            arguments = rec.edited_arguments
        return CallRequest(**kept, arguments=arguments, approval_id=row.approval_id)

    def _seal(self) -> ArgumentSeal:
        if self._sealer is None:
            self._sealer = ArgumentSeal(state_key(self.gw))
        return self._sealer

    # -- running the call -----------------------------------------------------------------

    def _spawn(self, who: Principal, row: TaskRow, request: CallRequest,
               resume: dict[str, Any] | None = None) -> None:
        run = asyncio.get_running_loop().create_task(self._run(who, row.id, row.tool,
                                                               request, resume))
        self._runs.add(run)
        run.add_done_callback(self._runs.discard)

    async def _run(self, who: Principal, task_id: str, name: str, request: CallRequest,
                   resume: dict[str, Any] | None = None) -> None:
        if (base := DOWNSTREAM.get()) is not None:  # the request that started it is over:
            DOWNSTREAM.set(replace(base, progress=None, log=None))  # nothing relayed to it
        try:  # an upstream's questions park the task (toolkeeper.mcp.task_asks)
            result, asked = await self.face.rounds.run(None, who, request, resume, modern=True)
            if asked is not None:
                await self.asks.park(who, task_id, request, asked)
                return
        except Exception:
            log.exception("MCP task %s: the call failed", task_id)
            oops = "internal error (logged by the gateway)"
            await self._db(self.repo.finish, task_id, time.time(), status="failed",
                           message=oops, error={"code": types.INTERNAL_ERROR, "message": oops})
            return
        try:
            await self._settle(task_id, name, request, result)
        except Exception:
            log.exception("MCP task %s: could not record the call's answer", task_id)

    async def _settle(self, task_id: str, name: str, request: CallRequest,
                      result: CallResult) -> None:
        now = time.time()
        if result.approval_id is not None and result.status in (
                CallStatus.APPROVAL_REQUIRED, CallStatus.CONFIRMATION_REQUIRED):
            phase, status, message, asks = self._waiting(
                name, request, result)  # a background call stopped for a human
            left = await self._approval_left(result.approval_id)
            await self._db(self.repo.wait, task_id, now, phase=phase, status=status,
                           message=message, approval_id=result.approval_id,
                           input_requests=asks, expires_at=now + left + KEEP_S)
            return
        if str(result.reason) in GATEWAY_FAILURES:
            await self._db(self.repo.finish, task_id, now, status="failed",
                           message=results.one_line(result),
                           error={"code": types.INTERNAL_ERROR,
                                  "message": results.one_line(result),
                                  "data": results.structured(result)})
            return
        wire = results.wire(result).model_dump(by_alias=True, mode="json", exclude_none=True)
        message = result.status.value if result.reason is None else \
            f"{result.status.value} ({result.reason})"
        await self._db(self.repo.finish, task_id, now, status="completed", message=message,
                       result=wire)

    # -- tasks/get, tasks/update, tasks/cancel --------------------------------------------

    async def _find(self, ctx: Ctx, params: TaskParams) -> tuple[Principal, TaskRow]:
        who = await self.face.principal(ctx)
        if not declared(ctx):
            raise missing_capability()
        named = header_name(ctx)
        if named is not None and named != params.task_id:
            raise MCPError(code=types.HEADER_MISMATCH,
                           message="the Mcp-Name header does not match params.taskId")
        row = await self._db(self.repo.get, params.task_id, who.tenant_id, who.agent or "",
                             time.time())
        if row is None:  # unknown, expired, another agent's or tenant's: the same answer
            raise MCPError(code=types.INVALID_PARAMS, message="Task not found")
        return who, row

    async def _get(self, ctx: Ctx, params: TaskParams) -> dict[str, Any]:
        who, row = await self._find(ctx, params)
        if await self._advance(who, row):
            fresh = await self._db(self.repo.get, row.id, row.tenant_id, row.agent,
                                   time.time())
            row = fresh if fresh is not None else row
        return detailed(row)

    async def _advance(self, who: Principal, row: TaskRow) -> bool:
        """Run the call when its approval was decided (or a dead runner's lease ran out):
        ``True`` when this poll took it (exactly one poller does)."""
        now = time.time()
        if row.phase in ("approval", "confirm") and row.approval_id is not None:
            rec = await self._db(self.gw.store.approvals.get, row.approval_id)
            if rec is not None and rec.status is ApprovalStatus.PENDING \
                    and rec.expires_at > utcnow():
                return False
        elif not (row.phase == "running" and row.lease_until is not None
                  and row.lease_until < now):
            return False
        return await self._take(who, row, (row.phase,))

    async def _take(self, who: Principal, row: TaskRow, phases: tuple[str, ...]) -> bool:
        lease = self._lease(who, str(row.request["tool"]))
        if not await self._db(self.repo.claim, row.id, phases, time.time(), lease):
            return False
        self._spawn(who, row, await self._rerun(row), self.asks.resume_stored(row))
        return True

    async def _update(self, ctx: Ctx, params: UpdateParams) -> dict[str, Any]:
        """Answers to the task's input requests (unknown or answered keys are ignored)."""
        who, row = await self._find(ctx, params)
        if row.phase == ASKED:
            await self.asks.update(who, row, params.input_responses)
            return {}
        asks = row.input_requests or {}
        for key, raw in params.input_responses.items():
            if key not in asks or row.phase != "confirm" or row.approval_id is None:
                continue
            try:
                answer = types.ElicitResult.model_validate(raw)
            except ValidationError:
                continue  # not an answer: the question stays open
            confirmed = answer.action == "accept" and \
                (answer.content or {}).get("confirm") is True
            await anyio.to_thread.run_sync(self._decide, row.approval_id, who, confirmed)
            await self._take(who, row, ("confirm",))
            break
        return {}

    def _decide(self, approval_id: str, who: Principal, confirmed: bool) -> None:
        try:  # refused (e.g. expired): the call's run says so
            if confirmed:
                self.gw.approvals.confirm(approval_id, who)
            else:
                self.gw.approvals.deny(approval_id, who, note="declined in-band (MCP task)")
        except OperationRefused as exc:
            log.info("in-band decision on %s refused: %s", approval_id, exc)

    async def _cancel(self, ctx: Ctx, params: TaskParams) -> dict[str, Any]:
        """Cooperative: a task waiting for a human never runs (its approval is withdrawn);
        a running call finishes and its answer is dropped."""
        who, row = await self._find(ctx, params)
        if row.status not in TERMINAL and await self._db(self.repo.cancel, row.id,
                                                          time.time()) \
                and row.phase in ("approval", "confirm") and row.approval_id is not None:
            await anyio.to_thread.run_sync(self._withdraw, row.approval_id, who)
        return {}

    def _withdraw(self, approval_id: str, who: Principal) -> None:
        """Deny the approval a cancelled task waited for (audited as ``withdrawn``)."""
        rec = self.gw.store.approvals.get(approval_id)
        if rec is None or rec.status is not ApprovalStatus.PENDING:
            return
        ev = system_event(EventType.APPROVAL_DENIED, rec.tenant_id, tool=rec.tool,
                          agent=rec.agent, call_id=rec.call_id, approval_id=rec.id,
                          by=who.name, withdrawn=True)
        self.gw.store.approvals.decide(
            rec.id, status=ApprovalStatus.DENIED, by=who.name, events=[ev],
            note="withdrawn: the MCP task waiting for it was cancelled")
