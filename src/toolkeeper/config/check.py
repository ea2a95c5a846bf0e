"""``toolkeeper check``: wiring consistency of a config (SPEC §7; seed "CI wiring checks").

Each rule has a stable short name (:class:`Rule`) and every violation points at the YAML
node that causes it. ``check`` never raises for a bad config; ``check_file`` also turns
load errors into ``config_invalid`` violations.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from toolkeeper.builtins.agent_call import endpoint_problems
from toolkeeper.config.check_graph import check_graph
from toolkeeper.config.loader import load_file
from toolkeeper.config.model import ConfigFile, NativeEntry, NodePath, render_path
from toolkeeper.config.resolve import (
    ResolvedTool,
    importable_elsewhere,
    load_functions,
    policy_model_for,
    resolve_tools,
    tool_class,
)
from toolkeeper.config.violations import Rule, Violation
from toolkeeper.errors import ConfigError
from toolkeeper.model.enums import Gate, Risk
from toolkeeper.model.gates import GateMatrix, loosening, stricter
from toolkeeper.model.profile import Activation, Profile
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import TOOL_NAME_RE, TOOL_NAME_RULE, ToolDefinition
from toolkeeper.providers.base import ToolPolicy
from toolkeeper.secrets.base import LITERAL_SECRET_ADVICE, literal_secrets

__all__ = ["Rule", "Violation", "check", "check_file"]


_HIGH = Risk.HIGH.rank


@dataclass(slots=True)
class _Tool:
    definition: ToolDefinition
    policy_model: type[ToolPolicy] | None
    resolved: ResolvedTool | None = None
    """``None`` for a tool known from elsewhere (the store), not from this file."""


@dataclass(slots=True)
class _Ctx:
    config: ConfigFile
    out: list[Violation] = field(default_factory=list)
    tools: dict[tuple[str, str], _Tool] = field(default_factory=dict)
    """(tenant key or ``*``, name) -> tool."""

    def add(self, rule: Rule, path: NodePath, message: str) -> None:
        pos = self.config.position(path)
        self.out.append(Violation(rule.value, message, render_path(path),
                                  pos[0] if pos else None, pos[1] if pos else None,
                                  self.config.source))

    def lookup(self, tenant: str, name: str) -> _Tool | None:
        return self.tools.get((tenant, name)) or self.tools.get(("*", name))


def check(config: ConfigFile, *, base_dir: Path, tests_dir: Path | None = None,
          known_tools: Iterable[ToolDefinition] = (),
          known_functions: Iterable[str] = (),
          natives: Mapping[str, Any] | None = None) -> list[Violation]:
    """Every wiring violation of ``config``, in file order.

    ``known_tools``/``known_functions``/``natives`` describe what already exists outside
    the file (a gateway's store and allow-list), so activations may name those too.
    """
    ctx = _Ctx(config)
    for tool in known_tools:
        model = policy_model_for(tool, natives or {}, base_dir)
        ctx.tools[(tool.tenant_id or "*", tool.name)] = _Tool(tool, model)
    resolved = resolve_tools(config, base_dir)
    _check_tools(ctx, resolved)
    loaded = _check_functions(ctx, resolved, base_dir, set(known_functions))
    _check_beside_config(ctx, resolved, base_dir, loaded)
    if tests_dir is not None:
        _check_tests(ctx, resolved, tests_dir)
    _check_adjusters(ctx)
    for i, server in enumerate(config.servers):
        for where in ("headers", "env"):
            for path in literal_secrets(getattr(server, where), ("servers", i, where)):
                ctx.add(Rule.LITERAL_SECRET, path,
                        f"a literal credential in config: {LITERAL_SECRET_ADVICE}")
    for i, profile in enumerate(config.profiles):
        _check_profile_gates(ctx, profile, ("profiles", i, "gates"))
        for j, act in enumerate(profile.activations):
            _check_activation(ctx, profile, act, ("profiles", i, "activations", j))
    _check_agent_endpoints(ctx)
    _check_names(ctx)
    _check_exposed(ctx)
    check_graph(config, [(t.definition, t.resolved.path if t.resolved else None)
                         for t in ctx.tools.values()], ctx.add)
    return sorted(ctx.out, key=lambda v: (v.line or 0, v.column or 0, v.rule))


def check_file(path: str | Path, tests_dir: str | Path | None = None) -> list[Violation]:
    """Load and check a file; load errors become ``config_invalid`` violations."""
    try:
        config = load_file(path)
    except ConfigError as exc:
        return [Violation(Rule.CONFIG_INVALID.value, p, "<root>", exc.line, exc.column,
                          str(path)) for p in exc.problems]
    return check(config, base_dir=Path(path).resolve().parent,
                 tests_dir=Path(tests_dir) if tests_dir is not None else None)


def _check_tools(ctx: _Ctx, resolved: list[ResolvedTool]) -> None:
    for rt in resolved:
        if rt.problem is not None:
            ctx.add(Rule(rt.problem[0]), rt.path, rt.problem[1])
        for path in literal_secrets(rt.entry.model_dump(mode="json"), rt.path):
            ctx.add(Rule.LITERAL_SECRET, path,
                    f"a literal credential in config: {LITERAL_SECRET_ADVICE}")
        if rt.definition is None:
            continue
        key = (rt.tenant or "*", rt.definition.name)
        earlier = ctx.tools.get(key)
        if earlier is not None and earlier.resolved is not None:
            ctx.add(Rule.DUPLICATE_TOOL, rt.path, f"tool {rt.definition.name!r} is already "
                    f"defined at {render_path(earlier.resolved.path)} for this tenant")
            continue
        ctx.tools[key] = _Tool(rt.definition, rt.policy_model, rt)
        _check_tool_policy(ctx, rt)
        if rt.native is not None and not rt.is_function_tool:
            model = rt.policy_model
            if model is None or model is ToolPolicy or not issubclass(model, ToolPolicy):
                ctx.add(Rule.POLICY_MODEL_MISSING, (*rt.path, "native"),
                        f"{rt.definition.name}: set `policy_model` to a ToolPolicy subclass "
                        "holding the tool's guardrails")


def _check_tool_policy(ctx: _Ctx, rt: ResolvedTool) -> None:
    """The tool's own ``policy:`` defaults hold against its policy model (a built-in's
    ``GitPolicy``…), each error at the key that causes it."""
    model, definition = rt.policy_model, rt.definition
    if model is None or definition is None or not definition.policy:
        return
    try:
        model.model_validate(definition.policy)
    except ValidationError as exc:
        seen = {v.path for v in ctx.out}  # a literal secret there is already the finding
        for err in exc.errors():
            loc = tuple(err["loc"])
            if render_path((*rt.path, "policy", *loc)) in seen:
                continue
            ctx.add(Rule.INVALID_POLICY, (*rt.path, "policy", *loc),
                    f"{'.'.join(map(str, loc)) or 'policy'}: {err['msg']} ({model.__name__})")


def _check_functions(ctx: _Ctx, resolved: list[ResolvedTool], base_dir: Path,
                     known: set[str]) -> list[str]:
    """The ``functions:`` that import and are callable; the others are findings."""
    loaded, problems = load_functions(ctx.config, base_dir)
    for name, message in problems.items():
        ctx.add(Rule.FUNCTION_INVALID, ("functions", name), message)
    allowed = set(ctx.config.functions) | known
    for rt in resolved:
        d = rt.definition
        if d is None or d.implementation_type != "function":
            continue
        fname = d.implementation.get("function_name")
        if not isinstance(fname, str) or fname not in allowed:
            ctx.add(Rule.FUNCTION_NOT_ALLOWED, (*rt.path, "implementation"),
                    f"implementation.function_name {fname!r} is not in `functions:`")
    return list(loaded)


def _check_beside_config(ctx: _Ctx, resolved: list[ResolvedTool], base_dir: Path,
                         functions: list[str]) -> None:
    """An entry point that imports only with the config's directory on the path loads in a
    process given this file (``--config``: ``serve``, ``call``, ``mcp``) and in ``apply``,
    but not in one that reads the store without it: its calls stop
    ``provider_unavailable``. Say so before the store holds it."""
    refs: list[tuple[NodePath, str]] = [
        ((*rt.path, "native"), rt.entry.native) for rt in resolved
        if isinstance(rt.entry, NativeEntry) and rt.problem is None]
    refs += [(("functions", name), ctx.config.functions[name]) for name in functions]
    source = ctx.config.source or "this config"
    for path, ref in refs:
        if not importable_elsewhere(ref):
            ctx.add(Rule.ONLY_BESIDE_CONFIG, path, f"{ref} imports only from {base_dir}, "
                    f"the config's directory: a server or CLI that reads the store without "
                    f"`--config {source}` cannot load it (provider_unavailable). Install its "
                    f"module, or put {base_dir} on PYTHONPATH")


def _check_tests(ctx: _Ctx, resolved: list[ResolvedTool], tests_dir: Path) -> None:
    texts = [p.read_text(encoding="utf-8", errors="replace")
             for p in sorted(tests_dir.rglob("*.py"))] if tests_dir.is_dir() else []
    for rt in resolved:
        cls = tool_class(rt.native) if rt.native is not None else None
        if cls is None or rt.definition is None:
            continue
        names = {rt.definition.name, cls.__name__}
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b")
        if not any(pattern.search(text) for text in texts):
            ctx.add(Rule.TESTS_MISSING, (*rt.path, "native"),
                    f"no test under {tests_dir} mentions {' or '.join(sorted(names))}")


def _check_adjusters(ctx: _Ctx) -> None:
    places: list[tuple[NodePath, Any]] = []
    for tenant, tc in ctx.config.tenants.items():
        places += [(("tenants", tenant, "adjusters", i), a) for i, a in enumerate(tc.adjusters)]
    for p, profile in enumerate(ctx.config.profiles):
        places += [(("profiles", p, "adjusters", i), a)
                   for i, a in enumerate(profile.adjusters)]
    for path, adj in places:
        if adj.raise_to is None and adj.raise_by == 0:
            ctx.add(Rule.ADJUSTER_NO_EFFECT, path, f"adjuster {adj.name or '?'} raises "
                    "nothing: set raise_to or raise_by")


def _upstream(ctx: _Ctx, tenant: str, name: str) -> bool:
    """Whether ``name`` is one of a configured upstream server's ``{server}_…`` tools."""
    return any(name.startswith(f"{s.name}_") and s.tenant in (None, tenant)
               for s in ctx.config.servers)


