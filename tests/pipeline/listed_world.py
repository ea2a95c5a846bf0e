"""Listed ⇔ callable (SPEC §2), as a checker any test can run: random worlds (tools of the
agent's tenant, global ones and another tenant's; lifecycle, health, risks, side effects,
scopes; activations with action lists, policy allow-lists, gates, pins; tenant and profile
gate overrides; adjusters over context and over arguments), then each face's listing
compared with that face's real call answers.

A tool action is listed for the agent iff a call to it is not refused for a reason the
listing reflects: resolve (tenant, lifecycle, activation, action allow-lists), scope,
health (circuit open; a half-open breaker lists the tool again), and the gate at the
action's own risk raised by the adjusters that read no argument.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from toolkeeper import (
    ActionSpec,
    Activation,
    Agent,
    BaseTool,
    Gate,
    Gateway,
    Profile,
    Reason,
    Risk,
    SideEffect,
    ToolStatus,
)
from toolkeeper.errors import OperationRefused
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Health, Role
from toolkeeper.model.mcp_names import mcp_name
from toolkeeper.model.profile import Adjuster, Condition
from toolkeeper.pipeline.gate import gate_for
from toolkeeper.services.discovery import agent_enabled, agent_tools

EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}
ACTIONS = ("a", "b", "c")
SCOPES = ("s1", "s2", "s3")
PROFILE_ONLY = "s4"
"""Granted by every profile, never by a drawn token scope: what narrowing takes away."""
LOCAL, GLOBAL, FOREIGN = "t", "g", "f"
"""Tool name prefixes: the agent's tenant's, global, another tenant's."""
HEALTH = ("healthy",) * 6 + ("degraded", "open", "half_open", "half_open", "probing")
RESOLVE = {Reason.TOOL_NOT_FOUND, Reason.TOOL_DISABLED, Reason.TOOL_NOT_PUBLISHED,
           Reason.TOOL_QUARANTINED, Reason.TOOL_NOT_ENABLED, Reason.ACTION_NOT_FOUND,
           Reason.ACTION_NOT_ALLOWED, Reason.POLICY_EXCEEDS_BOUNDS, Reason.CONFIG_INVALID,
           Reason.PROVIDER_UNAVAILABLE, Reason.ENTRY_POINT_NOT_ALLOWED}
UNKNOWN_TOOL = "unknown_tool"
"""MCP's answer (a JSON-RPC error) for a name it does not serve."""
REFLECTED = {*(r.value for r in RESOLVE), Reason.SCOPE_MISSING.value,
             Reason.TOOL_UNAVAILABLE.value, Reason.GATE_DENIED.value, UNKNOWN_TOOL}
"""Refusals the listing reflects: a listed action never gets one, an unlisted one always."""
LABELS = {Reason.SCOPE_MISSING: "scope", Reason.TOOL_UNAVAILABLE: "health",
          Reason.TOOL_DISABLED: "lifecycle", Reason.TOOL_NOT_PUBLISHED: "lifecycle",
          Reason.TOOL_QUARANTINED: "lifecycle", Reason.TOOL_NOT_ENABLED: "not_enabled",
          Reason.ACTION_NOT_FOUND: "action", Reason.ACTION_NOT_ALLOWED: "action",
          Reason.TOOL_NOT_FOUND: "tenant"}
WORLDS = 20
"""Worlds per library run: the property test's and the mutant search's (the same
derandomized worlds, so the property test is the mutants' control)."""
REQUIRED = ("allowed", "scope", "gate", "adjusters", "health", "lifecycle", "not_enabled")
"""Outcome classes every run must reach in a stated share of its calls."""


class Counterexample(AssertionError):
    """The property does not hold: a face lists what it refuses, or hides what it runs."""


