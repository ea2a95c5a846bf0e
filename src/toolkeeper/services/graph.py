"""The tool dependency graph (seed 003 ``ToolGraph``), derived from the catalog.

Every edge already lives in the catalog, scattered: a tool's actions and their
compensations, the upstream server, function, artifact, retrieval pipeline, connector and
``${secret:…}`` credentials a tool uses, the agent an ``agent_call`` tool targets, a
profile's activations, an agent's profile. :func:`build_graph` gathers them into one
directed graph, rebuilt on demand: a tenant's catalog is hundreds of nodes at most, so
plain dicts beat a graph library (nothing to install, nothing to keep in sync) and no
graph database is needed. :func:`impact` and :func:`findings` read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from toolkeeper.model.profile import Agent, Profile
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.secrets.base import SECRET_REF_RE

__all__ = ["Edge", "Finding", "Graph", "Node", "build_graph", "findings", "node_id"]


@dataclass(frozen=True, slots=True)
class Node:
    """One thing of the catalog."""

    id: str
    """``kind:tenant/name`` (an action: ``action:tenant/tool#action``)."""
    kind: str
    """tool, action, profile, agent, credential, server, function, artifact, pipeline."""
    name: str
    """Its name within its kind (an action: ``tool#action``)."""
    tenant: str
    """Its tenant; ``*`` for a global (system) tool."""
    attrs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """What a drawing shows: status, side effect, risk… (never a credential's value)."""
    missing: bool = False
    """Named by an edge but absent from the catalog."""


@dataclass(frozen=True, slots=True)
class Edge:
    """``source`` depends on or reaches ``target``."""

    source: str
    target: str
    kind: str
    """has_action, compensated_by, uses_server, uses_function, runs_artifact,
    queries_pipeline, uses_credential, calls_agent, activates, uses_profile."""
    attrs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class Finding:
    """One wiring problem the graph shows, with a stable ``code``."""

    code: str
    message: str
    node: str
    """The node it is about."""


@dataclass(slots=True)
class Graph:
    """Nodes by id and edges in insertion order."""

    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)

    def add(self, node: Node) -> None:
        old = self.nodes.get(node.id)
        if old is None or old.missing:
            self.nodes[node.id] = node

    def link(self, source: str, target: Node, kind: str, **attrs: Any) -> None:
        """An edge to ``target``, recording a tool, action, profile or agent the catalog
        lacks as missing (servers, credentials… live outside it: only named)."""
        if target.id not in self.nodes:
            self.nodes[target.id] = Node(target.id, target.kind, target.name, target.tenant,
                                         target.attrs, missing=target.kind in _CATALOG)
        self.edges.append(Edge(source, target.id, kind, attrs))

    def out(self, nid: str, kind: str | None = None) -> Iterator[Edge]:
        return (e for e in self.edges if e.source == nid and kind in (None, e.kind))

    def into(self, nid: str, kind: str | None = None) -> Iterator[Edge]:
        return (e for e in self.edges if e.target == nid and kind in (None, e.kind))

    def around(self, nid: str, depth: int = 2) -> Graph:
        """The subgraph within ``depth`` edges of ``nid``, either direction."""
        keep, frontier = {nid}, {nid}
        for _ in range(depth):
            nxt = {e.target for e in self.edges if e.source in frontier} | \
                  {e.source for e in self.edges if e.target in frontier}
            frontier = nxt - keep
            keep |= nxt
        return Graph({k: v for k, v in self.nodes.items() if k in keep},
                     [e for e in self.edges if e.source in keep and e.target in keep])


_CATALOG = frozenset({"tool", "action", "profile", "agent"})


def node_id(kind: str, tenant: str, name: str) -> str:
    return f"{kind}:{tenant}/{name}"


def _tenant(tool: ToolDefinition) -> str:
    return tool.tenant_id or "*"


