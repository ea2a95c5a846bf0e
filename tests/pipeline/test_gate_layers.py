"""SPEC §2 "explicit deny wins, order of statements does not matter", layer pair by layer
pair: the tenant replaces cells of the default matrix; profiles and activations below it
only make a gate stricter; a ``deny`` anywhere wins whatever the order."""

from __future__ import annotations

from typing import Any

import pytest

from tests.pipeline.gw_helpers import update_profile
from tests.pipeline.sample_tools import Payments
from toolkeeper import Activation, CallStatus, Gate, Reason, Risk
from toolkeeper.errors import OperationRefused
from toolkeeper.services.discovery import agent_enabled

PAY = {"invoice": "inv-1", "amount": 5}
# Payments: pay is high risk, refund low; both need the "payments" scope


def _gw(make_gateway: Any, autonomy: int, *activations: Activation) -> Any:
    return make_gateway(tools=[Payments], autonomy=autonomy, scopes=("payments",),
                        activations=activations or (Activation(tool="payments"),))


def _pay(gw: Any) -> Any:
    return gw.call_sync("payments", "pay", PAY, agent="bot")


def _listed_actions(gw: Any) -> tuple[str, ...]:
    view = agent_enabled(gw.catalog, gw.runtime.health, "default", "bot")
    assert view is not None
    return next((t.actions for t in view[1] if t.definition.name == "payments"), ())


# tenant x profile ------------------------------------------------------------------------

def test_a_profile_cell_cannot_undo_the_tenants_deny(make_gateway: Any) -> None:
    gw = _gw(make_gateway, 3)
    gw.registry.set_tenant_policy("default", gates={"high": {"3": "deny"}})
    with pytest.raises(OperationRefused) as err:
        update_profile(gw, gates={Risk.HIGH: {3: Gate.ALLOW}})
    assert err.value.reason == Reason.CONFIG_INVALID
    assert "gates.high.3 = allow is looser than deny, the tenant's matrix there" in \
        err.value.message
    assert "tenant's gates" in err.value.message
    assert _pay(gw).reason == Reason.GATE_DENIED
    assert _listed_actions(gw) == ("refund",)


def test_the_tenant_may_loosen_the_default_and_a_profile_may_tighten_it_again(
        make_gateway: Any) -> None:
    gw = _gw(make_gateway, 2)  # high at autonomy 2 is preview by default
    gw.registry.set_tenant_policy("default", gates={"high": {"2": "allow"}})
    assert _pay(gw).ok
    update_profile(gw, gates={Risk.HIGH: {2: Gate.DENY}})
    assert _pay(gw).reason == Reason.GATE_DENIED


def test_a_profile_cell_the_tenant_later_tightens_past_is_a_no_op_not_an_undo(
        make_gateway: Any) -> None:
    gw = _gw(make_gateway, 2)
    update_profile(gw, gates={Risk.HIGH: {2: Gate.CONFIRM}})  # tighter than preview: fine
    gw.registry.set_tenant_policy("default", gates={"high": {"2": "deny"}})
    assert _pay(gw).reason == Reason.GATE_DENIED  # the tenant's deny, written later, wins
    gw.registry.set_tenant_policy("default", gates={"high": {"2": "approve"}})
    assert _pay(gw).status is CallStatus.APPROVAL_REQUIRED  # confirm does not loosen it
    gw.registry.set_tenant_policy("default", gates={"high": {"2": "allow"}})
    assert _pay(gw).status is CallStatus.CONFIRMATION_REQUIRED  # the profile's own cell


# tenant x activation ---------------------------------------------------------------------

def test_an_activation_cannot_undo_the_tenants_deny(make_gateway: Any) -> None:
    gw = _gw(make_gateway, 3, Activation(tool="payments", gates={"pay": Gate.ALLOW}))
    gw.registry.set_tenant_policy("default", gates={"high": {"3": "deny"}})
    assert _pay(gw).reason == Reason.GATE_DENIED
    assert _listed_actions(gw) == ("refund",)


def test_an_activation_deny_wins_over_a_tenant_that_loosened_the_cell(
        make_gateway: Any) -> None:
    gw = _gw(make_gateway, 1, Activation(tool="payments", gates={"pay": Gate.DENY}))
    gw.registry.set_tenant_policy("default", gates={"high": {"1": "allow"}})
    assert _pay(gw).reason == Reason.GATE_DENIED
    assert _listed_actions(gw) == ("refund",)


# profile x activation --------------------------------------------------------------------

def test_an_activation_cannot_undo_the_profiles_deny(make_gateway: Any) -> None:
    gw = _gw(make_gateway, 3, Activation(tool="payments", gates={"pay": Gate.ALLOW}))
    update_profile(gw, gates={Risk.HIGH: {3: Gate.DENY}})
    assert _pay(gw).reason == Reason.GATE_DENIED


def test_an_activation_deny_wins_over_the_profiles_cell(make_gateway: Any) -> None:
    gw = _gw(make_gateway, 3, Activation(tool="payments", gates={"pay": Gate.DENY}))
    update_profile(gw, gates={Risk.HIGH: {3: Gate.CONFIRM}})
    assert _pay(gw).reason == Reason.GATE_DENIED
    assert _listed_actions(gw) == ("refund",)


# within one layer ------------------------------------------------------------------------

@pytest.mark.parametrize("deny_first", [True, False])
def test_two_activations_of_one_tool_take_the_strictest_gate_in_any_order(
        make_gateway: Any, deny_first: bool) -> None:
    deny = Activation(tool="payments", gates={"pay": Gate.DENY})
    allow = Activation(tool="payments", gates={"pay": Gate.ALLOW, "refund": Gate.CONFIRM})
    gw = _gw(make_gateway, 3, *((deny, allow) if deny_first else (allow, deny)))
    assert _pay(gw).reason == Reason.GATE_DENIED
    refund = gw.call_sync("payments", "refund", PAY, agent="bot")
    assert refund.status is CallStatus.CONFIRMATION_REQUIRED
    assert _listed_actions(gw) == ("refund",)


def test_two_activations_of_one_tool_that_disagree_beyond_gates_are_refused(
        make_gateway: Any) -> None:
    gw = _gw(make_gateway, 3)
    with pytest.raises(OperationRefused) as err:
        update_profile(gw, activations=[Activation(tool="payments", actions=("pay",)),
                                        Activation(tool="payments")])
    assert err.value.reason == Reason.CONFIG_INVALID
    assert "activates 'payments' twice with different actions" in err.value.message
    assert _pay(gw).ok  # the stored profile is unchanged


def test_the_library_listing_carries_each_callable_actions_input_schema(
        make_gateway: Any) -> None:
    gw = _gw(make_gateway, 3, Activation(tool="payments", gates={"pay": Gate.DENY}))
    view = agent_enabled(gw.catalog, gw.runtime.health, "default", "bot")
    assert view is not None
    (payments,) = view[1]
    schemas = payments.input_schemas()
    assert schemas.keys() == {"refund"}  # pay is denied: neither listed nor described
    assert schemas["refund"]["required"] == ["invoice", "amount"]
