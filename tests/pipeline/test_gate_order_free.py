"""SPEC §2: "order of policy statements does not matter". The same tenant, profile and
activation statements written in another order give every call the same decision."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.pipeline.sample_tools import Payments
from toolkeeper import Activation, Agent, Autonomy, Gate, Gateway, Profile, Risk
from toolkeeper.errors import OperationRefused
from toolkeeper.model.gates import combine

RISKS, GATES = list(Risk), list(Gate)
ACTIONS = ("pay", "refund")
PAY = {"invoice": "inv-1", "amount": 5}

cells = st.tuples(st.sampled_from(RISKS), st.sampled_from(list(Autonomy)),
                  st.sampled_from(GATES))
layer = st.lists(cells, max_size=5)
activation = st.fixed_dictionaries({
    "gates": st.dictionaries(st.sampled_from(ACTIONS), st.sampled_from(GATES)),
    "requires_confirmation": st.sampled_from([None, False, True])})


@settings(max_examples=300, deadline=None)
@given(tenant=layer, below=st.lists(layer, max_size=3), data=st.data())
def test_combining_gate_layers_ignores_the_order_of_statements(
        tenant: list[Any], below: list[list[Any]], data: st.DataObject) -> None:
    shuffled_tenant = data.draw(st.permutations(tenant))
    shuffled_below = [data.draw(st.permutations(b)) for b in data.draw(st.permutations(below))]
    flat = [s for b in below for s in b]
    assert combine(tenant, *below) == combine(shuffled_tenant, *shuffled_below) == \
        combine(tenant, flat)


def _nested(statements: list[tuple[Risk, Autonomy, Gate]]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for risk, autonomy, gate in statements:  # one statement per cell: the first one
        out.setdefault(risk.value, {}).setdefault(str(int(autonomy)), gate.value)
    return out


def _reordered(nested: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {r: dict(reversed(row.items())) for r, row in reversed(nested.items())}


def _write(gw: Gateway, tenant: str, autonomy: Autonomy, tenant_gates: dict[str, Any],
           profile_gates: dict[str, Any], acts: list[Activation]) -> str | None:
    gw.registry.set_tenant_policy(tenant, gates=tenant_gates)
    try:
        gw.registry.put_profile(Profile.model_validate({
            "name": "p", "tenant_id": tenant, "autonomy": autonomy, "scopes": ["payments"],
            "gates": profile_gates, "activations": acts}))
    except OperationRefused as exc:
        return str(exc.reason)
    return None


def _decisions(gw: Gateway, tenant: str) -> list[tuple[str, str | None, Gate | None]]:
    out = []
    for action in ACTIONS:
        res = gw.call_sync("payments", action, PAY, agent="bot", tenant_id=tenant)
        out.append((res.status.value, res.reason, res.gate))
    return out


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path: Path = tmp_path_factory.mktemp("order") / "order.db"
    gateway = Gateway.open(f"sqlite:///{path}")
    gateway.registry.register(Payments)  # a global tool: both tenants see it
    for tenant in ("ta", "tb"):
        gateway.registry.put_profile(Profile(name="p", tenant_id=tenant))
        gateway.registry.put_agent(Agent(name="bot", profile="p", tenant_id=tenant))
    yield gateway
    gateway.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(autonomy=st.sampled_from(list(Autonomy)), tenant=layer, profile=layer,
       acts=st.lists(activation, min_size=1, max_size=3), data=st.data())
def test_permuting_statements_never_changes_a_decision(
        gw: Gateway, autonomy: Autonomy, tenant: list[Any], profile: list[Any],
        acts: list[dict[str, Any]], data: st.DataObject) -> None:
    written = [Activation(tool="payments", **a) for a in acts]
    permuted = [Activation(tool="payments", gates=dict(reversed(a.gates.items())),
                           requires_confirmation=a.requires_confirmation)
                for a in data.draw(st.permutations(written))]
    refused_a = _write(gw, "ta", autonomy, _nested(tenant), _nested(profile), written)
    refused_b = _write(gw, "tb", autonomy, _reordered(_nested(tenant)),
                       _reordered(_nested(profile)), permuted)
    assert refused_a == refused_b
    if refused_a is None:
        assert _decisions(gw, "ta") == _decisions(gw, "tb")
