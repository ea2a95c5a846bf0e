"""Calls through a Toolbox: allowed, denied and malformed calls come back as results (never
raised), an approval resolved through the Toolbox lets the same call run exactly once, and a
turn carries its ``turn_group_id`` so superseding it stops its later irreversible calls."""

from __future__ import annotations

from typing import Any

import pytest

from tests.pipeline.sample_tools import Payments, add, charge
from tests.toolbox.conftest import gateway_of
from toolkeeper import ApprovalStatus, CallStatus, OperationRefused, Reason, UserError

PAY = {"invoice": "inv-1", "amount": 120}


async def test_allowed_call_runs(make_box: Any) -> None:
    box = make_box(tools=[add])
    res = await box.execute("add", {"a": 2, "b": 3})
    assert res.ok and res.output == 5 and res.tool == "add"


async def test_denied_call_returns_its_reason(make_box: Any) -> None:
    box = make_box(tools=[add, Payments])  # payments lacks its scope; nothing named nope
    res = await box.execute("payments", PAY, action="pay")
    assert (res.status, res.reason) == (CallStatus.DENIED, Reason.SCOPE_MISSING)
    gone = await box.execute("nope", {})
    assert gone.status is CallStatus.DENIED and gone.reason is not None


async def test_malformed_arguments_are_a_result_with_pointers(make_box: Any) -> None:
    box = make_box(tools=[add])
    res = await box.execute("add", {"a": "two"})
    assert (res.status, res.reason) == (CallStatus.DENIED, Reason.INVALID_ARGUMENTS)
    assert res.details is not None
    assert {e["pointer"] for e in res.details["errors"]} >= {"/a"}
    odd = await box.execute("add", ["not", "an", "object"])
    assert odd.reason == Reason.INVALID_ARGUMENTS


async def test_approved_call_reruns_once_with_the_same_key(make_box: Any, approver: Any,
                                                           ledger: Any) -> None:
    box = make_box(tools=[Payments], autonomy=0, scopes=("payments",))
    ask = await box.execute("payments", PAY, action="pay", idempotency_key="pay-inv-1")
    assert (ask.status, ask.reason) == (CallStatus.APPROVAL_REQUIRED, Reason.APPROVAL_REQUIRED)
    assert ask.approval_id is not None and ledger["payments"] == []
    pending = await box.approval(ask.approval_id)
    assert (pending.status, pending.tool, pending.arguments) == (
        ApprovalStatus.PENDING, "payments", PAY)
    decided = await box.approve(ask.approval_id, by=approver, note="ok")
    assert decided.status is ApprovalStatus.APPROVED and decided.decided_by == "alice"
    run = await box.execute("payments", PAY, action="pay", idempotency_key="pay-inv-1")
    assert run.ok and not run.deduped
    again = await box.execute("payments", PAY, action="pay", idempotency_key="pay-inv-1")
    assert again.ok and again.deduped and again.call_id == run.call_id
    assert ledger["payments"] == ["inv-1"]


async def test_denied_approval_stops_the_call(make_box: Any, approver: Any,
                                              ledger: Any) -> None:
    box = make_box(tools=[Payments], autonomy=0, scopes=("payments",))
    ask = await box.execute("payments", PAY, action="pay", idempotency_key="k")
    denied = await box.deny(ask.approval_id, by=approver, note="no")
    assert denied.status is ApprovalStatus.DENIED
    res = await box.execute("payments", PAY, action="pay", idempotency_key="k",
                            approval_id=ask.approval_id)
    assert (res.status, res.reason) == (CallStatus.DENIED, Reason.APPROVAL_DENIED)
    assert "no" in (res.message or "") and ledger["payments"] == []


async def test_the_agent_cannot_approve_its_own_call(make_box: Any) -> None:
    box = make_box(tools=[Payments], autonomy=0, scopes=("payments",))
    ask = await box.execute("payments", PAY, action="pay")
    bot = gateway_of(box).principal(agent="bot")
    with pytest.raises(OperationRefused):
        await box.approve(ask.approval_id, by=bot)
    with pytest.raises(UserError, match="approver"):
        await box.approve(ask.approval_id)  # nobody named, no default approver


