"""Impact before change: who loses what if a tool changes or a credential is revoked.

Read from the dependency graph (:mod:`toolkeeper.services.graph`): the profiles that
activate the tool and the agents bound to them lose the activated actions; the
compensations of other tools that name one of its actions break; the agents an
``agent_call`` reaches through it are no longer reached. A re-publish keeps the tool
callable, so it lists the same dependents as *affected* (their activations follow the
new version) rather than lost.
"""

from __future__ import annotations

from typing import Any, Literal

from toolkeeper.services.graph import Graph

__all__ = ["CHANGES", "Change", "credential_impact", "tool_impact"]

Change = Literal["disable", "deprecate", "republish", "quarantine", "revoke"]
CHANGES: tuple[str, ...] = ("disable", "deprecate", "republish", "quarantine")


def tool_impact(g: Graph, tool_id: str, change: Change) -> dict[str, Any]:
    """What ``change`` of the tool node ``tool_id`` does to the rest of the graph."""
    tool = g.nodes[tool_id]
    profiles: list[dict[str, Any]] = []
    agents: list[dict[str, Any]] = []
    for act in sorted(g.into(tool_id, "activates"), key=lambda e: e.source):
        if not act.attrs.get("enabled", True):
            continue
        actions = sorted(act.attrs.get("actions", []))
        profile = g.nodes[act.source]
        profiles.append({"profile": profile.name, "tenant": profile.tenant,
                         "actions": actions})
        for bound in sorted(g.into(act.source, "uses_profile"), key=lambda e: e.source):
            agent = g.nodes[bound.source]
            agents.append({"agent": agent.name, "tenant": agent.tenant,
                           "profile": profile.name, "tool": tool.name, "actions": actions})
    broken: list[dict[str, Any]] = []
    for has in g.out(tool_id, "has_action"):
        for comp in sorted(g.into(has.target, "compensated_by"), key=lambda e: e.source):
            if comp.source.startswith(f"action:{tool.tenant}/{tool.name}#"):
                continue  # the tool's own undo goes with it
            broken.append({"action": g.nodes[comp.source].name,
                           "compensation": g.nodes[has.target].name})
    reached = sorted(g.nodes[e.target].name for e in g.out(tool_id, "calls_agent"))
    return {"change": change, "tool": tool.name, "tenant": tool.tenant,
            "effect": "affected" if change == "republish" else "lose",
            "profiles": profiles, "agents": agents, "compensations_broken": broken,
            "agents_unreachable": [] if change == "republish" else reached}


def credential_impact(g: Graph, credential_id: str) -> dict[str, Any]:
    """What revoking the credential node ``credential_id`` breaks: each tool using it, as
    if disabled, and the agent endpoints whose headers name it."""
    cred = g.nodes[credential_id]
    tools: list[dict[str, Any]] = []
    endpoints: list[str] = []
    for use in sorted(g.into(credential_id, "uses_credential"), key=lambda e: e.source):
        user = g.nodes[use.source]
        if user.kind == "agent":
            endpoints.append(user.name)
        else:
            tools.append(tool_impact(g, use.source, "revoke"))
    return {"change": "revoke", "credential": cred.name, "tenant": cred.tenant,
            "tools": tools, "agent_endpoints": endpoints}
