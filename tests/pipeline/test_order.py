"""SPEC §2: each step refuses with its own reason code, in the normative order."""

from __future__ import annotations

from typing import Any

from tests.pipeline.sample_tools import Email, Payments, add, charge
from toolkeeper import (
    Activation,
    Agent,
    CallStatus,
    EventType,
    Gateway,
    Limits,
    Profile,
    RateLimit,
    Reason,
    ToolDefinition,
    ToolStatus,
)


def _events(gw: Gateway, call_id: str) -> list[str]:
    gw.flush()
    return [e.type for e in gw.store.audit.list("default", call_id=call_id)]


def test_unknown_agent_is_unauthenticated(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add])
    res = gw.call_sync("add", arguments={"a": 1, "b": 2}, agent="nobody")
    assert (res.status, res.reason) == (CallStatus.DENIED, Reason.UNAUTHENTICATED)
    assert _events(gw, res.call_id) == [EventType.POLICY_DENIED]


def test_unknown_or_revoked_token_is_unauthenticated(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add])
    rec, token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")
    assert gw.call_sync("add", arguments={"a": 1, "b": 2}, token=token).ok
    gw.store.tokens.revoke(rec.id)
    assert gw.call_sync("add", arguments={"a": 1, "b": 2}, token=token).reason == \
        Reason.UNAUTHENTICATED
    assert gw.call_sync("add", arguments={"a": 1, "b": 2}, token="tk_forged").reason == \
        Reason.UNAUTHENTICATED


def test_resolve_reasons(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add, Payments],
                      activations=(Activation(tool="add"),
                                   Activation(tool="payments", actions=("refund",))),
                      scopes=("payments",))
    assert gw.call_sync("missing", agent="bot").reason == Reason.TOOL_NOT_FOUND
    assert gw.call_sync("add", "nope", {"a": 1, "b": 1}, agent="bot").reason == \
        Reason.ACTION_NOT_FOUND
    assert gw.call_sync("payments", "pay", {"invoice": "i", "amount": 1}, agent="bot").reason \
        == Reason.ACTION_NOT_ALLOWED
    assert gw.call_sync("payments", None, {}, agent="bot").reason == Reason.ACTION_NOT_FOUND
    gw.registry.register(charge)  # published but not activated for the profile
    assert gw.call_sync("charge", arguments={"invoice": "i", "amount": 1}, agent="bot").reason \
        == Reason.TOOL_NOT_ENABLED


def test_tool_status_gates_resolution(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add])
    gw.registry.set_status("add", None, ToolStatus.DISABLED)
    assert gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot").reason == \
        Reason.TOOL_DISABLED
    gw.registry.set_status("add", None, ToolStatus.QUARANTINED)
    assert gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot").reason == \
        Reason.TOOL_QUARANTINED
    gw.registry.set_status("add", None, ToolStatus.DEPRECATED)
    assert gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot").ok


def test_draft_tools_run_only_in_debug_mode(make_gateway: Any) -> None:
    draft = ToolDefinition(name="draft_add", actions=add.definition().actions,
                           implementation=add.definition().implementation, side_effect="pure")
    for mode, expected in (("production", Reason.TOOL_NOT_PUBLISHED), ("debug", None)):
        gw = make_gateway(tools=[add], activations=(Activation(tool="draft_add"),), mode=mode,
                          url=None)
        gw.factory.natives[draft.implementation["entry_point"]] = add
        gw.registry.save(draft)
        res = gw.call_sync("draft_add", arguments={"a": 1, "b": 2}, agent="bot")
        assert res.reason == expected, mode
        gw.close()


def test_invalid_arguments_carry_json_pointers(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add])
    res = gw.call_sync("add", arguments={"a": "one", "c": 3}, agent="bot")
    assert res.reason == Reason.INVALID_ARGUMENTS
    pointers = {e["pointer"] for e in res.details["errors"]}
    assert "/a" in pointers
    assert any("b" in e["message"] for e in res.details["errors"])  # missing required


def test_payload_cap(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add], max_payload_bytes=100)
    res = gw.call_sync("add", arguments={"a": 1, "b": 2, "pad": "x" * 200}, agent="bot")
    assert res.reason == Reason.PAYLOAD_TOO_LARGE


def test_missing_scope_and_missing_approval_reports_scope_and_creates_no_approval(
        make_gateway: Any) -> None:
    # pay is high risk: at autonomy 1 it needs confirm; the profile lacks the scope.
    gw = make_gateway(tools=[Payments], autonomy=0, scopes=())
    res = gw.call_sync("payments", "pay", {"invoice": "i1", "amount": 5}, agent="bot")
    assert (res.status, res.reason) == (CallStatus.DENIED, Reason.SCOPE_MISSING)
    assert gw.store.approvals.list("default") == []
    assert _events(gw, res.call_id) == [EventType.SCOPE_DENIED]