class Probe(BaseTool):
    """A three-action tool whose definition each example rewrites; it always succeeds."""

    tool_name = "probe"
    actions: ClassVar[dict[str, ActionSpec]] = {a: ActionSpec(input_schema=EMPTY)
                                                for a in ACTIONS}
    side_effect = SideEffect.PURE

    async def execute(self, action: str, request: dict[str, Any], context: Any) -> Any:
        return action


def _weighted(*pairs: tuple[int, Any]) -> st.SearchStrategy[Any]:
    return st.sampled_from([v for n, v in pairs for _ in range(n)])


gate_values = _weighted((1, Gate.ALLOW), (1, Gate.PREVIEW), (1, Gate.CONFIRM),
                        (1, Gate.APPROVE), (3, Gate.DENY))
risks = _weighted((2, Risk.LOW), (1, Risk.MEDIUM), (1, Risk.HIGH), (2, Risk.CRITICAL))
subsets = st.lists(st.sampled_from(ACTIONS), unique=True, max_size=3).map(tuple)
tool_spec = st.fixed_dictionaries({
    "actions": _weighted((1, 1), (2, 2), (3, 3)).flatmap(lambda n: st.lists(
        st.sampled_from(ACTIONS), unique=True, min_size=n, max_size=n)),
    "risk_default": risks,
    "risks": st.dictionaries(st.sampled_from(ACTIONS), risks),
    "effects": st.dictionaries(st.sampled_from(ACTIONS), st.sampled_from(list(SideEffect))),
    "scopes": st.dictionaries(st.sampled_from(ACTIONS),
                              st.lists(st.sampled_from(SCOPES), unique=True, max_size=2)),
    "requires_confirmation": _weighted((4, False), (1, True)),
    "status": _weighted((24, ToolStatus.PUBLISHED), (2, ToolStatus.DEPRECATED),
                        (1, ToolStatus.DRAFT), (1, ToolStatus.DISABLED),
                        (1, ToolStatus.QUARANTINED)),
    "is_active": _weighted((30, True), (1, False)),
    "health": st.sampled_from(HEALTH),
})
activation = st.fixed_dictionaries({
    "actions": _weighted((6, None), (1, "some")).flatmap(
        lambda v: st.none() if v is None else subsets),
    "allowed": _weighted((8, None), (1, "some")).flatmap(
        lambda v: st.none() if v is None else subsets),
    "gates": st.dictionaries(st.sampled_from(ACTIONS), gate_values, max_size=2),
    "requires_confirmation": st.sampled_from([None, None, False, True]),
    "version": _weighted((16, None), (2, "1.0.0"), (1, "9.0.0")),
    "enabled": _weighted((24, True), (1, False)),
})
activated = _weighted((1, False), (12, True)).flatmap(
    lambda on: activation if on else st.none())
gates = st.dictionaries(st.sampled_from(list(Risk)), st.dictionaries(
    st.sampled_from([0, 1, 2, 3]), gate_values, max_size=3), max_size=3)
condition = st.one_of(
    st.builds(dict, context=st.just("side_effect"), op=st.sampled_from(["eq", "ne"]),
              value=st.sampled_from([s.value for s in SideEffect])),
    st.builds(dict, context=st.just("action"), op=st.sampled_from(["in", "not_in"]),
              value=subsets.map(list)),
    st.builds(dict, context=st.just("autonomy"), op=st.sampled_from(["gte", "lt"]),
              value=st.integers(0, 3)),
    st.builds(dict, context=st.just("agent"), op=st.just("eq"),
              value=st.sampled_from(["bot", "someone"])),
    st.builds(dict, context=st.just("tenant"), op=st.just("exists")),
    st.builds(dict, context=st.just("tool"), op=st.just("matches"),
              value=st.sampled_from(["^t", "^g", "1$"])),
    # over arguments: never predicted by a listing; with no arguments never holding
    st.builds(dict, arg=st.sampled_from(["amount", "x.y"]),
              op=st.sampled_from(["gt", "exists", "ne"]), value=st.just(10)),
)
adjuster = st.fixed_dictionaries({
    "tools": st.lists(st.sampled_from(["t0", "t1", "t2", "g0", "f0"]), unique=True,
                      max_size=2),
    "actions": st.lists(st.sampled_from(ACTIONS), unique=True, max_size=2),
    "when": st.lists(condition, max_size=2),
    "raise_to": _weighted((2, None), (1, Risk.MEDIUM), (2, Risk.HIGH), (4, Risk.CRITICAL)),
    "raise_by": st.integers(0, 3),
}).filter(lambda a: a["raise_to"] is not None or a["raise_by"] > 0)
FOCUS = ("allowed", "scope", "gate", "adjusters", "health", "lifecycle", "not_enabled",
         "action", "pin")
