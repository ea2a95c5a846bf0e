"""Tool definitions: actions, schemas, risk, side effects, lifecycle fields (SPEC §6)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from toolkeeper.model.enums import Risk, SideEffect, ToolStatus

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""An action's name."""
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$")
"""A tool's name: MCP 2026-07-28's rule (1-128 of ``[A-Za-z0-9_.-]``), never starting with a
dot (a REST path segment ``.`` or ``..`` would not name it)."""
TOOL_NAME_RULE = "^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$"
DEFAULT_INPUT_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False}
ImplementationType = Literal[
    "native", "function", "http", "mcp", "agent_call", "builtin", "rag_retrieval", "artifact",
    "internal", "custom", "mcp_prompt", "mcp_resources",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ActionSpec(_Strict):
    """One action of a tool: its arguments, result and effect on the world."""

    description: str = ""
    """Shown to agents and approvers."""
    input_schema: dict[str, Any] | None = None
    """JSON Schema (2020-12) of the arguments; ``None`` uses the tool's ``input_schema``."""
    output_schema: dict[str, Any] | None = None
    """JSON Schema of the result, passed through to MCP clients."""
    side_effect: SideEffect | None = None
    """Overrides the tool's ``side_effect`` for this action."""
    scopes_required: tuple[str, ...] = ()
    """Scopes needed in addition to the tool's."""
    supports_preview: bool | None = None
    """``None`` asks the provider."""


class Cost(_Strict):
    """What one call of an action costs budgets (``toolkeeper.pipeline.budgets``): a fixed
    amount, plus a number read from the output at a dotted path (e.g. ``usage.cost_usd``)."""

    fixed: float = Field(default=0.0, ge=0)
    from_output: str | None = None


class Compensation(_Strict):
    """How to undo a ``compensatable`` action: another tool/action and an argument mapping."""

    action: str
    """The action that undoes the effect."""
    tool: str | None = None
    """The tool holding that action; ``None`` means the same tool."""
    arguments: dict[str, str] = Field(default_factory=dict)
    """Target argument name → JMESPath over ``{"arguments": …, "result": …}`` of the original."""


class ExecutionMeta(_Strict):
    """``config_schema.execution``: backend-only execution metadata."""

    is_pure: bool = False
    concurrency_group: str = "default"
    max_concurrency: int = Field(default=1, ge=1)
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    max_retries: int = Field(default=2, ge=0, le=10)
    """Retries for retryable errors of ``pure``/``idempotent`` actions only."""
    max_output_chars: int = Field(default=100_000, ge=1)
    task_support: Literal["forbidden", "optional", "required"] = "forbidden"
    """Over MCP with the tasks extension (``io.modelcontextprotocol/tasks``): ``optional``
    or ``required`` runs a call as a task in the background (``required``: a client without
    the extension is refused). Any tool's call that waits for a human becomes a task."""


class ToolDefinition(_Strict):
    """A named capability with one or more actions (SPEC §1, §6)."""

    name: str
    description: str = ""
    tenant_id: str | None = None
    """``None`` = global (system) tool visible to every tenant."""
    version: str = "1.0.0"
    status: ToolStatus = ToolStatus.DRAFT
    is_active: bool = True
    is_system: bool = False
    implementation_type: ImplementationType = "native"
    implementation: dict[str, Any] = Field(default_factory=dict)
    """``config_schema.implementation``: entry point, URL, function name, builtin key…"""
    execution: ExecutionMeta = Field(default_factory=ExecutionMeta)
    actions: dict[str, ActionSpec] = Field(default_factory=lambda: {"run": ActionSpec()})
    input_schema: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_INPUT_SCHEMA))
    output_schema: dict[str, Any] | None = None
    risk_default: Risk = Risk.MEDIUM
    risk_map: dict[str, Risk] = Field(default_factory=dict)
    side_effect: SideEffect = SideEffect.IRREVERSIBLE
    """Default for actions that declare none. Unknown effects are treated as the worst."""
    scopes_required: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    requires_confirmation: bool = False
    confirmation_prompt: str | None = None
    compensation: dict[str, Compensation] = Field(default_factory=dict)
    """Action name → how to undo it."""
    idempotency_key_fields: tuple[str, ...] = ()
    connector_id: str | None = None
    builtin_key: str | None = None
    artifact_id: str | None = None
    artifact_version: str | None = None
    published_at: datetime | None = None
    definition_hash: str | None = None
    policy: dict[str, Any] = Field(default_factory=dict)
    """Tool-level policy values (a profile's activation may narrow or override them)."""
    origin: Literal["code", "config", "api"] = "code"
    """Who defined it. A tenant's tool created or edited through the REST API (``api``)
    reaches only its own tenant's credentials, never the operator's platform secrets."""
    costs: dict[str, Cost] = Field(default_factory=dict)
    """Action name (or ``*`` for every other action) → what one call costs budgets."""

    @field_validator("name")
    @classmethod
    def _name_ok(cls, value: str) -> str:
        if not TOOL_NAME_RE.match(value):
            raise ValueError(f"tool name must match {TOOL_NAME_RULE}")
        return value

    @model_validator(mode="after")
    def _refs_ok(self) -> ToolDefinition:
        if not self.actions:
            raise ValueError("a tool needs at least one action")
        for name in self.actions:
            if not NAME_RE.match(name):
                raise ValueError(f"action name {name!r} must match ^[A-Za-z0-9_-]{{1,64}}$")
        for name in self.risk_map:
            if name not in self.actions:
                raise ValueError(f"risk_map names unknown action {name!r}")
        for name, comp in self.compensation.items():
            if name not in self.actions:
                raise ValueError(f"compensation names unknown action {name!r}")
            if comp.tool is None and comp.action not in self.actions:
                raise ValueError(f"compensation action {comp.action!r} is not an action")
        return self

    @property
    def slug(self) -> str:
        return self.name.lower().replace("_", "-")

    @property
    def tool_type(self) -> str:
        """Derived bucket (SPEC §6): built_in, mcp, artifact or custom."""
        if self.is_system or self.builtin_key:
            return "built_in"
        if self.implementation_type in ("mcp", "mcp_prompt", "mcp_resources") or \
                self.implementation.get("type") == "mcp":
            return "mcp"
        if self.artifact_id or self.implementation_type == "artifact":
            return "artifact"
        return "custom"

    def action_side_effect(self, action: str) -> SideEffect:
        spec = self.actions[action]
        if spec.side_effect is not None:
            return spec.side_effect
        if self.execution.is_pure:
            return SideEffect.PURE
        return self.side_effect

    def action_risk(self, action: str) -> Risk:
        return self.risk_map.get(action, self.risk_default)

    def action_input_schema(self, action: str) -> dict[str, Any]:
        spec = self.actions[action]
        return spec.input_schema if spec.input_schema is not None else self.input_schema

    def action_scopes(self, action: str) -> frozenset[str]:
        return frozenset(self.scopes_required) | frozenset(self.actions[action].scopes_required)