def test_request_scopes_narrow_but_never_widen(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=3, scopes=("payments",))
    ok = gw.call_sync("payments", "refund", {"invoice": "i", "amount": 1}, agent="bot",
                      scopes=["payments", "admin"])
    assert ok.ok
    narrowed = gw.call_sync("payments", "refund", {"invoice": "i", "amount": 1}, agent="bot",
                            scopes=[])
    assert narrowed.reason == Reason.SCOPE_MISSING


def test_rate_limit_with_retry_after(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add], limits=Limits(rate=(RateLimit(limit=3, window_s=60),)))
    results = [gw.call_sync("add", arguments={"a": 1, "b": i}, agent="bot") for i in range(5)]
    assert [r.ok for r in results] == [True, True, True, False, False]
    assert results[3].reason == Reason.RATE_LIMITED
    assert results[3].retry_after is not None and 0 < results[3].retry_after <= 60


def test_call_cap_per_turn_group(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add], limits=Limits(max_calls_per_turn=2))
    r = [gw.call_sync("add", arguments={"a": 1, "b": i}, agent="bot", turn_group_id="t1")
         for i in range(3)]
    assert [x.reason for x in r] == [None, None, Reason.CALL_LIMIT_EXCEEDED]
    assert gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot", turn_group_id="t2").ok


def test_gate_reasons_by_autonomy(make_gateway: Any) -> None:
    # Email.send is medium risk: autonomy 0 confirm, 1 preview, 2 allow.
    expectations = {0: Reason.CONFIRMATION_REQUIRED, 1: Reason.PREVIEW_REQUIRED, 2: None}
    for autonomy, reason in expectations.items():
        gw = make_gateway(tools=[Email], autonomy=autonomy)
        res = gw.call_sync("email", "send", {"to": "a@example.com", "body": "hi"}, agent="bot")
        assert res.reason == reason, autonomy
        gw.close()


def test_critical_at_manual_autonomy_is_denied(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Payments], autonomy=0, scopes=("payments",))
    profile = gw.catalog.profiles[("default", "p")].profile.model_dump()
    gw.registry.put_profile(Profile.model_validate({**profile, "gates": {"high": {0: "deny"}}}),
                            replace=True)
    res = gw.call_sync("payments", "pay", {"invoice": "i1", "amount": 5}, agent="bot")
    assert res.reason == Reason.GATE_DENIED
    assert gw.store.approvals.list("default") == []


def test_tool_policy_denial_has_the_tools_reason(make_gateway: Any) -> None:
    gw = make_gateway(tools=[Email], autonomy=3)
    res = gw.call_sync("email", "send", {"to": "x@evil.test", "body": "hi"}, agent="bot")
    assert (res.status, res.reason) == (CallStatus.DENIED, "domain_not_allowed")


def test_agent_with_missing_profile_is_denied(make_gateway: Any) -> None:
    gw = make_gateway(tools=[add])
    gw.registry.put_agent(Agent(name="orphan", profile="gone"))
    assert gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="orphan").reason == \
        Reason.TOOL_NOT_ENABLED


def test_an_invalid_profile_is_refused_and_never_poisons_the_store(make_gateway: Any) -> None:
    from toolkeeper import Adjuster, OperationRefused

    gw = make_gateway(tools=[add])
    bad = Profile(name="bad", adjusters=(Adjuster(),))  # raises nothing: not compilable
    try:
        gw.registry.put_profile(bad)
    except OperationRefused as exc:
        assert exc.reason == Reason.CONFIG_INVALID
    else:
        raise AssertionError("an adjuster that raises nothing must be refused")
    gw.store.registry.upsert_profile(bad)  # even if one got in by another path…
    gw.reload()  # …loading fails closed for that profile only
    assert ("default", "bad") not in gw.catalog.profiles
    assert gw.call_sync("add", arguments={"a": 1, "b": 1}, agent="bot").ok


def test_with_audit_level_steps_the_resolve_step_is_recorded_in_order(
        make_gateway: Any) -> None:
    gw = make_gateway(tools=[add], audit_level="steps")
    res = gw.call_sync("add", arguments={"a": 1, "b": 2}, agent="bot")
    assert res.ok
    gw.flush()
    types = [e.type for e in gw.store.audit.list("default", call_id=res.call_id)]
    steps = ["call.requested", "call.resolved", "gate.allowed", "call.succeeded"]
    assert [t for t in types if t in steps] == steps
