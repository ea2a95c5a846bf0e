"""The in-process backend: a Toolbox over a :class:`Gateway` in this process.

Listings come from :mod:`toolkeeper.services.discovery` over the gateway's catalog and
health board (the pipeline's own rules, so a listed tool is one the pipeline lets the agent
call); calls go through ``gw.call``/``gw.batch`` as the agent (trusted in-process);
decisions through ``gw.approvals`` as an approver principal.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar, cast

from toolkeeper.errors import OperationRefused, UserError
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.enums import ApprovalStatus
from toolkeeper.model.mcp_names import mcp_name
from toolkeeper.model.reasons import Reason
from toolkeeper.model.turns import SupersedeAction
from toolkeeper.model.wire import TurnDecided
from toolkeeper.services.discovery import (
    EnabledTool,
    agent_enabled,
    agent_tools,
    as_seen_by_agent,
)
from toolkeeper.store.db import utcnow
from toolkeeper.store.records import ApprovalRecord
from toolkeeper.toolbox.backend import Approver, Decision
from toolkeeper.toolbox.types import Approval, ToolInfo, ToolMetadata, UnavailableInfo

T = TypeVar("T")
POLL_S = 0.05
"""How often :meth:`InProcessBackend.wait_for_decision` re-reads a pending approval (the
decision may come from another process sharing the store)."""


class InProcessBackend:
    """Runs a Toolbox's calls on ``gw``; ``approver`` decides when a decision names no one."""

    def __init__(self, gw: Gateway, *, approver: Principal | None = None) -> None:
        self.gateway = gw
        self._approver = approver

    def _enabled(self, agent: str, tenant_id: str) -> tuple[EnabledTool, ...]:
        view = agent_enabled(self.gateway.catalog, self.gateway.runtime.health, tenant_id, agent)
        if view is None:
            raise OperationRefused(Reason.NOT_FOUND, f"no agent {agent!r}")
        return view[1]

    async def enabled(self, agent: str, tenant_id: str) -> list[ToolInfo]:
        return [_info(item) for item in self._enabled(agent, tenant_id)]

    async def unavailable(self, agent: str, tenant_id: str) -> list[UnavailableInfo]:
        view = agent_tools(self.gateway.catalog, self.gateway.runtime.health, tenant_id, agent)
        if view is None:
            raise OperationRefused(Reason.NOT_FOUND, f"no agent {agent!r}")
        return [UnavailableInfo(name=u.definition.name, description=u.definition.description,
                                why_unavailable=u.why.value, message=u.message,
                                missing_scopes=u.missing_scopes,
                                categories=u.definition.categories)
                for u in as_seen_by_agent(view).unavailable]

    async def metadata(self, agent: str, tenant_id: str, tool: str) -> ToolMetadata | None:
        for item in self._enabled(agent, tenant_id):
            if item.definition.name == tool:
                return _metadata(item)
        return None

    async def execute(self, request: CallRequest, agent: str, tenant_id: str) -> CallResult:
        return await self.gateway.call(request, agent=agent, tenant_id=tenant_id)

    async def check(self, request: CallRequest, agent: str, tenant_id: str) -> CallResult | None:
        return await self.gateway.check(request, self.gateway.principal(agent=agent,
                                                                         tenant_id=tenant_id))

    async def execute_batch(self, requests: Sequence[CallRequest], mode: str, agent: str,
                            tenant_id: str) -> list[CallResult]:
        return await self.gateway.batch(requests, mode=mode, agent=agent, tenant_id=tenant_id)

    async def supersede(self, turn_group_id: str, tenant_id: str) -> bool:
        return self.gateway.calls.supersede(tenant_id, turn_group_id)

    async def decide_turn(self, turn_group_id: str, decision: str, tenant_id: str,
                          **fields: Any) -> TurnDecided:
        answer = await asyncio.to_thread(
            self.gateway.calls.decide_turn, tenant_id, turn_group_id,
            SupersedeAction(decision), **fields)
        return TurnDecided.model_validate(answer)

    async def approval(self, approval_id: str, tenant_id: str) -> Approval:
        return approval_of(self.gateway.approvals.get(approval_id, tenant_id))

    async def decide(self, approval_id: str, decision: Decision, tenant_id: str, *,
                     by: Approver = None, note: str | None = None,
                     edited_arguments: Any = None) -> Approval:
        who = self._who(by)
        approvals = self.gateway.approvals
        if decision == "approve":
            rec = approvals.approve(approval_id, who, edited_arguments=edited_arguments,
                                    note=note)
        elif decision == "deny":
            rec = approvals.deny(approval_id, who, note=note)
        else:
            rec = approvals.confirm(approval_id, who)
        return approval_of(rec)

    async def wait_for_decision(self, approval_id: str, tenant_id: str,
                                timeout_s: float) -> Approval:
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            approval = await self.approval(approval_id, tenant_id)
            left = deadline - time.monotonic()
            if approval.status is not ApprovalStatus.PENDING or left <= 0:
                return approval
            await asyncio.sleep(min(POLL_S, left))

    def _who(self, by: Approver) -> Principal:
        if isinstance(by, Principal):
            return by
        if isinstance(by, str):
            found = self.gateway.authenticate(by)
            if found is None:
                raise OperationRefused(Reason.UNAUTHENTICATED, "unknown or revoked token")
            return found
        if self._approver is None:
            raise UserError("a decision needs an approver: pass by= (a Principal or an approver "
                            "token), or InProcessBackend(gw, approver=...)")
        return self._approver

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        return cast(T, self.gateway.run_sync(coro))


def _info(item: EnabledTool) -> ToolInfo:
    tool = item.definition
    return ToolInfo(name=tool.name, description=tool.description, version=tool.version,
                    actions=item.actions, input_schemas=item.input_schemas(),
                    action_descriptions={a: tool.actions[a].description for a in item.actions},
                    names={a: mcp_name(tool, a) for a in item.actions},
                    categories=tool.categories)


def _metadata(item: EnabledTool) -> ToolMetadata:
    tool = item.definition
    return ToolMetadata(
        name=tool.name, version=tool.version,
        side_effects={a: tool.action_side_effect(a) for a in item.actions},
        risks={a: tool.action_risk(a) for a in item.actions},
        requires_confirmation=tool.requires_confirmation,
        confirmation_prompt=tool.confirmation_prompt,
        compensation={a: c for a, c in tool.compensation.items() if a in item.actions},
        categories=tool.categories)


def approval_of(rec: ApprovalRecord) -> Approval:
    """An approval record as a Toolbox shows it (a pending one past its time: expired)."""
    status = rec.status
    if status is ApprovalStatus.PENDING and rec.expires_at <= utcnow():
        status = ApprovalStatus.EXPIRED
    return Approval(id=rec.id, kind=rec.kind, status=status, agent=rec.agent,
                    tool=rec.tool, action=rec.action, arguments=rec.arguments, risk=rec.risk,
                    gate=rec.gate, summary=rec.summary, preview=rec.preview,
                    call_id=rec.call_id, expires_at=rec.expires_at,
                    decided_by=rec.decided_by, note=rec.note,
                    edited_arguments=rec.edited_arguments)
