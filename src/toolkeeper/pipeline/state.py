"""Per-call state passed explicitly from step to step (never read from globals)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from time import perf_counter
from typing import TYPE_CHECKING, Any

from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.enums import CallStatus, Gate, Risk, SideEffect
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.ids import new_event_id
from toolkeeper.store.records import AuditDraft

if TYPE_CHECKING:
    from toolkeeper.pipeline.catalog import CompiledProfile, CompiledTool
    from toolkeeper.providers.base import ToolPolicy
    from toolkeeper.store.records import ApprovalRecord


@dataclass(slots=True, kw_only=True)
class CallState:
    """What the pipeline knows about one call so far."""

    call_id: str
    request: CallRequest
    started: float = field(default_factory=perf_counter)
    principal: Principal | None = None
    tenant_id: str | None = None
    agent: str | None = None
    profile: CompiledProfile | None = None
    tool: CompiledTool | None = None
    action: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    args_bytes: bytes = b""
    args_digest: str | None = None
    side_effect: SideEffect | None = None
    policy: ToolPolicy | None = None
    granted_scopes: frozenset[str] = frozenset()
    risk: Risk | None = None
    gate: Gate | None = None
    approval: ApprovalRecord | None = None
    idempotency_key: str | None = None
    recorded: bool = False
    """True once an ``in_progress`` outcome row is ours."""
    audit_arguments: Any = None
    """Redacted arguments, set only when the deployment opted in to audit them."""
    events: list[AuditDraft] = field(default_factory=list)
    release: list[Any] = field(default_factory=list)
    """Callbacks run when the call ends (concurrency slots)."""

    @property
    def tool_name(self) -> str:
        return self.tool.definition.name if self.tool else str(self.request.tool)

    @property
    def tool_version(self) -> str | None:
        return self.tool.definition.version if self.tool else None

    def emit(self, type_: EventType, *, reason: str | None = None,
             duration_ms: float | None = None, **data: Any) -> None:
        """Record an audit event for this call (written by the sink or the outcome txn)."""
        req = self.request
        if self.args_digest is not None and "args_digest" not in data:
            data["args_digest"] = self.args_digest
        if self.audit_arguments is not None:
            data["arguments"] = self.audit_arguments
        self.events.append(AuditDraft(
            type=type_.value, tenant_id=self.tenant_id, event_id=new_event_id(),
            ts=datetime.now(UTC), agent_id=self.agent, call_id=self.call_id,
            trace_id=req.trace_id, task_id=req.task_id, step_id=req.step_id,
            turn_group_id=req.turn_group_id, tool=self.tool_name, action=self.action,
            tool_version=self.tool_version, risk=self.risk.value if self.risk else None,
            gate=self.gate.value if self.gate else None, reason=reason,
            duration_ms=None if duration_ms is None else round(duration_ms, 3), data=data,
        ))

    def elapsed_ms(self) -> float:
        return (perf_counter() - self.started) * 1000.0

    def result(self, status: CallStatus, reason: Reason | str | None = None, *,
               message: str | None = None, **extra: Any) -> CallResult:
        """A result carrying everything known about the call so far."""
        return CallResult(
            call_id=self.call_id, status=status, tool=self.tool_name, action=self.action,
            reason=reason, message=message, tool_version=self.tool_version, risk=self.risk,
            gate=self.gate, idempotency_key=self.idempotency_key,
            duration_ms=self.elapsed_ms(), **extra,
        )

    def stop(self, event: EventType, reason: Reason | str, message: str | None = None, *,
             status: CallStatus = CallStatus.DENIED, **extra: Any) -> CallResult:
        """End the call at this step: emit the step's audit event, return the result."""
        self.emit(event, reason=str(reason), duration_ms=self.elapsed_ms(),
                  **({"message": message} if message else {}))
        return self.result(status, reason, message=message or str(reason), **extra)