def build_graph(tools: Iterable[ToolDefinition], profiles: Iterable[Profile] = (),
                agents: Iterable[Agent] = ()) -> Graph:
    """One graph of ``tools``, ``profiles`` and ``agents`` (one tenant's, plus globals)."""
    g = Graph()
    tools, profiles, agents = list(tools), list(profiles), list(agents)
    by_name: dict[tuple[str, str], ToolDefinition] = {(_tenant(t), t.name): t for t in tools}
    for t in tools:
        _add_tool(g, t)
    for a in agents:
        g.add(Node(node_id("agent", a.tenant_id, a.name), "agent", a.name, a.tenant_id,
                   {"endpoint": a.endpoint.status if a.endpoint else None}))
    for p in profiles:
        g.add(Node(node_id("profile", p.tenant_id, p.name), "profile", p.name, p.tenant_id,
                   {"autonomy": str(p.autonomy)}))
    for t in tools:
        _link_tool(g, t, by_name)
    for p in profiles:
        _link_profile(g, p, by_name)
    for a in agents:
        aid = node_id("agent", a.tenant_id, a.name)
        g.link(aid, Node(node_id("profile", a.tenant_id, a.profile), "profile", a.profile,
                         a.tenant_id), "uses_profile")
        if a.endpoint is not None:
            for conn, key in _refs(a.endpoint.headers, None):
                g.link(aid, _credential(a.tenant_id, conn, key), "uses_credential")
    return g


def _add_tool(g: Graph, t: ToolDefinition) -> None:
    tid = node_id("tool", _tenant(t), t.name)
    g.add(Node(tid, "tool", t.name, _tenant(t),
               {"status": str(t.status), "is_active": t.is_active, "version": t.version,
                "implementation_type": t.implementation_type}))
    for action in t.actions:
        g.add(Node(f"action:{_tenant(t)}/{t.name}#{action}", "action", f"{t.name}#{action}",
                   _tenant(t), {"side_effect": str(t.action_side_effect(action))}))


def _find(by_name: dict[tuple[str, str], ToolDefinition], tenant: str,
          name: str) -> ToolDefinition | None:
    return by_name.get((tenant, name)) or by_name.get(("*", name))


def _credential(tenant: str, connector: str | None, key: str) -> Node:
    name = f"{connector}/{key}" if connector else key
    return Node(node_id("credential", tenant, name), "credential", name, tenant)


