"""What travels over REST, in one place below both faces: the server renders its answers
with these models (``api/responses.py`` narrows them into its OpenAPI schemas) and the
client (``toolkeeper.client``, also in the slim ``toolkeeper-client`` distribution) reads
them back with the same ones, so a field is added once.

Version skew (docs/guides/client.md): a field a newer server adds is ignored by an older
client; a field an older server does not send takes the default here (only the names that
identify a thing are required). Values that may grow (statuses, kinds, reasons) are plain
strings here, so a newer server's new value reads instead of failing; the server's schemas
narrow them to its enums. Every answer carries the server's version in
:data:`VERSION_HEADER`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

VERSION_HEADER = "X-Toolkeeper-Version"
"""The response header naming the server's version (every answer of ``toolkeeper serve``,
errors included): the client reads it for free on each answer."""


def _iso(value: Any) -> Any:
    """A record's datetime as the ISO 8601 string the REST face writes (``isoformat``)."""
    return value.isoformat() if isinstance(value, datetime) else value


Timestamp = Annotated[str, BeforeValidator(_iso), Field(json_schema_extra={"format": "date-time"})]
"""An ISO 8601 date-time as the server wrote it."""


class Wire(BaseModel):
    """A REST body: built from a record's attributes on the server, from JSON on the client
    (unknown fields ignored)."""

    model_config = ConfigDict(extra="ignore", from_attributes=True)


# calls ---------------------------------------------------------------------------------

class Outcome(Wire):
    """A recorded call (``/calls``)."""

    call_id: str
    tenant_id: str = ""
    agent: str = ""
    tool: str
    action: str = ""
    tool_version: str = ""
    state: str = ""
    """``pending``, ``running``, ``succeeded``, ``failed`` or ``unknown`` (OutcomeState)."""
    status: str = ""
    reason: str | None = None
    idempotency_key: str = ""
    args_digest: str = ""
    side_effect: str = ""
    turn_group_id: str | None = None
    result: dict[str, Any] | None = None
    resolved_by: str | None = None
    created_at: Timestamp = ""
    updated_at: Timestamp = ""
    expires_at: Timestamp = ""


class Superseded(Wire):
    """``POST /turns/{turn_group_id}/supersede``."""

    turn_group_id: str
    superseded: bool = False
    changed: bool = False


class TurnDecided(Wire):
    """``POST /turns/{turn_group_id}/decisions``: the decision as recorded."""

    turn_group_id: str
    decision: str
    """``supersede``, ``absorb``, ``force_complete`` or ``queue`` (SupersedeAction)."""
    continued_as: str | None = None
    """The turn group the calls go on in: queue's new one, else ``turn_group_id``."""
    superseded: bool = False
    """The turn group is superseded now (a ``supersede`` decision)."""


# approvals -----------------------------------------------------------------------------

class ApprovalPreview(Wire):
    """A tool's preview of a call's effect: a one-line summary and its data."""

    summary: str | None = None
    data: Any = None


class Approval(Wire):
    """An approval, confirmation or preview (``/approvals``, webhook deliveries, the CLI's
    ``--json``): one rendering everywhere."""

    id: str
    kind: str
    """``approve`` or ``confirm``."""
    status: str
    """``pending``, ``approved``, ``denied``, ``consumed`` or ``expired`` (ApprovalStatus)."""
    agent: str = ""
    tool: str = ""
    action: str = ""
    tool_version: str = ""
    arguments: Any = None
    args_digest: str = ""
    risk: str = ""
    gate: str = ""
    summary: str | None = None
    preview: ApprovalPreview | None = None
    """The tool's side-effect-free preview of the call's effect, when it has one."""
    call_id: str | None = None
    created_at: Timestamp = ""
    expires_at: Timestamp = ""
    decided_by: str | None = None
    decided_by_subject: str | None = None
    """The approver's ``sub`` at their identity provider (single sign-on or an OAuth
    token); ``None`` when they used a ``tk_…`` token."""
    decided_by_issuer: str | None = None
    decided_at: Timestamp | None = None
    note: str | None = None
    edited_arguments: Any = None
    consumed_by: str | None = None

    @property
    def decided(self) -> bool:
        """No longer pending (approved, denied, consumed or expired)."""
        return self.status != "pending"


# discovery -----------------------------------------------------------------------------

class ToolSummary(Wire):
    """The short form of a tool in discovery listings (no config)."""

    id: str | None = None
    name: str
    slug: str = ""
    description: str = ""
    scope: str = ""
    tool_type: str = ""
    implementation_type: str = ""
    status: str = ""
    version: str = ""
    is_active: bool = True
    categories: list[str] = Field(default_factory=list)
    capabilities: list[str] = Field(default_factory=list)
    side_effect: str = ""
    risk_default: str = ""
    requires_confirmation: bool = False
    scopes_required: list[str] = Field(default_factory=list)
    input_schemas: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Action → the JSON Schema its arguments are validated against (callable actions only
    in an agent's enabled listing)."""


class EnabledTool(ToolSummary):
    """A tool in an agent's enabled listing."""

    actions: list[str] = Field(default_factory=list)
    """The actions the agent may call."""
    names: dict[str, str] = Field(default_factory=dict)
    """Action → the name a model sees (MCP's): the tool's name for a one-action tool, else
    ``{tool}_{action}``."""
    action_descriptions: dict[str, str] = Field(default_factory=dict)
    """Action → its own description (``""`` when it has none)."""


class UnavailableTool(ToolSummary):
    """A tool in an agent's unavailable listing."""

    why_unavailable: str | None = None
    """``disabled_for_agent``, ``not_published``, ``unhealthy``, ``scope_missing`` or
    ``quarantined``."""
    message: str | None = None
    missing_scopes: list[str] = Field(default_factory=list)


class DiscoveredTool(EnabledTool, UnavailableTool):
    """A tool of either listing, as the client reads it (the other listing's fields take
    their defaults)."""


class AgentTools(Wire):
    """An agent's enabled or unavailable tools."""

    agent: str
    profile: str = ""
    tools: list[DiscoveredTool] = Field(default_factory=list)


# audit ---------------------------------------------------------------------------------

class AuditEvent(Wire):
    """One audit event (SPEC §9)."""

    seq: int
    event_id: str
    ts: Timestamp
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
    data: dict[str, Any] = Field(default_factory=dict)
    prev_hash: str = ""
    hash: str = ""


class AuditPage(Wire):
    events: list[AuditEvent]
    next_cursor: int | None = None
    """Pass as ``cursor`` for the next page; ``null`` on the last one."""


class AuditVerification(Wire):
    """``GET /audit/verify``: the tenant's hash chain recomputed."""

    tenant_id: str | None = None
    ok: bool
    events: int = 0
    problems: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    first_seq: int = 1
    """The first event kept: audit retention (``audit_retention_s``) deleted the ones
    before it; 1 when none were deleted."""
