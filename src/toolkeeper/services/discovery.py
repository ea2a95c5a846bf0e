"""Three-tier tool visibility (seed Toolbox §3, SPEC §6): the catalog, what the tenant has
available, what one agent may call, and why the rest is unavailable.

Computed from the gateway's in-memory :class:`Catalog` only (no store queries) with the
predicates of the pipeline's resolve, scope and gate steps themselves (no second copy of a
rule), in the pipeline's order, so a tool listed as enabled is one those steps let the
agent call. Shared by the library, REST and MCP faces.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from toolkeeper.errors import ConfigError, OperationRefused
from toolkeeper.model.enums import Gate, ToolStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.pipeline.gate import static_gate
from toolkeeper.pipeline.health import HealthBoard
from toolkeeper.pipeline.profiles import CompiledProfile
from toolkeeper.pipeline.resolve import (
    RUNNABLE,
    Refusal,
    activation_allows,
    policy_allows,
    resolve_tool,
    tool_policy,
)
from toolkeeper.pipeline.scope import granted_scopes, missing_scopes


class Why(StrEnum):
    """``why_unavailable``: the first pipeline rule that keeps the agent from the tool."""

    QUARANTINED = "quarantined"
    DISABLED_FOR_AGENT = "disabled_for_agent"
    NOT_PUBLISHED = "not_published"
    SCOPE_MISSING = "scope_missing"
    UNHEALTHY = "unhealthy"
    GATE_DENIED = "gate_denied"


@dataclass(frozen=True, slots=True)
class EnabledTool:
    """A tool the agent may call: the version that runs and the actions it may call."""

    definition: ToolDefinition
    actions: tuple[str, ...]

    def input_schemas(self) -> dict[str, dict[str, Any]]:
        """Each callable action's JSON Schema (what the validate step checks against)."""
        return {a: self.definition.action_input_schema(a) for a in self.actions}


@dataclass(frozen=True, slots=True)
class UnavailableTool:
    """A tenant-available tool the agent may not call, and why."""

    definition: ToolDefinition
    why: Why
    message: str
    missing_scopes: tuple[str, ...] = ()
    activated: bool = True
    """Whether the agent's own profile activates the tool (what an agent itself is shown)."""


@dataclass(frozen=True, slots=True)
class AgentTools:
    """Tier 3 (enabled) and tier 2 minus tier 3 (unavailable) for one agent, by name."""

    agent: str
    profile: str
    enabled: tuple[EnabledTool, ...]
    unavailable: tuple[UnavailableTool, ...]


def catalog_tools(catalog: Catalog, tenant_id: str) -> list[ToolDefinition]:
    """Tier 1: every tool the tenant can see (its own and global ones), any status."""
    return catalog.visible(tenant_id)


def available_tools(catalog: Catalog, tenant_id: str) -> list[ToolDefinition]:
    """Tier 2: active tools in a status that runs in the gateway's mode, plus quarantined
    ones (published tools held back until an admin re-publishes them)."""
    statuses = RUNNABLE[catalog.mode] | {ToolStatus.QUARANTINED}
    return [t for t in catalog.visible(tenant_id) if t.is_active and t.status in statuses]


def agent_tools(catalog: Catalog, health: HealthBoard, tenant_id: str,
                agent: str, token_scopes: frozenset[str] | None = None) -> AgentTools | None:
    """Tier 3 and the unavailable rest for ``agent`` of ``tenant_id``; ``None`` if no such
    agent. An agent whose profile is missing has nothing enabled (default deny)."""
    found = catalog.agents.get((tenant_id, agent))
    if found is None:
        return None
    profile = catalog.profiles.get((tenant_id, found.profile))
    enabled: list[EnabledTool] = []
    unavailable: list[UnavailableTool] = []
    for tool in available_tools(catalog, tenant_id):
        verdict = judge(catalog, health, tenant_id, profile, tool, agent, token_scopes)
        if isinstance(verdict, EnabledTool):
            enabled.append(verdict)
        else:
            unavailable.append(verdict)
    return AgentTools(agent=agent, profile=found.profile, enabled=tuple(enabled),
                      unavailable=tuple(unavailable))


def agent_enabled(catalog: Catalog, health: HealthBoard, tenant_id: str, agent: str,
                  token_scopes: frozenset[str] | None = None,
                  ) -> tuple[str, tuple[EnabledTool, ...]] | None:
    """Tier 3 only, walking the profile's activations rather than every tenant tool:
    (profile name, enabled tools by name); ``None`` if no such agent."""
    found = catalog.agents.get((tenant_id, agent))
    if found is None:
        return None
    profile = catalog.profiles.get((tenant_id, found.profile))
    if profile is None:
        return found.profile, ()
    statuses = RUNNABLE[catalog.mode]
    enabled: list[EnabledTool] = []
    for name in sorted(profile.activations):
        record = catalog.record(tenant_id, name)
        if record is None:
            continue
        tool = record[1]
        if not tool.is_active or tool.status not in statuses:
            continue
        verdict = judge(catalog, health, tenant_id, profile, tool, agent, token_scopes)
        if isinstance(verdict, EnabledTool):
            enabled.append(verdict)
    return found.profile, tuple(enabled)


def as_seen_by_agent(view: AgentTools) -> AgentTools:
    """What an agent itself is shown of ``view`` (REST and MCP alike): its enabled tools,
    and among the unavailable ones only those its own profile activates (quarantined, not
    published, scope missing, unhealthy) — never the rest of the tenant's registry."""
    return AgentTools(agent=view.agent, profile=view.profile, enabled=view.enabled,
                      unavailable=tuple(u for u in view.unavailable if u.activated))


