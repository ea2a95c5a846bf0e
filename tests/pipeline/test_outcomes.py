"""SPEC §2 steps 10-11, §4, §5: retries only when retry-safe, timeouts and transport
failures, compensation, supersede, batches."""

from __future__ import annotations

from typing import Any

from tests.pipeline.gw_helpers import update_profile
from tests.pipeline.sample_tools import (
    LEDGER,
    Grouped,
    Payments,
    add,
    broken,
    charge,
    flaky,
    lost_connection,
    slow_irreversible,
    slow_pure,
)
from tests.support.waiting import wait_until
from toolkeeper import CallRequest, CallStatus, Health, Principal, Reason, Role

OPS = Principal(name="ops", tenant_id="default", roles=frozenset({Role.OPERATOR}))


def test_retryable_errors_are_retried_for_idempotent_tools(make_gateway: Any) -> None:
    gw = make_gateway(tools=[flaky], retry_base_s=0.001)
    res = gw.call_sync("flaky", arguments={"n": 3}, agent="bot")
    assert res.ok and res.output == 3 and LEDGER["attempts"] == 3


def test_retries_are_bounded(make_gateway: Any) -> None:
    gw = make_gateway(tools=[flaky], retry_base_s=0.001)
    res = gw.call_sync("flaky", arguments={"n": 99}, agent="bot")
    assert (res.status, res.reason) == (CallStatus.FAILED, "upstream_error")
    assert LEDGER["attempts"] == 3  # 1 + max_retries (2)


def test_pure_timeout_fails_with_timeout(make_gateway: Any) -> None:
    gw = make_gateway(tools=[slow_pure], retry_base_s=0.001)
    res = gw.call_sync("slow_pure", arguments={"seconds": 5}, agent="bot")
    assert (res.status, res.reason) == (CallStatus.FAILED, Reason.TIMEOUT)
    assert LEDGER["attempts"] == 3


def test_irreversible_timeout_is_unknown_and_never_retried(make_gateway: Any) -> None:
    gw = make_gateway(tools=[slow_irreversible])
    res = gw.call_sync("slow_irreversible", arguments={"seconds": 5}, agent="bot",
                       turn_group_id="t")
    assert (res.status, res.reason) == (CallStatus.UNKNOWN, Reason.TIMEOUT)
    assert LEDGER["runs"] == 1
    again = gw.call_sync("slow_irreversible", arguments={"seconds": 5}, agent="bot",
                         turn_group_id="t")
    assert again.reason == Reason.OUTCOME_UNKNOWN and LEDGER["runs"] == 1
    resolved = gw.calls.resolve(res.call_id, OPS, status="failed", note="never arrived")
    assert resolved.status == "failed"


def test_transport_failure_after_send_is_unknown(make_gateway: Any) -> None:
    gw = make_gateway(tools=[lost_connection])
    res = gw.call_sync("lost_connection", arguments={"x": 1}, agent="bot")
    assert (res.status, res.reason) == (CallStatus.UNKNOWN, "upstream_error")


def test_a_tool_bug_fails_with_tool_error_and_message(make_gateway: Any) -> None:
    gw = make_gateway(tools=[broken])
    res = gw.call_sync("broken", arguments={"x": 7}, agent="bot")
    assert (res.status, res.reason) == (CallStatus.FAILED, Reason.TOOL_ERROR)
    assert "boom 7" in (res.message or "")


def test_failures_open_the_circuit_breaker(make_gateway: Any) -> None:
    gw = make_gateway(tools=[flaky], retry_base_s=0.001)
    gw.runtime.health.open_after = 2
    for _ in range(2):
        gw.call_sync("flaky", arguments={"n": 99}, agent="bot")
    assert gw.runtime.health.get("default:flaky").status is Health.UNAVAILABLE
    res = gw.call_sync("flaky", arguments={"n": 1}, agent="bot")
    assert res.reason == Reason.TOOL_UNAVAILABLE and res.retry_after
    gw.flush()
    events = [e.type for e in gw.store.audit.list("default", types=["tool.health_changed"])]
    assert events


def test_concurrency_group_waits_then_refuses(make_gateway: Any) -> None:
    import asyncio

    gw = make_gateway(tools=[Grouped])

    async def both() -> list[Any]:
        return await asyncio.gather(
            gw.call("grouped", arguments={"hold": 0.6}, agent="bot"),
            gw.call("grouped", arguments={"hold": 0.6}, agent="bot"),
            gw.call("grouped", arguments={"hold": 0.6}, agent="bot"))

    results = gw.run_sync(both())
    reasons = sorted(str(r.reason) for r in results)
    assert reasons.count("None") == 2 and Reason.CONCURRENCY_LIMITED.value in reasons


