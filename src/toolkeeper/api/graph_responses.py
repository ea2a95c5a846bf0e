"""The bodies of ``GET /graph`` and the impact routes (``toolkeeper.services.graph*``);
like every response model (``toolkeeper.api.responses``) they refuse undeclared fields."""

from __future__ import annotations

from typing import Any

from toolkeeper.api.responses import Out


class GraphNodeOut(Out):
    id: str
    kind: str
    name: str
    tenant: str
    missing: bool
    """Named by an edge, absent from the catalog."""
    attrs: dict[str, Any]


class GraphEdgeOut(Out):
    source: str
    target: str
    kind: str
    attrs: dict[str, Any]


class GraphFindingOut(Out):
    code: str
    """Stable: compensation_target_missing, activation_tool_missing, credential_absent,
    tool_not_activated, agent_call_cycle."""
    message: str
    node: str


class GraphOut(Out):
    nodes: list[GraphNodeOut]
    edges: list[GraphEdgeOut]
    findings: list[GraphFindingOut]


class ProfileLossOut(Out):
    profile: str
    tenant: str
    actions: list[str]


class AgentLossOut(Out):
    agent: str
    tenant: str
    profile: str
    tool: str
    actions: list[str]


class BrokenCompensationOut(Out):
    action: str
    """The action whose undo breaks."""
    compensation: str
    """The action of the changed tool it named."""


class ToolImpactOut(Out):
    change: str
    tool: str
    tenant: str
    effect: str
    """``lose`` (the tool stops being callable) or ``affected`` (a re-publish)."""
    profiles: list[ProfileLossOut]
    agents: list[AgentLossOut]
    compensations_broken: list[BrokenCompensationOut]
    agents_unreachable: list[str]


class CredentialImpactOut(Out):
    change: str
    credential: str
    tenant: str
    tools: list[ToolImpactOut]
    agent_endpoints: list[str]