def agent_listing(catalog: Catalog, health: HealthBoard, tenant_id: str, agent: str,
                  token_scopes: frozenset[str] | None = None) -> list[ToolDefinition]:
    """Tiers 1 and 2 as an agent token sees them: only the tools it may call (the versions
    that run), so an agent never learns of tools its profile does not give it."""
    view = agent_enabled(catalog, health, tenant_id, agent, token_scopes)
    return [t.definition for t in view[1]] if view is not None else []


def enabled_by_id(catalog: Catalog, health: HealthBoard, tenant_id: str, agent: str,
                  token_scopes: frozenset[str] | None = None) -> dict[str, EnabledTool]:
    """The tools ``agent`` may call, by registry id: all an agent token may see of the
    registry (any other id is not found to it)."""
    view = agent_enabled(catalog, health, tenant_id, agent, token_scopes)
    out: dict[str, EnabledTool] = {}
    for item in view[1] if view else ():
        rec = catalog.record(tenant_id, item.definition.name)
        if rec is not None:
            out[rec[0]] = item
    return out


def enabled_tool(catalog: Catalog, health: HealthBoard, tenant_id: str, agent: str,
                 tool_id: str, token_scopes: frozenset[str] | None = None) -> EnabledTool:
    """The tool ``tool_id`` as ``agent`` may call it; ``not_found`` for any other id."""
    item = enabled_by_id(catalog, health, tenant_id, agent, token_scopes).get(tool_id)
    if item is None:
        raise OperationRefused(Reason.NOT_FOUND, f"no tool {tool_id!r}")
    return item


_WHY = {Reason.TOOL_QUARANTINED: Why.QUARANTINED, Reason.TOOL_NOT_PUBLISHED: Why.NOT_PUBLISHED,
        Reason.SCOPE_MISSING: Why.SCOPE_MISSING, Reason.GATE_DENIED: Why.GATE_DENIED,
        Reason.TOOL_NOT_FOUND: Why.UNHEALTHY, Reason.PROVIDER_UNAVAILABLE: Why.UNHEALTHY,
        Reason.ENTRY_POINT_NOT_ALLOWED: Why.UNHEALTHY}
"""Resolve reasons as ``why_unavailable``; any other one reads ``disabled_for_agent``. A
tool that is listed but will not resolve (its provider cannot be built) cannot run here."""


def _unavailable(tool: ToolDefinition, refusal: Refusal,
                 missing: tuple[str, ...] = ()) -> UnavailableTool:
    return UnavailableTool(tool, _WHY.get(refusal.reason, Why.DISABLED_FOR_AGENT),
                           refusal.message, missing,
                           activated=refusal.reason is not Reason.TOOL_NOT_ENABLED)


def judge(catalog: Catalog, health: HealthBoard, tenant_id: str,
          profile: CompiledProfile | None, tool: ToolDefinition,
          agent: str | None = None, token_scopes: frozenset[str] | None = None,
          ) -> EnabledTool | UnavailableTool:
    """One tenant-available tool against one profile: the pipeline's own rules (resolve,
    scope, health, static gate with the argument-free adjusters), in the pipeline's order.
    ``agent`` lets adjusters over the agent's name be judged too; ``token_scopes`` (an
    OAuth caller's ``Principal.scopes``) narrow the profile's as in the call."""
    if profile is None:  # the pipeline stops such an agent before resolving any tool
        return UnavailableTool(tool, Why.DISABLED_FOR_AGENT, "the agent has no profile",
                               activated=False)
    found = resolve_tool(catalog, profile, tenant_id, tool.name)
    if isinstance(found, Refusal):
        return _unavailable(tool, found)
    compiled, activation = found
    try:
        policy = tool_policy(profile, compiled, activation, catalog.tenant_bounds)
    except ConfigError as exc:
        policy = Refusal(Reason.CONFIG_INVALID, str(exc))
    if isinstance(policy, Refusal):
        return _unavailable(tool, policy)
    runs = compiled.definition
    allowed = [a for a in sorted(runs.actions)
               if activation_allows(activation, a) and policy_allows(policy, a)]
    if not allowed:
        return _unavailable(tool, Refusal(Reason.ACTION_NOT_ALLOWED,
                                          f"no action of {tool.name} is allowed for this agent"))
    granted = granted_scopes(profile.scopes, token_scopes)
    missing = {a: missing_scopes(compiled, a, granted) for a in allowed}
    callable_ = [a for a in allowed if not missing[a]]
    if not callable_:
        lacking = tuple(sorted(frozenset().union(*missing.values())))
        return _unavailable(tool, Refusal(Reason.SCOPE_MISSING,
                                          f"missing scopes: {', '.join(lacking)}"), lacking)
    if health.blocked(f"{tenant_id}:{tool.name}") is not None:  # half-open: listed again
        return UnavailableTool(tool, Why.UNHEALTHY, f"{tool.name} is unavailable (circuit open)")
    callable_ = [a for a in callable_ if static_gate(profile, compiled, a, agent=agent,
                                                     tenant=tenant_id) is not Gate.DENY]
    if not callable_:
        return _unavailable(tool, Refusal(
            Reason.GATE_DENIED, f"every allowed action of {tool.name} is denied at this autonomy"))
    return EnabledTool(runs, tuple(callable_))


__all__ = ["AgentTools", "EnabledTool", "UnavailableTool", "Why", "agent_enabled",
           "agent_listing", "agent_tools", "as_seen_by_agent", "available_tools",
           "catalog_tools", "enabled_by_id", "enabled_tool", "judge"]
