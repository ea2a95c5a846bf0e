"""SPEC §7 (library): ``call_or_raise`` raises for every call that did not succeed, each
exception carrying the same ``reason`` and ``result`` as the non-raising ``call``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.pipeline.sample_tools import LEDGER, Email, Payments, add, broken
from toolkeeper import (
    ApprovalRequired,
    CallDenied,
    CallFailed,
    CallStatus,
    CallStopped,
    Reason,
)

PAY = {"invoice": "inv-r", "amount": 3}


def test_a_succeeded_call_returns_its_result(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add])
    res = gw.call_or_raise_sync("add", arguments={"a": 2, "b": 3}, agent="bot")
    assert res.ok and res.output == 5


@pytest.mark.parametrize(("autonomy", "status", "reason"), [
    (0, CallStatus.APPROVAL_REQUIRED, Reason.APPROVAL_REQUIRED),
    (1, CallStatus.CONFIRMATION_REQUIRED, Reason.CONFIRMATION_REQUIRED),
])
def test_a_gate_that_needs_a_person_raises_approval_required(
        make_gateway: Any, autonomy: int, status: CallStatus, reason: Reason) -> None:
    gw = make_gateway(tools=[Payments], autonomy=autonomy, scopes=("payments",))
    with pytest.raises(ApprovalRequired) as info:
        gw.call_or_raise_sync("payments", "pay", PAY, agent="bot")
    assert info.value.reason == reason and info.value.result.status is status
    assert info.value.result.approval_id and LEDGER["payments"] == []


def test_a_preview_gate_raises_approval_required_with_the_preview(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Email], autonomy=1)  # medium at 1: preview
    with pytest.raises(ApprovalRequired) as info:
        gw.call_or_raise_sync("email", "send", {"to": "a@example.com", "body": "x"},
                              agent="bot")
    assert info.value.reason == Reason.PREVIEW_REQUIRED
    assert info.value.result.preview_token and LEDGER["emails"] == []


def test_a_policy_refusal_raises_call_denied(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=3)  # the profile lacks the scope
    with pytest.raises(CallDenied) as info:
        gw.call_or_raise_sync("payments", "pay", PAY, agent="bot")
    assert info.value.reason == Reason.SCOPE_MISSING
    assert info.value.result.status is CallStatus.DENIED


def test_a_failing_tool_raises_call_failed_and_every_stop_is_a_call_stopped(
        make_gateway: Any) -> None:
    gw = make_gateway(tools=[broken])
    with pytest.raises(CallFailed) as info:
        gw.call_or_raise_sync("broken", arguments={"x": 7}, agent="bot")
    assert info.value.reason == Reason.TOOL_ERROR
    assert info.value.result.status is CallStatus.FAILED
    assert isinstance(info.value, CallStopped)
    plain = gw.call_sync("broken", arguments={"x": 7}, agent="bot")
    assert plain.reason == info.value.reason  # the same reason as the non-raising call


async def test_the_async_variant_raises_the_same(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=3)
    with pytest.raises(CallDenied) as info:
        await gw.call_or_raise("payments", "pay", PAY, agent="bot")
    assert info.value.reason == Reason.SCOPE_MISSING
