"""SPEC §2: what an agent can see and what it can call are decided by the same policy. Over
random tools, profiles, activations, tenant matrices and gate overrides, an action is
listed as callable iff a call with valid arguments gets past every step up to the gate
without a resolve reason, ``scope_missing`` or ``gate_denied``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkeeper import (
    ActionSpec,
    Activation,
    Agent,
    Autonomy,
    BaseTool,
    Gate,
    Gateway,
    Mode,
    Profile,
    Reason,
    Risk,
    SideEffect,
    ToolStatus,
)
from toolkeeper.errors import OperationRefused
from toolkeeper.services.discovery import agent_enabled, agent_tools

EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}
ACTIONS = ("a", "b")
SCOPES = ("s1", "s2")
RESOLVE_REASONS = {Reason.TOOL_NOT_FOUND, Reason.TOOL_DISABLED, Reason.TOOL_NOT_PUBLISHED,
                   Reason.TOOL_QUARANTINED, Reason.TOOL_NOT_ENABLED, Reason.ACTION_NOT_FOUND,
                   Reason.ACTION_NOT_ALLOWED, Reason.POLICY_EXCEEDS_BOUNDS,
                   Reason.CONFIG_INVALID}
NOT_CALLABLE = {*RESOLVE_REASONS, Reason.SCOPE_MISSING, Reason.GATE_DENIED}


class Probe(BaseTool):
    """A pure two-action tool whose definition each example rewrites."""

    tool_name = "probe"
    actions: ClassVar[dict[str, ActionSpec]] = {a: ActionSpec(input_schema=EMPTY)
                                                for a in ACTIONS}
    side_effect = SideEffect.PURE

    async def execute(self, action: str, request: dict[str, Any], context: Any) -> Any:
        return action


subsets = st.lists(st.sampled_from(ACTIONS), unique=True, max_size=2)
gates = st.dictionaries(st.sampled_from(list(Risk)), st.dictionaries(
    st.sampled_from(list(Autonomy)), st.sampled_from(list(Gate)), max_size=3), max_size=3)
tool = st.fixed_dictionaries({
    "actions": st.lists(st.sampled_from(ACTIONS), unique=True, min_size=1, max_size=2),
    "risks": st.dictionaries(st.sampled_from(ACTIONS), st.sampled_from(list(Risk))),
    "scopes": st.dictionaries(st.sampled_from(ACTIONS),
                              st.lists(st.sampled_from(SCOPES), unique=True, max_size=2)),
    "requires_confirmation": st.booleans(),
    "status": st.sampled_from([ToolStatus.PUBLISHED, ToolStatus.PUBLISHED, ToolStatus.DRAFT,
                               ToolStatus.DEPRECATED, ToolStatus.DISABLED,
                               ToolStatus.QUARANTINED]),
    "is_active": st.sampled_from([True, True, True, False]),
})
activation = st.none() | st.fixed_dictionaries({
    "actions": st.none() | subsets.map(tuple),
    "allowed": st.none() | subsets.map(tuple),
    "gates": st.dictionaries(st.sampled_from(ACTIONS), st.sampled_from(list(Gate))),
    "requires_confirmation": st.sampled_from([None, False, True]),
    "version": st.sampled_from([None, None, "1.0.0", "9.0.0"]),
    "enabled": st.sampled_from([True, True, False]),
})
world = st.fixed_dictionaries({
    "tools": st.lists(st.tuples(tool, activation), min_size=1, max_size=3),
    "tenant_gates": gates, "profile_gates": gates,
    "autonomy": st.sampled_from(list(Autonomy)),
    "scopes": st.lists(st.sampled_from(SCOPES), unique=True, max_size=2),
})


def _register(gw: Gateway, tenant: str, name: str, spec: dict[str, Any]) -> None:
    actions = {a: ActionSpec(input_schema=EMPTY,
                             scopes_required=tuple(spec["scopes"].get(a, ())))
               for a in spec["actions"]}
    draft = spec["status"] is ToolStatus.DRAFT
    gw.registry.register(Probe, tenant_id=tenant, publish=not draft, name=name,
                         actions=actions, is_active=spec["is_active"],
                         risk_map={a: r for a, r in spec["risks"].items() if a in actions},
                         requires_confirmation=spec["requires_confirmation"])
    if not draft and spec["status"] is not ToolStatus.PUBLISHED:
        gw.registry.set_status(name, tenant, spec["status"])


def _activation(name: str, act: dict[str, Any]) -> Activation:
    policy = {"allowed_actions": list(act["allowed"])} if act["allowed"] is not None else {}
    return Activation(tool=name, actions=act["actions"], policy=policy, gates=act["gates"],
                      requires_confirmation=act["requires_confirmation"],
                      version=act["version"], enabled=act["enabled"])


def _build(gw: Gateway, tenant: str, w: dict[str, Any]) -> list[tuple[str, str]]:
    gw.registry.set_tenant_policy(tenant, gates={
        r.value: {str(int(a)): g.value for a, g in row.items()}
        for r, row in w["tenant_gates"].items()})
    acts = []
    for i, (spec, act) in enumerate(w["tools"]):
        _register(gw, tenant, f"t{i}", spec)
        if act is not None:
            acts.append(_activation(f"t{i}", act))
    profile = Profile(name="p", tenant_id=tenant, autonomy=w["autonomy"],
                      scopes=tuple(w["scopes"]), activations=tuple(acts),
                      gates=w["profile_gates"])
    try:
        gw.registry.put_profile(profile)
    except OperationRefused:  # a profile cell looser than the tenant's: written without
        gw.registry.put_profile(profile.model_copy(update={"gates": {}}))
    gw.registry.put_agent(Agent(name="bot", profile="p", tenant_id=tenant))
    return [(f"t{i}", a) for i, (spec, _) in enumerate(w["tools"]) for a in ACTIONS]


@pytest.fixture(scope="module", params=[Mode.PRODUCTION, Mode.DEBUG], ids=str)
def gw(request: pytest.FixtureRequest,
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("listed") / "listed.db"
    gateway = Gateway.open(f"sqlite:///{path}", mode=request.param)
    yield gateway
    gateway.close()


@pytest.fixture(scope="module")
def tenants() -> Iterator[str]:
    return (f"w{n}" for n in itertools.count())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=world)
def test_an_action_is_listed_iff_a_call_gets_past_the_policy_steps(
        gw: Gateway, tenants: Iterator[str], w: dict[str, Any]) -> None:
    tenant = next(tenants)
    candidates = _build(gw, tenant, w)
    view = agent_enabled(gw.catalog, gw.runtime.health, tenant, "bot")
    full = agent_tools(gw.catalog, gw.runtime.health, tenant, "bot")
    assert view is not None and full is not None
    assert view[1] == full.enabled  # both tiers of the listing agree
    listed = {(t.definition.name, a) for t in view[1] for a in t.actions}
    for name, action in candidates:
        res = gw.call_sync(name, action, {}, agent="bot", tenant_id=tenant)
        assert res.reason != Reason.INVALID_ARGUMENTS, res
        callable_ = res.reason not in NOT_CALLABLE
        assert ((name, action) in listed) == callable_, (name, action, res.reason, res.message)
