"""The ``toolkeeper check`` rules read from the dependency graph (issue 31, seed 003):
compensations naming a missing tool or action, tools no profile activates, ``agent_call``
cycles among agents with a published endpoint. (Activations of tools that do not exist are
``unknown_tool`` already; absent credentials need the secrets store: ``GET /graph``.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from toolkeeper.config.model import ConfigFile, NodePath
from toolkeeper.config.violations import Rule
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.services.graph import build_graph, findings, node_id

_RULES = {"compensation_target_missing": Rule.COMPENSATION_TARGET_MISSING,
          "tool_not_activated": Rule.TOOL_NOT_ACTIVATED,
          "agent_call_cycle": Rule.AGENT_CALL_CYCLE}


def check_graph(config: ConfigFile, tools: Iterable[tuple[ToolDefinition, NodePath | None]],
                add: Callable[[Rule, NodePath, str], None]) -> None:
    """Report the graph's findings on ``config``; ``tools``: every known definition with
    its node in the file (``None``: known from elsewhere, never reported)."""
    tools = list(tools)
    where: dict[str, NodePath] = {}
    for d, path in tools:
        if path is not None:
            where[node_id("tool", d.tenant_id or "*", d.name)] = path
            for action in d.actions:
                where[f"action:{d.tenant_id or '*'}/{d.name}#{action}"] = path
    for i, a in enumerate(config.agents):
        where[node_id("agent", a.tenant_id, a.name)] = ("agents", i)
    g = build_graph((d for d, _ in tools), config.profiles, config.agents)
    found = findings(g)
    # A tool is "not activated" only where the file wires its tenant's profiles, and not
    # when an activation there names a missing tool: that is one typo, reported once.
    wired = {p.tenant_id for p in config.profiles}
    typo = {g.nodes[f.node].tenant for f in found if f.code == "activation_tool_missing"}
    for f in found:
        tenant = g.nodes[f.node].tenant
        if f.code == "tool_not_activated" and (tenant not in wired or tenant in typo):
            continue
        rule, path = _RULES.get(f.code), where.get(f.node)
        if rule is not None and path is not None:
            add(rule, path, f.message)
