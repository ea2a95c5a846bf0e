"""Per-call state passed explicitly from step to step (never read from globals)."""

from __future__ import annotations

import time
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
    from toolkeeper.pipeline.catalog import CompiledTool
    from toolkeeper.pipeline.profiles import CompiledProfile
    from toolkeeper.providers.base import ToolPolicy
    from toolkeeper.secrets.redact import Redactor
    from toolkeeper.store.records import ApprovalRecord

MAX_MESSAGE_CHARS = 2000
"""A call's message is cut here: a tool's exception text can be anything, of any size."""


def safe_message(text: str, redactor: Redactor | None) -> str:
    """``text`` as a call may answer and audit it: secrets masked, then at most
    :data:`MAX_MESSAGE_CHARS` characters (masking first, so no cut leaves half a secret)."""
    if redactor:
        text = redactor.redact_text(text)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 1] + "…"


def _text(value: Any) -> str | None:
    """Caller-supplied ids are untrusted: stored as bounded text, whatever they were."""
    if value is None:
        return None
    return value[:200] if isinstance(value, str) else str(value)[:200]


@dataclass(slots=True)  # not kw_only: its defaults are then a tuple, not ~20 dict lookups
class CallState:  # per call (always built with keywords all the same)
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
    events: list[tuple[Any, ...]] = field(default_factory=list)
    """Raw events (cheap tuples); :meth:`drafts` turns them into chainable drafts."""
    release: list[Any] = field(default_factory=list)
    """Callbacks run when the call ends (concurrency slots)."""
    redactor: Redactor | None = None
    """Masks the deployment's secrets in every message the call answers or audits."""

    @property
    def tool_name(self) -> str:
        return self.tool.definition.name if self.tool else str(self.request.tool)

    @property
    def tool_version(self) -> str | None:
        return self.tool.definition.version if self.tool else None

    def emit(self, type_: EventType, *, reason: str | None = None,
             duration_ms: float | None = None, **data: Any) -> None:
        """Record an audit event for this call (written by the sink or the outcome txn).

        Only a tuple is made here; the draft is built where it is written (for most calls
        in the background writer), keeping the call's own latency low.
        """
        tool = self.tool  # tool_name and tool_version, without two property calls
        name, version = ((tool.definition.name, tool.definition.version) if tool is not None
                         else (str(self.request.tool), None))
        self.events.append((type_._value_, time.time(), reason, duration_ms, data, self.action,
                            self.risk, self.gate, name, version, self.tenant_id, self.agent))

    def drafts(self) -> list[AuditDraft]:
        """The call's events as drafts, in order."""
        req = self.request
        out = []
        for (type_, ts, reason, duration, data, action, risk, gate, tool, version, tenant,
             agent) in self.events:
            if self.args_digest is not None and "args_digest" not in data:
                data["args_digest"] = self.args_digest
            if self.audit_arguments is not None:
                data["arguments"] = self.audit_arguments
            out.append(AuditDraft(
                type=type_, tenant_id=tenant, event_id=new_event_id(),
                ts=datetime.fromtimestamp(ts, UTC), agent_id=agent, call_id=self.call_id,
                trace_id=_text(req.trace_id), task_id=_text(req.task_id),
                step_id=_text(req.step_id), turn_group_id=_text(req.turn_group_id), tool=tool,
                action=action, tool_version=version, risk=risk.value if risk else None,
                gate=gate.value if gate else None, reason=reason,
                duration_ms=None if duration is None else round(duration, 3), data=data))
        return out

    def take_drafts(self) -> list[AuditDraft]:
        """The drafts of every event so far, which are then no longer pending."""
        drafts = self.drafts()
        self.events = []
        return drafts

    def caller_key(self) -> str | None:
        """The idempotency key as the caller knows it (its own, or the derived default)."""
        own = self.request.idempotency_key
        return own if isinstance(own, str) and self.idempotency_key else self.idempotency_key

    def elapsed_ms(self) -> float:
        return (perf_counter() - self.started) * 1000.0

    def result(self, status: CallStatus, reason: Reason | str | None = None, *,
               message: str | None = None, **extra: Any) -> CallResult:
        """A result carrying everything known about the call so far (its message made
        safe: redacted and bounded)."""
        if message is not None:
            message = safe_message(message, self.redactor)
        return self.result_as_is(status, reason, message, **extra)

    def result_as_is(self, status: CallStatus, reason: Reason | str | None,
                     message: str | None, **extra: Any) -> CallResult:
        """Like :meth:`result`, for a message the caller already made safe (with
        :func:`safe_message` and a redactor that knows more, e.g. the call's own secrets)."""
        # tool_name, tool_version, caller_key() and elapsed_ms() inlined: every call ends here
        tool = self.tool
        name, version = ((tool.definition.name, tool.definition.version) if tool is not None
                         else (str(self.request.tool), None))
        key = self.idempotency_key
        if key:
            own = self.request.idempotency_key
            if isinstance(own, str):
                key = own
        return CallResult(
            call_id=self.call_id, status=status, tool=name, action=self.action,
            reason=reason, message=message, tool_version=version, risk=self.risk,
            gate=self.gate, idempotency_key=key,
            duration_ms=(perf_counter() - self.started) * 1000.0, **extra,
        )

    def stop(self, event: EventType, reason: Reason | str, message: str | None = None, *,
             status: CallStatus = CallStatus.DENIED, **extra: Any) -> CallResult:
        """End the call at this step: emit the step's audit event, return the result
        (the message made safe once for both)."""
        message = safe_message(message, self.redactor) if message else None
        self.emit(event, reason=str(reason), duration_ms=self.elapsed_ms(),
                  **({"message": message} if message else {}))
        return self.result_as_is(status, reason, message or str(reason), **extra)
