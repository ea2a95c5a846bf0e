"""Response bodies of the REST face: the schemas ``/openapi.json`` declares for every 2xx
answer, and that FastAPI checks each answer against (``response_model``).

Every model refuses unknown fields, so a route that starts sending a field nobody
declared fails its tests instead of drifting from the document; every field is listed
as required, since every answer carries it (``null`` when empty). Timestamps are kept as
the ISO 8601 strings the routes write. The shapes of stored models (agents, profiles,
tools) are derived from those models, never copied by hand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from toolkeeper.model import wire
from toolkeeper.model.enums import (
    ApprovalStatus,
    Health,
    OutcomeState,
    Risk,
    SideEffect,
)
from toolkeeper.model.profile import Activation
from toolkeeper.model.tool import ActionSpec, ExecutionMeta, ToolDefinition
from toolkeeper.model.turns import SupersedeAction
from toolkeeper.model.wire import Timestamp
from toolkeeper.services.discovery import Why
from toolkeeper.services.tool_views import AGENT_HIDDEN


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)


# calls, approvals, audit, ops ---------------------------------------------------------
# The bodies the client reads too are model/wire.py's: narrowed here to refuse unknown
# fields and to name the server's enums in the schema (the client reads them as strings).

class OutcomeOut(wire.Outcome, Out):
    """A recorded call (``/calls``)."""

    model_config = Out.model_config

    state: OutcomeState


class RecentCallOut(Out):
    """A call of the recent-calls log (``/calls/recent``): whatever became of it."""

    id: int
    """Grows with each call; pass the last one seen as ``before`` for older calls."""
    tenant_id: str
    call_id: str
    ts: Timestamp
    agent: str | None
    tool: str
    action: str | None
    tool_version: str | None
    status: str
    reason: str | None
    duration_ms: float
    trace_id: str | None


class ApprovalPreviewOut(wire.ApprovalPreview, Out):
    """A tool's preview of a call's effect: a one-line summary and its data."""

    model_config = Out.model_config


class ApprovalOut(wire.Approval, Out):
    """An approval, confirmation or preview (``/approvals``)."""

    model_config = Out.model_config

    status: ApprovalStatus
    preview: ApprovalPreviewOut | None = None
    """The tool's side-effect-free preview of the call's effect, when it has one."""


class AuditEventOut(wire.AuditEvent, Out):
    model_config = Out.model_config


class AuditPage(wire.AuditPage, Out):
    model_config = Out.model_config

    events: list[AuditEventOut]  # type: ignore[assignment]  # narrowed: forbids extras


class VerifyOut(wire.AuditVerification, Out):
    model_config = Out.model_config


class StatusOut(Out):
    status: str


class AuditSinkOut(Out):
    """One audit sink as this process sees it (``shipping``: this process holds its lease)."""

    name: str
    kind: str
    backlog: int
    alarm: bool
    sent: int
    failures: int
    gaps: int
    last_error: str | None
    shipping: bool


class AuditExportOut(Out):
    """``GET /audit/export``: ``off`` (no sinks), ``ok`` or ``alarm`` (then HTTP 503)."""

    status: Literal["off", "ok", "alarm"]
    sinks: list[AuditSinkOut]


class IndexOut(Out):
    """``GET /``: what this server serves, and where (paths on this server; ``null`` for
    a face this app does not serve)."""
    name: str
    version: str
    console: str | None
    docs: str
    openapi: str
    mcp: str | None
    health: str
    ready: str


class SupersedeOut(wire.Superseded, Out):
    model_config = Out.model_config


class TurnDecidedOut(wire.TurnDecided, Out):
    model_config = Out.model_config
    decision: SupersedeAction  # narrowed: the server's enum


# tools --------------------------------------------------------------------------------

class ActionOut(ActionSpec):
    """An action with the side effect and risk it has (its own or the tool's)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    side_effect: SideEffect
    risk: Risk


class ConfigSchemaOut(Out):
    implementation: dict[str, Any]
    """Credential-named values show ``"***"`` (secret references as written)."""
    execution: ExecutionMeta


_TOOL_FIELDS: dict[str, Any] = {
    name: (field.annotation, field) for name, field in ToolDefinition.model_fields.items()
    if name not in ("implementation", "execution", "policy", "actions")}
_TOOL_FIELDS.update({
    "actions": (dict[str, ActionOut], ...),
    "id": (str | None, ...), "slug": (str, ...), "scope": (str, ...), "tool_type": (str, ...),
    "config_schema": (ConfigSchemaOut, ...), "policy": (dict[str, Any], ...),
    "created_at": (Timestamp | None, ...), "updated_at": (Timestamp | None, ...)})

if TYPE_CHECKING:  # the shapes below are built from ToolDefinition's fields at import
    class ToolOut(Out): ...
    class AgentToolOut(Out): ...
    class BuiltinOut(ToolOut): ...
else:
    ToolOut = create_model(
        "ToolOut", __base__=Out, __doc__="A tool with the SPEC §6 record fields, its config "
        "redacted.", **_TOOL_FIELDS)
    AgentToolOut = create_model(
        "AgentToolOut", __base__=Out, __doc__="A tool as an agent token sees it: no wiring, "
        "no policy values, only the actions it may call.",
        **{k: v for k, v in _TOOL_FIELDS.items() if k not in AGENT_HIDDEN})
    BuiltinOut = create_model(
        "BuiltinOut", __base__=ToolOut, installed=(bool, ...),
        policy_schema=(dict[str, Any], Field(description="JSON Schema of the built-in's "
                                             "policy model (what a profile may set)")),
        policy_defaults=(dict[str, Any], Field(description="The policy values in force when "
                                               "neither the tool nor a profile sets them")))


class BuiltinTemplatesOut(Out):
    installed: list[BuiltinOut]
    available: list[BuiltinOut]


class SourceServerOut(Out):
    name: str
    tools: list[str] = Field(description="The upstream tools imported from this server")


class SourceArtifactOut(Out):
    id: str
    versions: list[str]


class ToolSourcesOut(Out):
    """What the tool dialog picks from (``GET /tools/sources``, admins only)."""

    functions: list[str] = Field(description="The `functions:` allow-list")
    servers: list[SourceServerOut]
    artifacts: list[SourceArtifactOut]
    pipelines: list[str] = Field(description="The tenant's retrieval pipelines")
    agents: list[str] = Field(description="The tenant's agents (agent_call targets)")


class ToolVersionOut(Out):
    version: str
    snapshot_at: Timestamp
    definition_hash: str | None
    tool: ToolOut | AgentToolOut


class FieldDiffOut(Out):
    field: str
    pinned: Any
    current: Any


class QuarantineOut(Out):
    """A quarantined tool: the pinned (last published) definition, the new one, what
    differs."""

    pinned: ToolOut | None
    current: ToolOut
    diff: list[FieldDiffOut]


class ToolHealthOut(Out):
    id: str | None
    name: str
    health: Health
    consecutive_errors: int
    last_error: str | None
    last_success_at: float | None
    """Epoch seconds."""


# discovery ----------------------------------------------------------------------------

class DiscoveryToolOut(wire.ToolSummary, Out):
    """The short form of a tool in discovery listings (no config)."""

    model_config = Out.model_config

    side_effect: SideEffect
    risk_default: Risk


class EnabledToolOut(DiscoveryToolOut, wire.EnabledTool):
    model_config = Out.model_config


class UnavailableToolOut(DiscoveryToolOut, wire.UnavailableTool):
    model_config = Out.model_config

    why_unavailable: Why  # narrowed: the server's enum
    message: str  # the server always sends one


class ListingOut(Out):
    tenant_id: str
    tools: list[DiscoveryToolOut]


class EnabledOut(Out):
    agent: str
    profile: str
    tools: list[EnabledToolOut]


class UnavailableOut(Out):
    agent: str
    profile: str
    tools: list[UnavailableToolOut]


# identities and access ----------------------------------------------------------------

class ActivationOut(Activation):
    """An activation with the profile it belongs to."""

    profile: str


class MeOut(Out):
    """``GET /me``: who the calling token is (never its secret or id)."""

    name: str
    """The token's label (the principal's name)."""
    tenant_id: str
    roles: list[str]
    agent: str | None


class TokenOut(Out):
    """A token record; never its secret (the plaintext is not stored)."""

    id: str
    tenant_id: str
    role: str
    agent: str | None
    label: str
    created_at: Timestamp
    revoked_at: Timestamp | None


class NewTokenOut(TokenOut):
    token: str
    """The bearer token, shown this once."""


class CredentialOut(Out):
    connector: str
    key: str


class TenantOut(Out):
    id: str
    name: str


class NewTenantOut(Out):
    id: str
    name: str
    admin_token: NewTokenOut