def test_compensation_runs_the_named_action_once(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=3, scopes=("payments",))
    pay = gw.call_sync("payments", "pay", {"invoice": "inv-5", "amount": 40}, agent="bot")
    assert pay.ok and pay.side_effect_id
    comp = gw.run_sync(gw.calls.compensate(pay.side_effect_id, OPS))
    assert comp.ok and comp.output == {"refunded": "inv-5", "amount": 40}
    assert LEDGER["refunds"] == ["inv-5"]
    effect = gw.store.outcomes.side_effect(pay.side_effect_id)
    assert effect.status == "compensated"
    from toolkeeper import OperationRefused

    try:
        gw.run_sync(gw.calls.compensate(pay.side_effect_id, OPS))
    except OperationRefused as exc:
        assert exc.reason == Reason.ALREADY_COMPENSATED
    else:
        raise AssertionError("a second compensation must be refused")
    assert LEDGER["refunds"] == ["inv-5"]


def test_superseded_turn_stops_irreversible_calls_only(make_gateway: Any) -> None:
    gw = make_gateway(tools=[charge, add])
    gw.calls.supersede("default", "turn-1")
    res = gw.call_sync("charge", arguments={"invoice": "a", "amount": 1}, agent="bot",
                       turn_group_id="turn-1")
    assert (res.status, res.reason) == (CallStatus.SUPERSEDED, Reason.SUPERSEDED)
    assert LEDGER["runs"] == 0
    assert gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot",
                        turn_group_id="turn-1").ok
    assert gw.call_sync("charge", arguments={"invoice": "a", "amount": 1}, agent="bot",
                        turn_group_id="turn-2").ok


def test_batch_results_keep_request_order(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add, Grouped])
    reqs = [CallRequest(tool="grouped", arguments={"hold": 0.05}),
            CallRequest(tool="add", arguments={"a": 1, "b": 1}),
            CallRequest(tool="grouped", arguments={"hold": 0.01}),
            CallRequest(tool="add", arguments={"a": 2, "b": 2})]
    results = gw.run_sync(gw.batch(reqs, mode="parallel_safe", agent="bot"))
    assert [r.tool for r in results] == ["grouped", "add", "grouped", "add"]
    assert [r.output for r in results] == ["ok", 2, "ok", 4]


def test_sequential_batch_rolls_back_after_a_failed_critical_call(make_gateway: Any) -> None:
    from toolkeeper import Activation, Adjuster, Condition, Risk

    gw = make_gateway(tools=[Payments, broken], autonomy=3, scopes=("payments",))
    # only the tenant may loosen a cell of the default matrix; a profile may only tighten
    gw.registry.set_tenant_policy("default", gates={"critical": {"3": "allow"}})
    update_profile(
        gw, activations=[Activation(tool="payments"), Activation(tool="broken")],
        adjusters=[Adjuster(tools=("broken",), when=(Condition(arg="x", op="gt", value=0),),
                            raise_to=Risk.CRITICAL)])
    reqs = [CallRequest(tool="payments", action="pay", arguments={"invoice": "a", "amount": 1}),
            CallRequest(tool="payments", action="pay", arguments={"invoice": "b", "amount": 2}),
            CallRequest(tool="broken", arguments={"x": 1}),
            CallRequest(tool="payments", action="pay", arguments={"invoice": "c", "amount": 3})]
    results = gw.run_sync(gw.batch(reqs, mode="sequential", agent="bot"))
    assert [r.status for r in results] == [CallStatus.COMPENSATED, CallStatus.COMPENSATED,
                                           CallStatus.FAILED, CallStatus.DENIED]
    assert results[3].reason == Reason.BATCH_ABORTED
    assert LEDGER["refunds"] == ["b", "a"]  # reverse order
    assert LEDGER["payments"] == ["a", "b"]


def test_stale_in_progress_outcomes_are_recovered_periodically(make_gateway: Any) -> None:
    from datetime import UTC, datetime, timedelta

    from toolkeeper import OutcomeState
    from toolkeeper.store.records import OutcomeRecord

    gw = make_gateway(tools=[charge], recovery_every_s=0.05)
    past = datetime.now(UTC) - timedelta(minutes=5)
    gw.store.outcomes.claim(OutcomeRecord(
        call_id="dead-call", tenant_id="default", agent="bot", key="k:dead", tool="charge",
        action="run", tool_version="1.0.0", args_digest="sha256:x", side_effect="irreversible",
        state=OutcomeState.IN_PROGRESS, status="in_progress", created_at=past,
        updated_at=past, expires_at=past + timedelta(days=1), stale_after=past))
    wait_until(lambda: gw.store.outcomes.get("dead-call").state is not OutcomeState.IN_PROGRESS,
               what="the background recovery settles the dead call")
    assert gw.store.outcomes.get("dead-call").state is OutcomeState.UNKNOWN


def test_an_unknown_outcome_never_expires_by_itself(make_gateway: Any) -> None:
    from datetime import timedelta

    gw = make_gateway(tools=[lost_connection], outcome_ttl=timedelta(seconds=-1))
    first = gw.call_sync("lost_connection", arguments={"x": 1}, agent="bot", turn_group_id="t")
    assert first.status is CallStatus.UNKNOWN
    again = gw.call_sync("lost_connection", arguments={"x": 1}, agent="bot", turn_group_id="t")
    assert again.reason == Reason.OUTCOME_UNKNOWN  # past its TTL too: never run again
    assert again.details["original_call_id"] == first.call_id
