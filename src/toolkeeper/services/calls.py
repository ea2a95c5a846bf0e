"""Calls after the fact: look-up, manual resolution, crash recovery, supersede,
compensation (SPEC §4)."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

from toolkeeper.errors import OperationRefused
from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.enums import CallStatus, OutcomeState, Role
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.model.turns import SupersedeAction
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.secrets.redact import Redactor
from toolkeeper.services.events import system_event
from toolkeeper.store import Store
from toolkeeper.store.db import utcnow
from toolkeeper.store.records import OutcomeRecord, SideEffectRecord

CallFn = Callable[..., Awaitable[CallResult]]
"""The gateway's ``call``: one call through the whole pipeline."""


class CallService:
    """Recorded calls in ``store``; a compensation runs through ``call`` (the pipeline)."""

    def __init__(self, store: Store, *, call: CallFn, catalog: Callable[[], Catalog],
                 redactor: Callable[[], Redactor]) -> None:
        self._store = store
        self._call = call
        self._catalog = catalog
        self._redactor = redactor

    def get(self, call_id: str, tenant_id: str) -> OutcomeRecord:
        rec = self._store.outcomes.get(call_id)
        if rec is None or rec.tenant_id != tenant_id:
            raise OperationRefused(Reason.NOT_FOUND, f"no recorded call {call_id!r}")
        return rec

    def list(self, tenant_id: str, *, status: str | None = None,
             limit: int = 100) -> builtins.list[OutcomeRecord]:
        return self._store.outcomes.list(tenant_id, status=status, limit=limit)

    def resolve(self, call_id: str, by: Principal, *, status: str, output: Any = None,
                note: str | None = None) -> OutcomeRecord:
        """Record the real outcome of an ``unknown`` call (operator, approver or admin)."""
        if not by.has_role(Role.OPERATOR, Role.APPROVER):
            raise OperationRefused(Reason.FORBIDDEN, "resolving calls needs the operator role")
        if status not in ("succeeded", "failed"):
            raise OperationRefused(Reason.INVALID_ARGUMENTS, "status must be succeeded or failed")
        rec = self.get(call_id, by.tenant_id)
        if rec.state not in (OutcomeState.UNKNOWN, OutcomeState.IN_PROGRESS):
            raise OperationRefused(Reason.INVALID_STATE, f"the call is {rec.state.value}")
        output = self._redactor().redact(output)
        result = {**(rec.result or {}), "status": status, "output": output,
                  "reason": None if status == "succeeded" else "resolved_failed",
                  "message": note or f"resolved manually by {by.name}"}
        result = {k: v for k, v in result.items() if v is not None}
        ev = system_event(EventType.CALL_RESOLVED_MANUALLY, rec.tenant_id, tool=rec.tool,
                          agent=rec.agent, call_id=rec.call_id, by=by.name, status=status)
        if not self._store.outcomes.resolve(
                call_id, state=OutcomeState(status), status=status, result=result,
                resolved_by=by.name, events=[ev]):
            raise OperationRefused(Reason.INVALID_STATE, "the call was resolved meanwhile")
        return self.get(call_id, by.tenant_id)

    def recover(self) -> builtins.list[OutcomeRecord]:
        """Stale ``in_progress`` outcomes (older than their tool's timeout) → ``unknown``."""
        def events(stale: builtins.list[OutcomeRecord]) -> builtins.list[Any]:
            return [system_event(EventType.CALL_UNKNOWN, r.tenant_id, tool=r.tool,
                                 agent=r.agent, call_id=r.call_id, reason="outcome_unknown",
                                 recovered=True) for r in stale]

        return self._store.outcomes.mark_stale_unknown(utcnow(), events)

    def supersede(self, tenant_id: str, turn_group_id: str) -> bool:
        """Later irreversible calls in this turn group stop with ``superseded``."""
        return self._store.turns.supersede(tenant_id, turn_group_id)

    def decide_turn(self, tenant_id: str, turn_group_id: str, decision: SupersedeAction, *,
                    agent: str | None, tool: str | None = None, action: str | None = None,
                    continued_as: str | None = None, pending: int | None = None,
                    note: str | None = None) -> dict[str, Any]:
        """Record a supersede decision (seed 004 §10) in the audit; ``supersede`` also
        supersedes the turn group. Only ``queue`` continues in another turn group, and it
        must name it (``continued_as``)."""
        if decision is SupersedeAction.QUEUE:
            if not continued_as or continued_as == turn_group_id:
                raise OperationRefused(Reason.INVALID_ARGUMENTS,
                                       "a queue decision names the new turn group it goes on "
                                       "in (continued_as), other than the turn group")
        elif continued_as not in (None, turn_group_id):
            raise OperationRefused(Reason.INVALID_ARGUMENTS,
                                   f"only a queue decision goes on in another turn group; "
                                   f"{decision.value} stays in {turn_group_id}")
        superseded = decision is SupersedeAction.SUPERSEDE
        if superseded:
            self._store.turns.supersede(tenant_id, turn_group_id)
        going_on = continued_as if decision is SupersedeAction.QUEUE else None
        self._store.audit.append([system_event(
            EventType.TURN_DECIDED, tenant_id, tool=tool, agent=agent,
            decision=decision.value, turn_group_id=turn_group_id, action=action,
            continued_as=going_on, pending=pending, note=note)])
        return {"turn_group_id": turn_group_id, "decision": decision.value,
                "continued_as": going_on or turn_group_id, "superseded": superseded}

    async def compensate(self, side_effect_id: str, by: Principal) -> CallResult:
        """Run the named compensation of a side effect through the pipeline, once."""
        effect = self._effect(side_effect_id, by)
        record = self._catalog().record(effect.tenant_id, effect.tool)
        comp = record[1].compensation.get(effect.action) if record else None
        if comp is None:
            raise OperationRefused(Reason.COMPENSATION_NOT_DEFINED,
                                   f"{effect.tool}.{effect.action} names no compensation")
        source = {"arguments": effect.arguments, "result": effect.result}
        try:
            args = {k: jmespath.search(expr, source) for k, expr in comp.arguments.items()}
        except JMESPathError as exc:
            raise OperationRefused(Reason.CONFIG_INVALID, f"compensation mapping: {exc}") from exc
        acting = Principal(name=f"{by.name} for {effect.agent}", tenant_id=effect.tenant_id,
                           roles=frozenset({Role.AGENT}), agent=effect.agent)
        res = await self._call(CallRequest(
            tool=comp.tool or effect.tool, action=comp.action, arguments=args,
            idempotency_key=f"compensate:{effect.id}"), principal=acting)
        if res.status is CallStatus.SUCCEEDED:
            ev = system_event(EventType.SIDE_EFFECT_COMPENSATED, effect.tenant_id,
                              tool=effect.tool, agent=effect.agent, call_id=effect.call_id,
                              side_effect_id=effect.id, compensation_call_id=res.call_id)
            self._store.outcomes.mark_compensated(effect.id, res.call_id, [ev])
        return res

    def _effect(self, side_effect_id: str, by: Principal) -> SideEffectRecord:
        effect = self._store.outcomes.side_effect(side_effect_id)
        if effect is None or effect.tenant_id != by.tenant_id:
            raise OperationRefused(Reason.NOT_FOUND, f"no side effect {side_effect_id!r}")
        if not (by.has_role(Role.OPERATOR, Role.APPROVER) or by.agent == effect.agent):
            raise OperationRefused(Reason.FORBIDDEN, "compensation needs an operator or the agent")
        if effect.status == "compensated":
            raise OperationRefused(Reason.ALREADY_COMPENSATED, "already compensated")
        return effect
