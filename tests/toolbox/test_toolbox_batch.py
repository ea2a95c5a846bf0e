"""SPEC §5 through the Toolbox: a sequential batch's saga (stop, roll back completed
compensatable calls) follows each call's ``critical`` flag; without a flag, its risk."""

from __future__ import annotations

from typing import Any

from tests.pipeline.gw_helpers import update_profile
from tests.pipeline.sample_tools import Payments, add, broken, charge
from tests.toolbox.conftest import gateway_of
from toolkeeper import (
    Activation,
    Adjuster,
    CallRequest,
    CallStatus,
    Condition,
    Reason,
    Risk,
)


def _pay(invoice: str, **kw: Any) -> dict[str, Any]:
    return {"tool": "payments", "action": "pay",
            "arguments": {"invoice": invoice, "amount": 1}, **kw}


async def test_a_failed_call_flagged_critical_rolls_the_batch_back(make_box: Any,
                                                                   ledger: Any) -> None:
    box = make_box(tools=[Payments, broken], autonomy=3, scopes=("payments",))
    results = await box.execute_batch(
        [_pay("a"), _pay("b"), {"tool": "broken", "arguments": {"x": 1}, "critical": True},
         _pay("c")], mode="sequential")
    assert [r.status for r in results] == [CallStatus.COMPENSATED, CallStatus.COMPENSATED,
                                           CallStatus.FAILED, CallStatus.DENIED]
    assert results[3].reason == Reason.BATCH_ABORTED
    assert ledger["refunds"] == ["b", "a"] and ledger["payments"] == ["a", "b"]


async def test_a_failed_low_risk_call_without_the_flag_does_not_stop_it(make_box: Any,
                                                                        ledger: Any) -> None:
    box = make_box(tools=[Payments, broken], autonomy=3, scopes=("payments",))
    results = await box.execute_batch(
        [_pay("a"), CallRequest(tool="broken", arguments={"x": 1}), _pay("c")])
    assert [r.status for r in results] == [CallStatus.SUCCEEDED, CallStatus.FAILED,
                                           CallStatus.SUCCEEDED]
    assert ledger["refunds"] == [] and ledger["payments"] == ["a", "c"]


async def test_a_critical_risk_call_flagged_not_critical_does_not_roll_back(
        make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[Payments, broken], autonomy=3, scopes=("payments",))
    gw = gateway_of(box)
    gw.registry.set_tenant_policy("default", gates={"critical": {"3": "allow"}})
    update_profile(
        gw, activations=[Activation(tool="payments"), Activation(tool="broken")],
        adjusters=[Adjuster(tools=("broken",), when=(Condition(arg="x", op="gt", value=0),),
                            raise_to=Risk.CRITICAL)])
    flagged = await box.execute_batch(
        [_pay("a"), CallRequest(tool="broken", arguments={"x": 1}, critical=False), _pay("c")])
    assert flagged[1].risk is Risk.CRITICAL
    assert [r.status for r in flagged] == [CallStatus.SUCCEEDED, CallStatus.FAILED,
                                           CallStatus.SUCCEEDED]
    unflagged = await box.execute_batch(
        [_pay("d"), CallRequest(tool="broken", arguments={"x": 1}), _pay("e")])
    assert [r.status for r in unflagged] == [CallStatus.COMPENSATED, CallStatus.FAILED,
                                             CallStatus.DENIED]
    assert ledger["payments"] == ["a", "c", "d"] and ledger["refunds"] == ["d"]


async def test_batch_calls_in_a_turn_carry_its_id(make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[charge])
    call = {"tool": "charge", "arguments": {"invoice": "a", "amount": 1}}
    async with box.turn("turn-b") as turn:
        (first,) = await box.execute_batch([call], mode="parallel_safe")
        (again,) = await turn.execute_batch([call])
        await turn.supersede()
        (late,) = await box.execute_batch([{**call, "arguments": {"invoice": "b", "amount": 1}}])
    assert first.ok and again.deduped  # same turn, same call: one outcome
    assert late.reason == Reason.SUPERSEDED and ledger["payments"] == ["a"]


def test_execute_batch_sync(make_box: Any) -> None:
    box = make_box(tools=[add])
    (res,) = box.execute_batch_sync([{"tool": "add", "arguments": {"a": 2, "b": 2}}])
    assert res.output == 4