def _refs(value: Any, connector: str | None) -> Iterator[tuple[str | None, str]]:
    """Every ``${secret:…}`` reference in ``value`` (a bare key takes ``connector``)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _refs(v, connector)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _refs(v, connector)
    elif isinstance(value, str):
        for m in SECRET_REF_RE.finditer(value):
            yield (m.group(1) or connector), m.group(2)


_USES = (("server", "server", "uses_server"), ("function_name", "function", "uses_function"),
         ("pipeline_id", "pipeline", "queries_pipeline"))


def _link_tool(g: Graph, t: ToolDefinition, by_name: dict[tuple[str, str],
               ToolDefinition]) -> None:
    ten = _tenant(t)
    tid = node_id("tool", ten, t.name)
    for action in t.actions:
        g.edges.append(Edge(tid, f"action:{ten}/{t.name}#{action}", "has_action"))
    for action, comp in t.compensation.items():
        target_name = comp.tool or t.name
        target = _find(by_name, ten, target_name)
        tten = _tenant(target) if target else ten
        g.link(f"action:{ten}/{t.name}#{action}",
               Node(f"action:{tten}/{target_name}#{comp.action}", "action",
                    f"{target_name}#{comp.action}", tten), "compensated_by")
    impl = t.implementation
    for key, kind, edge in _USES:
        if impl.get(key):
            g.link(tid, Node(node_id(kind, ten, str(impl[key])), kind, str(impl[key]), ten),
                   edge)
    if t.artifact_id:
        g.link(tid, Node(node_id("artifact", ten, t.artifact_id), "artifact", t.artifact_id,
                         ten), "runs_artifact", version=t.artifact_version)
    creds = set(_refs([impl, t.policy], t.connector_id))
    for conn, key in sorted(creds, key=lambda c: (c[0] or "", c[1])):
        g.link(tid, _credential(ten, conn, key), "uses_credential")
    target_agent = impl.get("target_agent_slug")
    if t.implementation_type == "agent_call" and isinstance(target_agent, str):
        g.link(tid, Node(node_id("agent", ten, target_agent), "agent", target_agent, ten),
               "calls_agent")


def _link_profile(g: Graph, p: Profile, by_name: dict[tuple[str, str],
                  ToolDefinition]) -> None:
    pid = node_id("profile", p.tenant_id, p.name)
    for act in p.activations:
        tool = _find(by_name, p.tenant_id, act.tool)
        ten = _tenant(tool) if tool else p.tenant_id
        actions = list(act.actions) if act.actions is not None else (
            list(tool.actions) if tool else [])
        g.link(pid, Node(node_id("tool", ten, act.tool), "tool", act.tool, ten), "activates",
               actions=actions, enabled=act.enabled)
        calls = act.tool == "agent_call" or (
            tool is not None and tool.implementation_type == "agent_call")
        for target in (act.policy.get("allowed_agents") or ()) if calls else ():
            g.link(pid, Node(node_id("agent", p.tenant_id, str(target)), "agent", str(target),
                             p.tenant_id), "calls_agent")


def findings(g: Graph, known_credentials: set[str] | None = None) -> list[Finding]:
    """What the graph shows is mis-wired (see docs/guides/graph.md for each code).

    ``known_credentials``: the names (``connector/key``) that exist; ``None`` skips the
    absent-credential rule (a config file alone cannot tell).
    """
    out: list[Finding] = []
    for e in g.edges:
        target = g.nodes[e.target]
        if not target.missing:
            continue
        if e.kind == "compensated_by":
            out.append(Finding("compensation_target_missing",
                               f"{g.nodes[e.source].name} is compensated by "
                               f"{target.name}, which does not exist", e.source))
        elif e.kind == "activates":
            out.append(Finding("activation_tool_missing",
                               f"profile {g.nodes[e.source].name} activates tool "
                               f"{target.name}, which does not exist", e.source))
    if known_credentials is not None:
        for n in g.nodes.values():
            if n.kind == "credential" and n.name not in known_credentials:
                users = sorted(g.nodes[e.source].name for e in g.into(n.id))
                out.append(Finding("credential_absent",
                                   f"credential {n.name} is referenced by "
                                   f"{', '.join(users)} and absent", n.id))
    activated = {e.target for e in g.edges if e.kind == "activates"}
    for n in g.nodes.values():
        if n.kind == "tool" and not n.missing and n.id not in activated and n.tenant != "*":
            out.append(Finding("tool_not_activated",
                               f"no profile activates tool {n.name}", n.id))
    out.extend(_agent_cycles(g))
    return out


def agent_calls(g: Graph) -> dict[str, set[str]]:
    """Agent → the agents it may call: through its profile's ``agent_call`` activations
    (a fixed target, or the activation's ``allowed_agents``)."""
    calls: dict[str, set[str]] = {}
    for a in (n for n in g.nodes.values() if n.kind == "agent" and not n.missing):
        reach: set[str] = set()
        for up in g.out(a.id, "uses_profile"):
            reach |= {e.target for e in g.out(up.target, "calls_agent")}
            for act in g.out(up.target, "activates"):
                if act.attrs.get("enabled", True):
                    reach |= {e.target for e in g.out(act.target, "calls_agent")}
        calls[a.id] = reach
    return calls


def _agent_cycles(g: Graph) -> list[Finding]:
    """Cycles of ``agent_call`` among agents with a published endpoint."""
    published = {n.id for n in g.nodes.values()
                 if n.kind == "agent" and n.attrs.get("endpoint") == "published"}
    calls = {a: {b for b in bs if b in published} for a, bs in agent_calls(g).items()
             if a in published}
    out: list[Finding] = []
    seen: set[frozenset[str]] = set()
    for start in sorted(calls):
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            here, path = stack.pop()
            for nxt in sorted(calls.get(here, ())):
                if nxt == start and frozenset(path) not in seen:
                    seen.add(frozenset(path))
                    names = " -> ".join(g.nodes[p].name for p in [*path, start])
                    out.append(Finding("agent_call_cycle",
                                       f"agent_call cycle: {names}", start))
                elif nxt not in path and nxt > start:
                    stack.append((nxt, [*path, nxt]))
    return out
