"""Typed answers of the REST face, as the client returns them (never bare dicts).

Built from the JSON by field name; a field the server adds later is ignored, so an older
client keeps working against a newer server.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus, Gate, Risk
from toolkeeper.model.reasons import Reason

T = TypeVar("T")


def from_json(cls: type[T], data: dict[str, Any]) -> T:
    """``cls`` from the JSON object ``data`` (its known fields only)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in names})


def _reason(value: Any) -> Reason | str | None:
    if value is None:
        return None
    try:
        return Reason(value)
    except ValueError:  # a tool's own deny reason is passed through as it came
        return str(value)


def call_result(data: dict[str, Any]) -> CallResult:
    """The library's :class:`CallResult` from its wire shape (``CallResult.to_dict``)."""
    names = set(CallResult.__slots__)
    kw = {k: v for k, v in data.items() if k in names}
    kw["status"] = CallStatus(data["status"])
    kw["reason"] = _reason(data.get("reason"))
    kw["risk"] = Risk(data["risk"]) if data.get("risk") else None
    kw["gate"] = Gate(data["gate"]) if data.get("gate") else None
    kw["deduped"] = bool(data.get("deduped", False))
    kw["duration_ms"] = float(data.get("duration_ms") or 0.0)
    return CallResult(**kw)


def is_call_result(data: Any) -> bool:
    return isinstance(data, dict) and "call_id" in data and "status" in data


@dataclass(slots=True, kw_only=True)
class Approval:
    """An approval, confirmation or preview (``/approvals``)."""

    id: str
    kind: str
    """``approve`` or ``confirm``."""
    status: str
    """``pending``, ``approved``, ``denied``, ``consumed`` or ``expired``."""
    agent: str
    tool: str
    action: str
    tool_version: str
    arguments: Any
    args_digest: str
    risk: str
    gate: str
    summary: str | None
    call_id: str | None
    created_at: str
    expires_at: str
    decided_by: str | None = None
    decided_by_subject: str | None = None
    decided_by_issuer: str | None = None
    decided_at: str | None = None
    note: str | None = None
    edited_arguments: Any = None
    consumed_by: str | None = None

    @property
    def decided(self) -> bool:
        """No longer pending (approved, denied, consumed or expired)."""
        return self.status != "pending"


@dataclass(slots=True, kw_only=True)
class Outcome:
    """A recorded call (``/calls``)."""

    call_id: str
    tenant_id: str
    agent: str
    tool: str
    action: str
    tool_version: str
    state: str
    status: str
    reason: str | None
    idempotency_key: str
    args_digest: str
    side_effect: str
    turn_group_id: str | None
    result: dict[str, Any] | None
    resolved_by: str | None
    created_at: str
    updated_at: str
    expires_at: str


@dataclass(slots=True, kw_only=True)
class DiscoveredTool:
    """A tool in an agent's enabled or unavailable listing."""

    name: str
    description: str = ""
    id: str | None = None
    slug: str = ""
    scope: str = ""
    tool_type: str = ""
    implementation_type: str = ""
    status: str = ""
    version: str = ""
    is_active: bool = True
    categories: list[str] = field(default_factory=list)
    capabilities: list[str] = field(default_factory=list)
    side_effect: str = ""
    risk_default: str = ""
    requires_confirmation: bool = False
    scopes_required: list[str] = field(default_factory=list)
    input_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Action → the JSON Schema its arguments are validated against."""
    actions: list[str] = field(default_factory=list)
    """Enabled listing: the actions the agent may call."""
    names: dict[str, str] = field(default_factory=dict)
    """Enabled listing: action → the name a model sees (``{tool}_{action}`` when the tool
    has several actions)."""
    action_descriptions: dict[str, str] = field(default_factory=dict)
    """Enabled listing: action → its own description."""
    why_unavailable: str | None = None
    """Unavailable listing: ``disabled_for_agent``, ``not_published``, ``unhealthy``,
    ``scope_missing`` or ``quarantined``."""
    message: str | None = None
    missing_scopes: list[str] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class ToolView:
    """One tool as ``GET /tools/{id}`` shows it (to an agent token: only the actions it may
    call, without wiring or policy values)."""

    id: str | None
    name: str
    version: str
    description: str = ""
    actions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Action → its spec, with the ``side_effect`` and ``risk`` it has."""
    requires_confirmation: bool = False
    confirmation_prompt: str | None = None
    compensation: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Action → how the gateway undoes it (``action``, ``tool``, ``arguments``)."""
    categories: list[str] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class AgentTools:
    """An agent's enabled or unavailable tools."""

    agent: str
    profile: str
    tools: list[DiscoveredTool]


def agent_tools(data: dict[str, Any]) -> AgentTools:
    return AgentTools(agent=data["agent"], profile=data["profile"],
                      tools=[from_json(DiscoveredTool, t) for t in data["tools"]])


@dataclass(slots=True, kw_only=True)
class AuditEvent:
    """One audit event (SPEC §9)."""

    seq: int
    event_id: str
    ts: str
    type: str
    tenant_id: str | None = None
    agent_id: str | None = None
    call_id: str | None = None
    trace_id: str | None = None
    task_id: str | None = None
    step_id: str | None = None
    turn_group_id: str | None = None
    tool: str | None = None
    action: str | None = None
    tool_version: str | None = None
    risk: str | None = None
    gate: str | None = None
    reason: str | None = None
    duration_ms: float | None = None
    data: dict[str, Any] = field(default_factory=dict)
    prev_hash: str = ""
    hash: str = ""


@dataclass(slots=True, kw_only=True)
class AuditPage:
    events: list[AuditEvent]
    next_cursor: int | None
    """Pass as ``cursor`` for the next page; ``None`` on the last one."""


@dataclass(slots=True, kw_only=True)
class AuditVerification:
    tenant_id: str | None
    ok: bool
    events: int
    problems: list[str]
    warnings: list[str]


@dataclass(slots=True, kw_only=True)
class Superseded:
    turn_group_id: str
    superseded: bool
    changed: bool
