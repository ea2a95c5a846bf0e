"""SPEC §3: approvals bind one exact call — digest, tool version, agent — are single-use,
expire, and an approve gate is never resolved by the requesting agent."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.pipeline.gw_helpers import update_profile
from tests.pipeline.sample_tools import LEDGER, Email, Payments
from toolkeeper import (
    ApprovalStatus,
    CallStatus,
    OperationRefused,
    Principal,
    Reason,
    Role,
)

PAY = {"invoice": "inv-1", "amount": 120}


def _ask(gw: Any, args: dict[str, Any] = PAY, **kw: Any) -> Any:
    return gw.call_sync("payments", "pay", args, agent="bot", **kw)


@pytest.fixture
def gw(make_gateway: Any) -> Any:
    # pay is high risk; at autonomy 0 the default matrix says approve.
    return make_gateway(tools=[Payments], autonomy=0, scopes=("payments",))


def test_approve_gate_creates_one_pending_approval(gw: Any) -> None:
    first = _ask(gw)
    assert (first.status, first.reason) == (CallStatus.APPROVAL_REQUIRED,
                                            Reason.APPROVAL_REQUIRED)
    again = _ask(gw)  # the same call while pending: the same approval, not a second one
    assert again.approval_id == first.approval_id
    pending = gw.approvals.list("default")
    assert [a.id for a in pending] == [first.approval_id]
    assert pending[0].arguments == PAY and pending[0].gate == "approve"
    assert LEDGER["payments"] == []


def test_approved_call_runs_once_and_the_approval_is_consumed(gw: Any, approver: Any) -> None:
    ask = _ask(gw)
    gw.approvals.approve(ask.approval_id, approver)
    run = _ask(gw, approval_id=ask.approval_id)
    assert run.ok and LEDGER["payments"] == ["inv-1"]
    assert gw.store.approvals.get(ask.approval_id).status is ApprovalStatus.CONSUMED
    twice = _ask(gw, approval_id=ask.approval_id)
    assert twice.reason == Reason.APPROVAL_CONSUMED
    assert LEDGER["payments"] == ["inv-1"]


def test_resubmitting_without_the_id_finds_the_approval(gw: Any, approver: Any) -> None:
    ask = _ask(gw, turn_group_id="t1")
    gw.approvals.approve(ask.approval_id, approver)
    run = _ask(gw, turn_group_id="t1")
    assert run.ok
    retry = _ask(gw, turn_group_id="t1", approval_id=ask.approval_id)
    assert retry.deduped and retry.ok  # same key: the consumed approval leads to the outcome
    assert LEDGER["payments"] == ["inv-1"]


def test_approval_cannot_be_used_for_other_arguments(gw: Any, approver: Any) -> None:
    ask = _ask(gw)
    gw.approvals.approve(ask.approval_id, approver)
    other = _ask(gw, {"invoice": "inv-1", "amount": 999}, approval_id=ask.approval_id)
    assert other.reason == Reason.APPROVAL_MISMATCH
    assert LEDGER["payments"] == []


def test_approval_cannot_be_used_for_another_tool_version(gw: Any, approver: Any) -> None:
    ask = _ask(gw)
    gw.approvals.approve(ask.approval_id, approver)
    gw.registry.new_version("payments", "1.1.0", None)
    res = _ask(gw, approval_id=ask.approval_id)
    assert res.reason == Reason.APPROVAL_MISMATCH
    assert LEDGER["payments"] == []


def test_approval_cannot_be_used_by_another_agent(gw: Any, approver: Any) -> None:
    ask = _ask(gw)
    gw.approvals.approve(ask.approval_id, approver)
    res = gw.call_sync("payments", "pay", PAY, agent="other-bot", approval_id=ask.approval_id)
    assert res.reason == Reason.APPROVAL_MISMATCH


def test_expired_approval_is_refused(make_gateway: Any, approver: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=0, scopes=("payments",),
                      approval_ttl=timedelta(seconds=-1))
    ask = _ask(gw)
    with pytest.raises(OperationRefused) as err:
        gw.approvals.approve(ask.approval_id, approver)
    assert err.value.reason == Reason.APPROVAL_EXPIRED
    assert _ask(gw, approval_id=ask.approval_id).reason == Reason.APPROVAL_EXPIRED


def test_requesting_agent_cannot_approve_its_own_call(gw: Any) -> None:
    ask = _ask(gw)
    _, token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    own = gw.authenticate(token)
    with pytest.raises(OperationRefused) as err:
        gw.approvals.approve(ask.approval_id, own)
    assert err.value.reason == Reason.APPROVER_NOT_ALLOWED
    # even an approver-role credential bound to the requesting agent is refused
    same_agent = Principal(name="bot-admin", tenant_id="default",
                           roles=frozenset({Role.APPROVER}), agent="bot")
    with pytest.raises(OperationRefused):
        gw.approvals.approve(ask.approval_id, same_agent)


def test_denied_approval_stops_the_call(gw: Any, approver: Any) -> None:
    ask = _ask(gw)
    gw.approvals.deny(ask.approval_id, approver, note="not this month")
    res = _ask(gw, approval_id=ask.approval_id)
    assert res.reason == Reason.APPROVAL_DENIED
    assert "not this month" in (res.message or "")


def test_pending_approval_presented_is_pending(gw: Any) -> None:
    ask = _ask(gw)
    res = _ask(gw, approval_id=ask.approval_id)
    assert (res.status, res.reason) == (CallStatus.APPROVAL_REQUIRED, Reason.APPROVAL_PENDING)


def test_another_tenants_approver_sees_nothing(gw: Any) -> None:
    ask = _ask(gw)
    outsider = Principal(name="eve", tenant_id="acme", roles=frozenset({Role.ADMIN}))
    with pytest.raises(OperationRefused) as err:
        gw.approvals.approve(ask.approval_id, outsider)
    assert err.value.reason == Reason.NOT_FOUND


def test_edited_arguments_bind_the_edit_and_rerun_the_pipeline(gw: Any,
                                                               approver: Any) -> None:
    ask = _ask(gw)
    edited = {"invoice": "inv-1", "amount": 100}
    gw.approvals.approve(ask.approval_id, approver, edited_arguments=edited)
    assert _ask(gw, approval_id=ask.approval_id).reason == Reason.APPROVAL_MISMATCH
    res = _ask(gw, edited, approval_id=ask.approval_id)
    assert res.ok and res.output == {"paid": "inv-1", "amount": 100}
    bad_edit = _ask(gw, {"invoice": "inv-2", "amount": "lots"})
    assert bad_edit.reason == Reason.INVALID_ARGUMENTS  # edits face validation like any call


def test_confirm_gate_resolved_by_the_agents_own_user(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=1, scopes=("payments",))  # high @1: confirm
    ask = _ask(gw)
    assert ask.status is CallStatus.CONFIRMATION_REQUIRED
    _, token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    gw.approvals.confirm(ask.approval_id, gw.authenticate(token))
    assert _ask(gw, approval_id=ask.approval_id).ok


def test_confirmation_cannot_satisfy_an_approve_gate(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=1, scopes=("payments",))
    ask = _ask(gw)
    _, token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    gw.approvals.confirm(ask.approval_id, gw.authenticate(token))
    update_profile(gw, autonomy=0)  # now the gate is approve
    assert _ask(gw, approval_id=ask.approval_id).reason == Reason.APPROVAL_MISMATCH


def test_preview_then_execute_with_the_token(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Email], autonomy=1)  # medium @1: preview
    args = {"to": "bob@example.com", "body": "hello"}
    pv = gw.call_sync("email", "send", args, agent="bot")
    assert pv.status is CallStatus.PREVIEW_REQUIRED and pv.preview_token
    assert pv.preview["summary"] == "email to bob@example.com" and LEDGER["emails"] == []
    bad = gw.call_sync("email", "send", {**args, "body": "changed"}, agent="bot",
                       preview_token=pv.preview_token)
    assert bad.reason == Reason.PREVIEW_INVALID
    ok = gw.call_sync("email", "send", args, agent="bot", preview_token=pv.preview_token)
    assert ok.ok and LEDGER["emails"] == ["bob@example.com"]
    reuse = gw.call_sync("email", "send", args, agent="bot", preview_token=pv.preview_token)
    assert reuse.reason == Reason.PREVIEW_INVALID and LEDGER["emails"] == ["bob@example.com"]


def test_preview_gate_escalates_to_confirm_without_preview_support(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=2, scopes=("payments",))  # high @2: preview
    res = _ask(gw)
    assert res.status is CallStatus.CONFIRMATION_REQUIRED


def test_requires_confirmation_raises_allow_to_confirm(make_gateway: Any) -> None:
    from toolkeeper import Activation

    gw = make_gateway(tools=[Payments], autonomy=3, scopes=("payments",),
                      activations=(Activation(tool="payments", requires_confirmation=True),))
    res = gw.call_sync("payments", "refund", {"invoice": "i", "amount": 1}, agent="bot")
    assert res.status is CallStatus.CONFIRMATION_REQUIRED


def test_two_racing_calls_consume_an_approval_once(gw: Any, approver: Any) -> None:
    import concurrent.futures as cf

    ask = _ask(gw)
    gw.approvals.approve(ask.approval_id, approver)
    with cf.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: _ask(gw, approval_id=ask.approval_id,
                                               idempotency_key=f"k{i}"), range(8)))
    assert sum(r.ok for r in results) == 1
    assert {r.reason for r in results if not r.ok} == {Reason.APPROVAL_CONSUMED}
    assert LEDGER["payments"] == ["inv-1"]


def test_listeners_hear_about_new_approvals(gw: Any) -> None:
    heard: list[str] = []
    gw.on_approval_created(lambda rec: heard.append(rec.id))
    gw.on_approval_created(lambda rec: 1 / 0)  # a broken listener never fails the call
    ask = _ask(gw)
    assert heard == [ask.approval_id]
    assert _ask(gw).approval_id == ask.approval_id and heard == [ask.approval_id]


def test_exact_retry_of_an_approved_executed_call_is_deduped_not_asked_again(
        gw: Any, approver: Any) -> None:
    ask = _ask(gw, turn_group_id="t1")
    gw.approvals.approve(ask.approval_id, approver)
    assert _ask(gw, turn_group_id="t1", approval_id=ask.approval_id).ok
    retry = _ask(gw, turn_group_id="t1")  # no approval_id: the payment already happened
    assert retry.ok and retry.deduped and retry.approval_id is None
    assert retry.call_id != ask.call_id and LEDGER["payments"] == ["inv-1"]
    assert gw.approvals.list("default") == []  # pending: none was created
    keyed = _ask(gw, idempotency_key="pay-inv-1")
    assert keyed.status is CallStatus.APPROVAL_REQUIRED  # another key: a new decision
    gw.approvals.approve(keyed.approval_id, approver)
    assert _ask(gw, idempotency_key="pay-inv-1", approval_id=keyed.approval_id).deduped is False
    again = _ask(gw, idempotency_key="pay-inv-1")
    assert again.deduped and LEDGER["payments"] == ["inv-1", "inv-1"]
    assert gw.approvals.list("default") == []


@pytest.mark.parametrize(("autonomy", "gate"), [(0, "approve"), (1, "confirm"),
                                                (2, "confirm")])  # 2: preview → confirm
def test_exact_repeat_meets_no_gate_whichever_gate_it_would_meet(
        make_gateway: Any, approver: Any, autonomy: int, gate: str) -> None:
    gw = make_gateway(tools=[Payments], autonomy=3, scopes=("payments",))  # allow
    assert _ask(gw, turn_group_id="t9").ok
    update_profile(gw, autonomy=autonomy)
    repeat = _ask(gw, turn_group_id="t9")
    assert repeat.ok and repeat.deduped and LEDGER["payments"] == ["inv-1"]
    other = _ask(gw, {"invoice": "inv-2", "amount": 5}, turn_group_id="t9")
    assert other.gate.value == gate and not other.ok  # new arguments still meet the gate
    assert len(gw.approvals.list("default")) == 1


def test_exact_repeat_under_a_deny_gate_returns_the_outcome_and_runs_nothing(
        make_gateway: Any) -> None:
    from toolkeeper import Gate, Risk

    gw = make_gateway(tools=[Payments], autonomy=3, scopes=("payments",))
    assert _ask(gw, idempotency_key="k1").ok
    update_profile(gw, gates={Risk.HIGH: {3: Gate.DENY}})
    repeat = _ask(gw, idempotency_key="k1")
    assert repeat.ok and repeat.deduped and LEDGER["payments"] == ["inv-1"]
    fresh = _ask(gw, idempotency_key="k2")
    assert fresh.reason == Reason.GATE_DENIED


def test_an_approval_given_under_another_policy_does_not_bind(gw: Any, approver: Any) -> None:
    ask = _ask(gw)
    gw.approvals.approve(ask.approval_id, approver)
    update_profile(gw, description="changed after the approval")  # a new policy version
    stale = _ask(gw, approval_id=ask.approval_id)
    assert stale.reason == Reason.APPROVAL_MISMATCH and LEDGER["payments"] == []
    again = _ask(gw)  # the approved one is not found for this policy: a new decision
    assert again.status is CallStatus.APPROVAL_REQUIRED
    assert again.approval_id != ask.approval_id


def test_pending_approvals_are_capped_per_agent(make_gateway: Any, approver: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=0, scopes=("payments",),
                      max_pending_approvals=2)
    asks = [_ask(gw, {"invoice": f"inv-{i}", "amount": 1}) for i in range(3)]
    assert [a.reason for a in asks] == [Reason.APPROVAL_REQUIRED] * 2 + [
        Reason.APPROVALS_PENDING_LIMIT]
    assert asks[2].status is CallStatus.DENIED and asks[2].approval_id is None
    assert len(gw.approvals.list("default")) == 2
    # per agent: another agent of the tenant still reaches a human
    theirs = gw.call_sync("payments", "pay", PAY, agent="other-bot")
    assert theirs.reason == Reason.APPROVAL_REQUIRED
    gw.approvals.deny(asks[0].approval_id, approver)  # decided: room for one more
    assert _ask(gw, {"invoice": "inv-9", "amount": 1}).reason == Reason.APPROVAL_REQUIRED


def test_a_cap_of_zero_leaves_pending_approvals_unbounded(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=0, scopes=("payments",),
                      max_pending_approvals=0)
    asks = [_ask(gw, {"invoice": f"inv-{i}", "amount": 1}) for i in range(3)]
    assert [a.reason for a in asks] == [Reason.APPROVAL_REQUIRED] * 3