async def test_an_approver_token_decides_too(make_box: Any) -> None:
    box = make_box(tools=[Payments], autonomy=0, scopes=("payments",))
    _, token = gateway_of(box).store.tokens.create(tenant_id="default", role="approver",
                                                  label="carol")
    ask = await box.execute("payments", PAY, action="pay")
    assert (await box.approve(ask.approval_id, by=token)).decided_by == "carol"
    with pytest.raises(OperationRefused) as err:
        await box.deny(ask.approval_id, by="not-a-token")
    assert err.value.reason == Reason.UNAUTHENTICATED


async def test_calls_in_a_turn_carry_its_id(make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[charge, add])
    async with box.turn("turn-1") as turn:
        assert box.turn_group_id == "turn-1" == turn.turn_group_id
        first = await box.execute("charge", {"invoice": "a", "amount": 1})
        await turn.supersede()  # a newer message replaces this turn
        late = await box.execute("charge", {"invoice": "b", "amount": 1})
        pure = await turn.execute("add", {"a": 1, "b": 1})
    assert box.turn_group_id is None
    assert first.ok
    assert (late.status, late.reason) == (CallStatus.SUPERSEDED, Reason.SUPERSEDED)
    assert pure.ok  # supersede stops irreversible calls only
    with box.turn() as fresh:
        assert fresh.turn_group_id != "turn-1"
        assert (await box.execute("charge", {"invoice": "b", "amount": 1})).ok
    assert ledger["payments"] == ["a", "b"]


async def test_a_retried_turn_dedupes(make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[charge])
    async with box.turn("run-7"):
        one = await box.execute("charge", {"invoice": "a", "amount": 1})
    async with box.turn("run-7"):  # the framework re-runs the same run
        two = await box.execute("charge", {"invoice": "a", "amount": 1})
    assert one.ok and two.deduped and ledger["payments"] == ["a"]


def test_sync_turn_and_supersede(make_box: Any, ledger: Any) -> None:
    box = make_box(tools=[charge])
    with box.turn("t-sync") as turn:
        assert box.execute_sync("charge", {"invoice": "a", "amount": 1}).ok
        assert box.supersede_sync("t-sync")
        late = turn.execute_sync("charge", {"invoice": "b", "amount": 1})
    assert late.reason == Reason.SUPERSEDED and ledger["payments"] == ["a"]


async def test_waiting_for_a_decision_returns_it(make_box: Any, approver: Any) -> None:
    import asyncio

    box = make_box(tools=[Payments], autonomy=0, scopes=("payments",))
    ask = await box.execute("payments", PAY, action="pay")

    async def decide_once_waiting() -> None:
        await asyncio.sleep(0)  # let the waiter read the pending approval first
        await box.approve(ask.approval_id, by=approver)

    waited, _ = await asyncio.gather(box.wait_for_decision(ask.approval_id, timeout_s=30),
                                     decide_once_waiting())
    assert waited.status is ApprovalStatus.APPROVED


def test_waiting_is_bounded(make_box: Any) -> None:
    box = make_box(tools=[Payments], autonomy=0, scopes=("payments",))
    ask = box.execute_sync("payments", PAY, action="pay")
    still = box.wait_for_decision_sync(ask.approval_id, timeout_s=0.01)
    assert still.status is ApprovalStatus.PENDING


def test_an_expired_approval_is_decided_as_expired(make_box: Any) -> None:
    from datetime import timedelta

    box = make_box(tools=[Payments], autonomy=0, scopes=("payments",),
                   approval_ttl=timedelta(seconds=-1))
    ask = box.execute_sync("payments", PAY, action="pay")
    assert box.approval_sync(ask.approval_id).status is ApprovalStatus.EXPIRED
    waited = box.wait_for_decision_sync(ask.approval_id, timeout_s=30)
    assert waited.status is ApprovalStatus.EXPIRED
