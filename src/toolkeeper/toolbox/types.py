"""What a Toolbox answers (seed: Toolbox §3-4): the agent's tools, the ones it could have
and why not, a tool's semantics, an approval. Plain values, the same over either backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from toolkeeper.model.enums import ApprovalStatus, Risk, SideEffect
from toolkeeper.model.tool import Compensation

_EFFECT_ORDER = (SideEffect.PURE, SideEffect.IDEMPOTENT, SideEffect.COMPENSATABLE,
                 SideEffect.IRREVERSIBLE)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolInfo:
    """A tool the agent may call (tier 3): what a framework needs to offer it to a model."""

    name: str
    description: str
    version: str
    actions: tuple[str, ...]
    """The actions this agent may call (a subset of the tool's)."""
    input_schemas: dict[str, dict[str, Any]]
    """Action → the JSON Schema its arguments are validated against (pass it on unchanged)."""
    action_descriptions: dict[str, str] = field(default_factory=dict)
    """Action → its own description ("" when it has none)."""
    names: dict[str, str] = field(default_factory=dict)
    """Action → the name to show a model: the tool's name for a one-action tool, else
    ``{tool}_{action}`` (the MCP face's names, so both faces agree)."""
    categories: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class UnavailableInfo:
    """A tool the agent could have but may not call now, and why (seed: tier 2 - tier 3)."""

    name: str
    description: str
    why_unavailable: str
    """``quarantined``, ``disabled_for_agent``, ``not_published``, ``scope_missing``,
    ``unhealthy`` or ``gate_denied`` (the first pipeline rule that keeps it away)."""
    message: str
    missing_scopes: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolMetadata:
    """A tool's semantics for the agent's decisions (seed ``ToolMetadata``): supersede
    before an irreversible call, ask the user first, know what can be undone."""

    name: str
    version: str
    side_effects: dict[str, SideEffect]
    """Per callable action."""
    risks: dict[str, Risk]
    """Per callable action, before any adjuster raises it for particular arguments."""
    requires_confirmation: bool = False
    confirmation_prompt: str | None = None
    compensation: dict[str, Compensation] = field(default_factory=dict)
    """Action → how the gateway undoes it (compensatable actions)."""
    categories: tuple[str, ...] = ()

    @property
    def side_effect(self) -> SideEffect:
        """The worst side effect among the callable actions (exact for a one-action tool)."""
        return max(self.side_effects.values(), key=_EFFECT_ORDER.index,
                   default=SideEffect.IRREVERSIBLE)

    @property
    def risk(self) -> Risk:
        """The highest risk among the callable actions."""
        return max(self.risks.values(), key=lambda r: r.rank, default=Risk.CRITICAL)

    @property
    def is_irreversible(self) -> bool:
        return self.side_effect is SideEffect.IRREVERSIBLE

    @property
    def is_safe_to_retry(self) -> bool:
        return self.side_effect.retry_safe


@dataclass(frozen=True, slots=True, kw_only=True)
class Approval:
    """A human decision a stopped call waits for (what ``GET /approvals/{id}`` answers)."""

    id: str
    kind: str
    """``approve`` or ``confirm``."""
    status: ApprovalStatus
    agent: str
    tool: str
    action: str
    arguments: Any
    """Redacted, for the human to read."""
    risk: str
    gate: str
    summary: str | None = None
    """A preview's one line, when the tool has one."""
    preview: Any = None
    call_id: str | None = None
    expires_at: datetime | None = None
    decided_by: str | None = None
    note: str | None = None
    edited_arguments: Any = None