def _check_profile_gates(ctx: _Ctx, profile: Profile, path: NodePath) -> None:
    """Below the tenant a gate can only tighten: a looser profile cell is refused by apply,
    so say so before it runs."""
    tenant = ctx.config.tenants.get(profile.tenant_id)
    for problem in loosening(GateMatrix(tenant.gates if tenant else {}), profile.gates):
        ctx.add(Rule.GATE_LOOSER_THAN_TENANT, path, f"{problem}; loosen it in the tenant's "
                "gates (tenants.<id>.gates) instead")


def _check_activation(ctx: _Ctx, profile: Profile, act: Activation, path: NodePath) -> None:
    tool = ctx.lookup(profile.tenant_id, act.tool)
    if tool is None and _upstream(ctx, profile.tenant_id, act.tool):
        return  # imported from an upstream MCP server when applied: not knowable offline
    if tool is None:
        ctx.add(Rule.UNKNOWN_TOOL, (*path, "tool"), f"no tool {act.tool!r} visible to "
                f"tenant {profile.tenant_id!r}")
        return
    d = tool.definition
    for k, name in enumerate(act.actions or ()):
        if name not in d.actions:
            ctx.add(Rule.UNKNOWN_ACTION, (*path, "actions", k),
                    f"{d.name} has no action {name!r} (has: {', '.join(d.actions)})")
    for name in act.gates:
        if name not in d.actions:
            ctx.add(Rule.UNKNOWN_ACTION, (*path, "gates", name), f"{d.name} has no action "
                    f"{name!r}")
    for secret_path in literal_secrets(act.policy, (*path, "policy")):
        ctx.add(Rule.LITERAL_SECRET, secret_path,
                f"a literal credential in a policy: {LITERAL_SECRET_ADVICE}")
    policy = _validated_policy(ctx, tool, act, (*path, "policy"))
    if not act.enabled:
        return
    allowed = [a for a in (act.actions if act.actions is not None else d.actions)
               if a in d.actions]
    if policy is not None and policy.allowed_actions is not None:
        allowed = [a for a in allowed if a in policy.allowed_actions]
    tenant = ctx.config.tenants.get(profile.tenant_id)
    matrix = GateMatrix(tenant.gates if tenant else {}, profile.gates)
    confirm = d.requires_confirmation or bool(act.requires_confirmation)
    for action in allowed:
        risk = d.action_risk(action)
        if risk.rank < _HIGH:
            continue
        gate = matrix.gate(risk, profile.autonomy)
        if action in act.gates:
            gate = stricter(gate, act.gates[action])
        if gate is Gate.ALLOW and not confirm:
            ctx.add(Rule.UNGATED_HIGH_RISK, path, f"{d.name}.{action} is {risk.value} risk "
                    f"but runs ungated at autonomy {int(profile.autonomy)}: add a gate "
                    "(profile/tenant `gates`, activation `gates`) or requires_confirmation")