"""The outcome each world's focused tools are built for, one tool each (stratified: every
class is reached in every world by construction, not by luck)."""
HOLDING = [  # argument-free conditions that hold for the focused tool's calls
    {"context": "tenant", "op": "exists"}, {"context": "agent", "op": "eq", "value": "bot"},
    {"context": "action", "op": "in", "value": "ACTION"},
    {"context": "autonomy", "op": "eq", "value": "AUTONOMY"},
    {"context": "tool", "op": "matches", "value": "^t"},
    {"context": "side_effect", "op": "eq", "value": "EFFECT"}]
"""``ACTION``, ``AUTONOMY``, ``EFFECT``: filled in with the drawn action subset, the world's
autonomy, the tool's side effect, so each context field decides."""
holding = st.tuples(st.permutations(HOLDING), st.integers(1, 3)).map(lambda p: p[0][:p[1]])
quiet = _weighted((2, Gate.ALLOW), (1, Gate.PREVIEW), (1, Gate.CONFIRM), (1, Gate.APPROVE))


@st.composite
def focused(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    """A local tool (``spec``, ``act``; ``adjuster``, ``older`` when the kind needs one)
    whose calls mostly end in ``kind``, on top of a random one."""
    spec, act = dict(draw(tool_spec)), dict(draw(activation))
    spec.update(status=draw(_weighted((4, ToolStatus.PUBLISHED), (1, ToolStatus.DEPRECATED))),
                is_active=True, scopes={}, risk_default=draw(st.sampled_from(
                    [Risk.LOW, Risk.MEDIUM])), risks={},
                health=draw(st.sampled_from(("healthy", "degraded", "half_open", "half_open"))))
    act.update(enabled=True, version=draw(st.sampled_from([None, "1.0.0"])), actions=None,
               allowed=None, gates=draw(st.dictionaries(st.sampled_from(ACTIONS), quiet,
                                                        max_size=2)))
    out: dict[str, Any] = {"kind": kind, "spec": spec, "act": act}
    if kind == "allowed":
        spec["actions"] = list(ACTIONS)
    elif kind == "scope":
        spec["actions"] = list(ACTIONS)
        spec["scopes"] = {a: ["s9", *draw(st.lists(st.sampled_from(SCOPES), max_size=1))]
                          for a in ACTIONS}
    elif kind == "token_scope":  # the profile always grants it, an OAuth token never does
        spec["actions"] = list(ACTIONS)
        spec["scopes"] = {a: [PROFILE_ONLY] for a in ACTIONS}
    elif kind == "gate":
        act["gates"] = {a: Gate.DENY for a in ACTIONS}
    elif kind == "adjusters":  # every action has one effect, which the tool's default is not
        effect = draw(st.sampled_from([e for e in SideEffect if e is not SideEffect.PURE]))
        spec["effects"] = {a: effect for a in ACTIONS}
        which = draw(st.permutations(ACTIONS))[:draw(st.integers(1, 3))]
        fill = {"ACTION": list(which), "EFFECT": effect.value}
        out["adjuster"] = {"tools": ["self"], "actions": draw(st.sampled_from([[], list(ACTIONS)])),
                           "when": [{**c, "value": fill.get(c.get("value"), c.get("value"))}
                                    for c in draw(holding)],
                           "raise_to": draw(st.sampled_from([None, Risk.CRITICAL])),
                           "raise_by": 3, "where": draw(st.sampled_from(["tenant", "profile"]))}
    elif kind == "health":
        spec["health"], spec["actions"] = "open", list(ACTIONS)
    elif kind == "lifecycle":
        how = draw(st.sampled_from(["disabled", "quarantined", "draft", "inactive", "pin"]))
        if how == "inactive":
            spec["is_active"] = False
        elif how == "pin":
            act["version"] = "9.0.0"
        else:
            spec["status"] = ToolStatus(how)
    elif kind == "not_enabled":
        out["act"] = draw(st.sampled_from([None, {**act, "enabled": False}]))
    elif kind == "action":  # the activation's list and the policy's, each deciding some
        spec["actions"] = list(ACTIONS)
        act["actions"] = tuple(draw(st.permutations(ACTIONS))[:draw(st.integers(2, 3))])
        act["allowed"] = tuple(draw(st.permutations(ACTIONS))[:draw(st.integers(1, 2))])
    elif kind == "pin":  # the pinned 1.0.0 has other actions and risks than the newer 2.0.0
        act["version"] = "1.0.0"
        out["older"] = {**spec, "actions": draw(st.lists(st.sampled_from(ACTIONS), unique=True,
                                                         min_size=1, max_size=3)),
                        "risks": draw(st.dictionaries(st.sampled_from(ACTIONS), risks)),
                        "scopes": draw(st.dictionaries(st.sampled_from(ACTIONS),
                                                       st.just(["s9"]), max_size=1))}
    return out


world = st.fixed_dictionaries({
    "local": st.lists(st.tuples(tool_spec, activated), min_size=1, max_size=3),
    "global": st.lists(st.tuples(tool_spec, activated), max_size=1),
    "foreign": st.lists(st.tuples(tool_spec, activated), max_size=1),
    "focus": st.permutations(FOCUS).flatmap(lambda ks: st.tuples(*(focused(k) for k in ks))),
    "tenant_gates": gates, "profile_gates": gates,
    "tenant_adjusters": st.lists(adjuster, max_size=2),
    "profile_adjusters": st.lists(adjuster, max_size=3),
    "autonomy": _weighted((3, 0), (2, 1), (2, 2), (1, 3)),
    "scopes": _weighted((1, ()), (1, ("s1",)), (1, ("s1", "s2")), (2, SCOPES)),
    "profile_missing": _weighted((60, False), (1, True)),
})
oauth_world = st.tuples(world, _weighted((2, None), (1, ("s1",)), (1, ("s2",)),
                                         (1, ("s1", "s3"))),
                        focused("token_scope")).map(
    lambda t: {**t[0], "token_scopes": t[1], "focus": (*t[0]["focus"], t[2])})
"""A world called with a ``tk_…`` token (``token_scopes`` ``None``) or an OAuth access
token whose mapped scopes narrow the profile's, plus one tool that needs the scope every
profile grants and no token does (:data:`PROFILE_ONLY`): what narrowing takes away. Drawn
after :data:`world`, so runs without tokens keep their worlds."""

Mint = Callable[[str, str, frozenset[str]], str]
"""``(tenant, agent, scopes)`` → a signed access token the gateway accepts."""


@dataclass(kw_only=True)
class Env:
    """One example's world as registered: who calls, which calls, what each tool is."""

    gw: Gateway
    tenant: str
    agent: str
    token: str
    candidates: list[tuple[str, str]]
    health: dict[str, str]
    """Tool name → generated health state."""
    definitions: dict[str, Any] = field(default_factory=dict)
    """Tool name → the definition that would run (for MCP names)."""
    token_scopes: frozenset[str] | None = None
    """The caller's OAuth scopes (``Principal.scopes``), ``None`` for a ``tk_…`` token."""


_TENANTS = itertools.count()


def _register(gw: Gateway, tenant: str | None, name: str, spec: dict[str, Any],
              **more: Any) -> Any:
    actions = {a: ActionSpec(input_schema=EMPTY, side_effect=spec["effects"].get(a),
                             scopes_required=tuple(spec["scopes"].get(a, ())))
               for a in spec["actions"]}
    draft = spec["status"] is ToolStatus.DRAFT
    made = gw.registry.register(
        Probe, tenant_id=tenant, publish=not draft, name=name, actions=actions,
        is_active=spec["is_active"], risk_default=spec["risk_default"],
        risk_map={a: r for a, r in spec["risks"].items() if a in actions},
        requires_confirmation=spec["requires_confirmation"], **more)
    if not draft and spec["status"] is not ToolStatus.PUBLISHED:
        made = gw.registry.set_status(name, tenant, spec["status"])
    return made


def _activation(name: str, act: dict[str, Any]) -> Activation:
    policy = {"allowed_actions": list(act["allowed"])} if act["allowed"] is not None else {}
    return Activation(tool=name, actions=act["actions"], policy=policy, gates=act["gates"],
                      requires_confirmation=act["requires_confirmation"],
                      version=act["version"], enabled=act["enabled"])


def _set_health(gw: Gateway, key: str, state: str) -> None:
    board = gw.runtime.health
    if state == "degraded":
        board.set(key, Health.DEGRADED)
    elif state == "open":
        board.set(key, Health.UNAVAILABLE, retry_after_s=3600)
    elif state in ("half_open", "probing"):
        board.set(key, Health.UNAVAILABLE, retry_after_s=-1)  # the cool-down is over
        if state == "probing":
            assert board.admit_call(key) == (None, True)  # a probe call in flight


def _adjusters(raw: list[dict[str, Any]], names: dict[str, str]) -> list[Adjuster]:
    return [Adjuster(tools=tuple(names.get(t, t) for t in a["tools"]),
                     actions=tuple(a["actions"]), when=tuple(Condition(**c) for c in a["when"]),
                     raise_to=a["raise_to"], raise_by=a["raise_by"]) for a in raw]


def build(gw: Gateway, w: dict[str, Any], mint: Mint | None = None) -> Env:
    """Register ``w`` in two fresh tenants (the agent's and a foreign one) and fresh global
    names; the agent ``bot`` of the first, with a token (an OAuth one from ``mint`` when the
    world draws token scopes)."""
    n = next(_TENANTS)
    tenant, other = f"w{n}", f"w{n}x"
    names = {f"{kind}{i}": (f"{kind}{i}" if kind != GLOBAL else f"g{n}n{i}")
             for kind in (LOCAL, GLOBAL, FOREIGN) for i in range(len(FOCUS) + 4)}
    with gw.changes_batch():  # one reload for the whole world
        env = _build(gw, w, tenant, other, names)
    if mint is not None and w.get("token_scopes") is not None:
        env.token_scopes = frozenset(w["token_scopes"])
        env.token = mint(tenant, env.agent, env.token_scopes)
    return env


def _build(gw: Gateway, w: dict[str, Any], tenant: str, other: str,
           names: dict[str, str]) -> Env:
    acts: list[Activation] = []
    env = Env(gw=gw, tenant=tenant, agent="bot", token="", candidates=[], health={})
    tools = {LOCAL: [{"spec": s, "act": a} for s, a in w["local"]] + list(w["focus"]),
             GLOBAL: [{"spec": s, "act": a} for s, a in w["global"]],
             FOREIGN: [{"spec": s, "act": a} for s, a in w["foreign"]]}
    tenant_adj, profile_adj = list(w["tenant_adjusters"]), list(w["profile_adjusters"])
    deny_cell: dict[Risk, dict[int, Gate]] = {}
    for kind, owner in ((LOCAL, tenant), (GLOBAL, None), (FOREIGN, other)):
        for i, tool in enumerate(tools[kind]):
            name, spec, act = names[f"{kind}{i}"], tool["spec"], tool["act"]
            actions = list(spec["actions"])
            if "older" in tool:  # 1.0.0 pinned, 2.0.0 newer with other actions
                env.definitions[name] = _register(gw, owner, name, tool["older"])
                _register(gw, owner, name, spec, version="2.0.0", replace=True)
                actions += [a for a in tool["older"]["actions"] if a not in actions]
            else:
                env.definitions[name] = _register(gw, owner, name, spec)
            absent = [a for a in ACTIONS if a not in actions][:1]
            env.candidates += [(name, a) for a in (*actions, *absent)]
            if kind != FOREIGN:
                _set_health(gw, f"{tenant}:{name}", spec["health"])
                env.health[name] = spec["health"]
            if act is not None:
                acts.append(_activation(name, act))
            if "adjuster" in tool:  # raised to critical, where this world's autonomy denies
                adj = {k: v for k, v in tool["adjuster"].items() if k != "where"}
                adj["when"] = [{**c, "value": w["autonomy"]} if c.get("value") == "AUTONOMY"
                               else c for c in adj["when"]]
                (tenant_adj if tool["adjuster"]["where"] == "tenant" else profile_adj).append(
                    {**adj, "tools": [name]})
                deny_cell = {Risk.CRITICAL: {w["autonomy"]: Gate.DENY}}
    gw.registry.set_tenant_policy(tenant, gates={
        r.value: {str(a): g.value for a, g in row.items()} for r, row in w["tenant_gates"].items()},
        adjusters=[a.model_dump(mode="json") for a in _adjusters(tenant_adj, names)])
    cells = {r: dict(row) for r, row in w["profile_gates"].items()}
    for r, row in deny_cell.items():
        cells.setdefault(r, {}).update(row)
    profile = Profile(name="p", tenant_id=tenant, autonomy=w["autonomy"],
                      scopes=(*w["scopes"], *([PROFILE_ONLY] if "token_scopes" in w else [])),
                      activations=tuple(acts), gates=cells,
                      adjusters=tuple(_adjusters(profile_adj, names)))
    if not w["profile_missing"]:
        try:
            gw.registry.put_profile(profile)
        except OperationRefused:  # a profile cell looser than the tenant's: without them
            gw.registry.put_profile(Profile(**{**dict(profile), "gates": deny_cell}))
    gw.registry.put_agent(Agent(name="bot", profile="p", tenant_id=tenant))
    env.token = gw.store.tokens.create(tenant_id=tenant, role="agent", agent="bot")[1]
    return env


def library_listed(env: Env) -> set[tuple[str, str]]:
    """The library's listing (both tiers, which must agree)."""
    gw = env.gw
    view = agent_enabled(gw.catalog, gw.runtime.health, env.tenant, env.agent,
                         env.token_scopes)
    full = agent_tools(gw.catalog, gw.runtime.health, env.tenant, env.agent, env.token_scopes)
    assert view is not None and full is not None
    if view[1] != full.enabled:
        raise Counterexample("the two tiers of the listing differ: "
                             f"{[(t.definition.name, t.actions) for t in view[1]]} / "
                             f"{[(t.definition.name, t.actions) for t in full.enabled]}")
    return {(t.definition.name, a) for t in view[1] for a in t.actions}


class Face(Protocol):
    name: str

    def listed(self, env: Env) -> set[tuple[str, str]]: ...

    def call(self, env: Env, tool: str, action: str) -> str: ...


class LibraryFace:
    name = "library"

    def listed(self, env: Env) -> set[tuple[str, str]]:
        return library_listed(env)

    def call(self, env: Env, tool: str, action: str) -> str:
        who = Principal(name=env.agent, tenant_id=env.tenant, roles=frozenset({Role.AGENT}),
                        agent=env.agent, scopes=env.token_scopes)
        res = env.gw.call_sync(tool, action, {}, principal=who)
        return str(res.reason or res.status.value)


@dataclass
class RestFace:
    """``GET /discovery/agents/{agent}/enabled`` and ``POST /tools/execute`` with the
    agent's token, through the real app (``client``: a started ``TestClient``)."""

    client: Any
    name: str = "rest"

    def _auth(self, env: Env) -> dict[str, str]:
        return {"Authorization": f"Bearer {env.token}"}

    def listed(self, env: Env) -> set[tuple[str, str]]:
        resp = self.client.get(f"/discovery/agents/{env.agent}/enabled", headers=self._auth(env))
        assert resp.status_code == 200, resp.text
        return {(t["name"], a) for t in resp.json()["tools"] for a in t["actions"]}

    def call(self, env: Env, tool: str, action: str) -> str:
        resp = self.client.post("/tools/execute", headers=self._auth(env), json={
            "tool": tool, "action": action, "arguments": {}})
        body = resp.json()
        if "error" in body:  # refused before the pipeline's answer (e.g. no such tool)
            return str(body["error"]["reason"])
        return str(body.get("reason") or body.get("status"))


MCP_V = "2026-07-28"
_META = {"io.modelcontextprotocol/protocolVersion": MCP_V,
         "io.modelcontextprotocol/clientCapabilities": {}}


@dataclass
class McpFace:
    """``tools/list`` and ``tools/call`` on the app's real ``/mcp`` endpoint (stateless
    2026-07-28 era, JSON-RPC as a client sends it), with the agent's token."""

    client: Any
    name: str = "mcp"

    def _post(self, env: Env, method: str, params: dict[str, Any]) -> dict[str, Any]:
        headers = {"Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json", "MCP-Protocol-Version": MCP_V,
                   "Authorization": f"Bearer {env.token}", "Mcp-Method": method}
        if "name" in params:
            headers["Mcp-Name"] = params["name"]
        body = {"jsonrpc": "2.0", "id": 1, "method": method,
                "params": {"_meta": _META, **params}}
        resp = self.client.post("/mcp", content=json.dumps(body), headers=headers)
        return dict(resp.json())

    @staticmethod
    def names(env: Env) -> dict[str, tuple[str, str]]:
        out = {}
        for tool, action in env.candidates:
            d = env.definitions[tool]
            out[mcp_name(d, action) if action in d.actions else f"{tool}_{action}"] = (
                tool, action)
        return out

    def listed(self, env: Env) -> set[tuple[str, str]]:
        reply = self._post(env, "tools/list", {})
        names = self.names(env)
        found = [t["name"] for t in reply["result"]["tools"]]
        if any(n not in names for n in found):
            raise Counterexample(f"MCP lists tools no candidate names: {found}")
        return {names[n] for n in found}

    def call(self, env: Env, tool: str, action: str) -> str:
        name = next(n for n, c in self.names(env).items() if c == (tool, action))
        reply = self._post(env, "tools/call", {"name": name, "arguments": {}})
        if "error" in reply:
            if reply["error"]["message"].startswith("scope_missing:"):
                return Reason.SCOPE_MISSING.value  # the step-up challenge (HTTP 403)
            assert reply["error"]["message"].startswith("Unknown tool"), reply
            return UNKNOWN_TOOL
        result = reply["result"]
        if not result.get("isError"):
            return "succeeded"
        return str(result["structuredContent"].get("reason"))


def label(env: Env, tool: str, action: str, outcome: str) -> str:
    """The outcome class of one call: allowed, or which rule refused it."""
    if outcome not in REFLECTED:
        return "allowed"
    if outcome == UNKNOWN_TOOL:  # MCP refused the name: the pipeline must refuse it too
        behind = LibraryFace().call(env, tool, action)
        if behind not in REFLECTED:
            raise Counterexample(f"mcp: {tool}.{action} is an unknown tool, and the pipeline "
                                 f"answers {behind}")
        return label(env, tool, action, behind)
    if outcome == Reason.GATE_DENIED.value:
        cat = env.gw.catalog
        profile = cat.profiles.get((env.tenant, "p"))
        act = profile.activations.get(tool) if profile else None
        compiled = cat.runnable(env.tenant, tool, act.version if act else None)
        if profile is None or compiled is None:  # ran what does not resolve (a broken rule)
            return "gate"
        own = gate_for(profile, compiled, action, compiled.definition.action_risk(action))
        return "gate" if own is Gate.DENY else "adjusters"
    return LABELS.get(Reason(outcome), "other")


def _same_listing(env: Env, face: Face) -> set[tuple[str, str]]:
    expected = library_listed(env)
    listed = face.listed(env)
    if face.name != "library" and listed != expected:
        raise Counterexample(f"{face.name} lists {sorted(listed)}, the library "
                             f"{sorted(expected)}")
    return listed


def check(env: Env, face: Face, tally: Counter[str]) -> None:
    """Listed ⇔ not refused for a reflected reason, for every candidate call of ``env``
    through ``face``; a face other than the library must also list what the library does.
    Then a listed tool's breaker opens: every face's listing must drop it at once."""
    listed = _same_listing(env, face)
    for tool, action in env.candidates:
        state = env.health.get(tool, "healthy")
        outcome = face.call(env, tool, action)
        kind = label(env, tool, action, outcome)
        tally[kind] += 1
        event(f"{face.name}: {kind}")
        if state == "half_open" and kind == "allowed":
            tally["half_open_admitted"] += 1
        if ((tool, action) in listed) == (outcome in REFLECTED):
            raise Counterexample(
                f"{face.name}: {tool}.{action} {'is' if (tool, action) in listed else 'is not'}"
                f" listed, and the call answers {outcome} (health {state})")
    _open_a_breaker(env, face, listed)


def _open_a_breaker(env: Env, face: Face, before: set[tuple[str, str]]) -> None:
    """After the calls: open the breaker of the first listed tool; it must leave the
    listing (no face may serve a listing cached across a health change) and be refused."""
    if not before:
        return
    tool, action = min(before)
    env.gw.runtime.health.set(f"{env.tenant}:{tool}", Health.UNAVAILABLE, retry_after_s=3600)
    after = _same_listing(env, face)
    if any(t == tool for t, _ in after):
        raise Counterexample(f"{face.name}: {tool} is still listed once its circuit opened")
    outcome = face.call(env, tool, action)
    if outcome != Reason.TOOL_UNAVAILABLE.value and outcome != UNKNOWN_TOOL:
        raise Counterexample(f"{face.name}: {tool}.{action} answers {outcome} once its "
                             "circuit opened")


def shares(tally: Counter[str]) -> dict[str, float]:
    calls = sum(v for k, v in tally.items() if k != "half_open_admitted")
    return {k: v / calls for k, v in sorted(tally.items())} if calls else {}


def describe(tally: Counter[str]) -> str:
    return ", ".join(f"{k} {v:.1%}" for k, v in shares(tally).items())


def run_property(gw: Gateway, face: Face, *, examples: int, shrink: bool = True,
                 mint: Mint | None = None) -> Counter[str]:
    """Run the property over ``examples`` generated worlds through ``face``
    (derandomized: the same worlds every run); the outcome classes' counts. A
    :class:`Counterexample` propagates (hypothesis's falsifying example)."""
    tally: Counter[str] = Counter()
    phases = [Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])]

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              phases=phases, report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck))
    @given(w=world)
    def prop(w: dict[str, Any]) -> None:
        check(build(gw, w), face, tally)

    # the derandomized worlds follow the function's source: the one above is unchanged,
    # so the mutant search keeps its worlds
    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              phases=phases, report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck))
    @given(w=oauth_world)
    def oauth_prop(w: dict[str, Any]) -> None:
        check(build(gw, w, mint), face, tally)

    (prop if mint is None else oauth_prop)()
    return tally
