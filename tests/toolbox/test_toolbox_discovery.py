"""Seed 004 §3-4: the Toolbox knows what its agent may call (with each action's schema),
what it could have and why not, and each enabled tool's semantics."""

from __future__ import annotations

from typing import Any

import pytest

from tests.pipeline.sample_tools import Email, Payments, add, charge
from tests.toolbox.conftest import gateway_of
from toolkeeper import Activation, OperationRefused, Reason, Risk, SideEffect, ToolStatus
from toolkeeper.toolbox import InProcessBackend, Toolbox


async def test_enabled_lists_callable_tools_with_their_schemas(make_box: Any) -> None:
    box = make_box(tools=[add, Payments], scopes=("payments",))
    tools = {t.name: t for t in await box.enabled()}
    assert set(tools) == {"add", "payments"}
    assert tools["add"].actions == ("run",) and tools["add"].names == {"run": "add"}
    assert tools["add"].input_schemas["run"]["required"] == ["a", "b"]
    pay = tools["payments"]
    assert pay.actions == ("pay", "refund")
    assert pay.names == {"pay": "payments_pay", "refund": "payments_refund"}
    assert pay.input_schemas["pay"] == Payments.actions["pay"].input_schema  # unchanged


async def test_enabled_shows_only_the_actions_the_profile_activates(make_box: Any) -> None:
    box = make_box(tools=[Payments], scopes=("payments",),
                   activations=(Activation(tool="payments", actions=("refund",)),))
    (pay,) = await box.enabled()
    assert pay.actions == ("refund",) and set(pay.input_schemas) == {"refund"}


async def test_unavailable_says_why(make_box: Any) -> None:
    box = make_box(tools=[add, Payments])  # payments needs the scope the profile lacks
    assert [t.name for t in await box.enabled()] == ["add"]
    (item,) = await box.unavailable()
    assert (item.name, item.why_unavailable) == ("payments", "scope_missing")
    assert item.missing_scopes == ("payments",) and "payments" in item.message


async def test_quarantined_tool_is_unavailable_and_has_no_metadata(make_box: Any) -> None:
    box = make_box(tools=[add, charge])
    assert await box.metadata("charge") is not None
    gateway_of(box).registry.set_status("charge", None, ToolStatus.QUARANTINED)
    why = {t.name: t.why_unavailable for t in await box.unavailable()}
    assert why == {"charge": "quarantined"}
    assert [t.name for t in await box.enabled()] == ["add"]
    assert await box.metadata("charge") is None


async def test_metadata_carries_side_effects_risk_and_compensation(make_box: Any) -> None:
    box = make_box(tools=[Payments, Email], scopes=("payments",))
    meta = await box.metadata("payments")
    assert meta is not None
    assert meta.side_effects == {"pay": SideEffect.COMPENSATABLE,
                                 "refund": SideEffect.IDEMPOTENT}
    assert meta.risks == {"pay": Risk.HIGH, "refund": Risk.LOW} and meta.risk is Risk.HIGH
    assert meta.side_effect is SideEffect.COMPENSATABLE and not meta.is_irreversible
    assert meta.compensation["pay"].action == "refund"
    email = await box.metadata("email")
    assert email is not None and email.is_irreversible and not email.is_safe_to_retry
    assert not email.requires_confirmation and email.compensation == {}


async def test_metadata_of_a_tool_the_agent_may_not_call_is_none(make_box: Any) -> None:
    box = make_box(tools=[add, Payments])  # no payments scope
    assert await box.metadata("payments") is None
    assert await box.metadata("no_such_tool") is None


async def test_an_unknown_agent_is_not_found(make_box: Any) -> None:
    box = make_box(tools=[add])
    ghost = Toolbox(InProcessBackend(gateway_of(box)), agent="ghost")
    with pytest.raises(OperationRefused) as err:
        await ghost.enabled()
    assert err.value.reason == Reason.NOT_FOUND
    with pytest.raises(OperationRefused):
        await ghost.unavailable()


def test_sync_twins_answer_the_same(make_box: Any) -> None:
    box = make_box(tools=[add, Payments])
    assert [t.name for t in box.enabled_sync()] == ["add"]
    assert [t.name for t in box.unavailable_sync()] == ["payments"]
    meta = box.metadata_sync("add")
    assert meta is not None and meta.side_effect is SideEffect.PURE and meta.is_safe_to_retry