def _validated_policy(ctx: _Ctx, tool: _Tool, act: Activation,
                      path: NodePath) -> ToolPolicy | None:
    if tool.policy_model is None:
        return None
    try:
        return tool.policy_model.model_validate({**tool.definition.policy, **act.policy})
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            if loc and loc[0] not in act.policy and tool.resolved is not None:
                continue  # the tool's own default, reported at the tool (_check_tool_policy)
            where = (*path, *loc) if loc and loc[0] in act.policy else path
            ctx.add(Rule.INVALID_POLICY, where, f"{'.'.join(map(str, loc)) or 'policy'}: "
                    f"{err['msg']} ({tool.policy_model.__name__})")
        return None


def _check_agent_endpoints(ctx: _Ctx) -> None:
    """The write-time rules of agent endpoints (``endpoint_problems``): secret references
    only in headers, an http(s) URL, networks that parse."""
    for i, agent in enumerate(ctx.config.agents):
        if agent.endpoint is None:
            continue
        for reason, pointer, message in endpoint_problems(agent.endpoint):
            rule = (Rule.LITERAL_SECRET if reason == Reason.SECRET_LITERAL_REFUSED
                    else Rule.INVALID_DEFINITION)
            ctx.add(rule, ("agents", i, *pointer.strip("/").split("/")), message)


def _check_names(ctx: _Ctx) -> None:
    profiles: dict[tuple[str, str], int] = {}
    for i, p in enumerate(ctx.config.profiles):
        if (p.tenant_id, p.name) in profiles:
            ctx.add(Rule.DUPLICATE_PROFILE, ("profiles", i, "name"), f"profile {p.name!r} "
                    f"is already defined at profiles[{profiles[(p.tenant_id, p.name)]}]")
        profiles.setdefault((p.tenant_id, p.name), i)
    agents: set[tuple[str, str]] = set()
    for i, a in enumerate(ctx.config.agents):
        if (a.tenant_id, a.name) in agents:
            ctx.add(Rule.DUPLICATE_AGENT, ("agents", i, "name"), f"agent {a.name!r} is "
                    "defined twice in this tenant")
        agents.add((a.tenant_id, a.name))
        if (a.tenant_id, a.profile) not in profiles:
            ctx.add(Rule.UNKNOWN_PROFILE, ("agents", i, "profile"), f"no profile "
                    f"{a.profile!r} in tenant {a.tenant_id!r}")


def _tenants(ctx: _Ctx) -> set[str]:
    c = ctx.config
    found = set(c.tenants) | {p.tenant_id for p in c.profiles} | {a.tenant_id for a in c.agents}
    found |= {t for t, _ in ctx.tools if t != "*"}
    return found or {"*"}


def _exposed(d: ToolDefinition) -> list[str]:
    return [d.name] if len(d.actions) == 1 else [f"{d.name}_{a}" for a in d.actions]


def _check_exposed(ctx: _Ctx) -> None:
    """MCP names ``{tool}``/``{tool}_{action}`` must be valid and unique per tenant."""
    reported: set[tuple[str, str]] = set()
    for tenant in sorted(_tenants(ctx)):
        names = {n for t, n in ctx.tools if t in (tenant, "*")}
        owners: dict[str, _Tool] = {}
        for name in sorted(names):
            tool = ctx.lookup(tenant, name)
            assert tool is not None
            for exposed in _exposed(tool.definition):
                other = owners.setdefault(exposed, tool)
                culprit = tool if tool.resolved is not None else other
                if culprit.resolved is None:
                    continue
                problem = None
                if not TOOL_NAME_RE.match(exposed):
                    problem = f"MCP name {exposed!r} does not match {TOOL_NAME_RULE}"
                elif other is not tool:
                    problem = (f"MCP name {exposed!r} of {tool.definition.name!r} collides "
                               f"with tool {other.definition.name!r}")
                if problem is not None and (exposed, problem) not in reported:
                    reported.add((exposed, problem))
                    ctx.add(Rule.NAME_COLLISION, culprit.resolved.path, problem)
