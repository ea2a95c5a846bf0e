"""Issue 30 item 2, the backend: ``GET /calls/{call_id}/story`` over a real app and store
(SQLite and PostgreSQL). A high-risk call waits for an approver, is approved with edits,
re-submitted, run and compensated: both calls tell the whole story and point at each
other. Every step at ``audit_level: steps``, only decisions otherwise; a denied call with
no outcome still has a story; another tenant's or agent's call, or none, is not found; a
story reads a bounded number of events."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient, assert_error
from toolkeeper.services import story as story_module

INVOICE = {"invoice": "inv-7", "amount": 120}
EDITED = {"invoice": "inv-7", "amount": 100}


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url, audit_level="steps") as a:
        yield a


def _story(api: RestClient, call_id: str, who: str = "operator") -> dict[str, Any]:
    resp = api.get(who, f"/calls/{call_id}/story")
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def _types(story: dict[str, Any]) -> list[str]:
    return [s["type"] for s in story["steps"]]


def _approved_with_edits_then_compensated(api: RestClient) -> tuple[str, ...]:
    """The original call, its approval, the re-submitted call, the compensation call and
    its first attempt (a refund at autonomy 0 waits for a confirmation)."""
    asked = api.execute("intern", "bank", INVOICE, action="pay").json()
    assert asked["status"] == "approval_required", asked
    approval_id = asked["approval_id"]
    ok = api.post("approver", f"/approvals/{approval_id}/approve",
                  {"arguments": EDITED, "note": "100 is the agreed price"})
    assert ok.status_code == 200, ok.text
    run = api.execute("intern", "bank", EDITED, action="pay", approval_id=approval_id).json()
    assert run["status"] == "succeeded" and run["side_effect_id"], run
    compensate = f"/side-effects/{run['side_effect_id']}/compensate"
    gated = api.post("operator", compensate).json()
    assert gated["status"] == "confirmation_required", gated
    assert api.post("approver", f"/approvals/{gated['approval_id']}/confirm").status_code == 200
    comp = api.post("operator", compensate)
    assert comp.status_code == 200 and comp.json()["status"] == "succeeded", comp.text
    return (asked["call_id"], approval_id, run["call_id"], comp.json()["call_id"],
            gated["call_id"])


def test_a_call_approved_with_edits_then_compensated_tells_its_whole_story(
        api: RestClient) -> None:
    original, approval_id, rerun, compensation, asked_first = \
        _approved_with_edits_then_compensated(api)

    first = _story(api, original)
    assert (first["call_id"], first["agent"], first["tool"], first["action"]) == (
        original, "intern", "bank", "pay")
    assert (first["status"], first["reason"]) == ("approval_required", "approval_required")
    assert first["outcome"] is None and first["side_effects"] == []  # it never ran
    assert _types(first) == ["call.requested", "call.resolved", "gate.required",
                             "approval.created", "approval.granted"]
    steps = {s["type"]: s for s in first["steps"]}
    assert steps["gate.required"]["detail"] == "gate: approval required — risk high at autonomy 0"
    assert steps["approval.granted"]["detail"] == "approved by approver with edits"
    assert first["gate"] == {"gate": "approve", "risk": "high",
                             "why": "risk high at autonomy 0 needs an approver's decision"}
    [approval] = first["approvals"]
    assert (approval["id"], approval["status"], approval["kind"]) == (
        approval_id, "consumed", "approve")
    assert (approval["requested_by"], approval["decided_by"]) == ("intern", "approver")
    assert approval["edited"] is True and approval["note"] == "100 is the agreed price"
    assert (approval["arguments"], approval["edited_arguments"]) == (INVOICE, EDITED)
    assert (approval["call_id"], approval["consumed_by"]) == (original, rerun)
    assert approval["waited_ms"] >= 0 and approval["decided_at"]
    assert first["related"] == [{"call_id": rerun, "relation": "resubmitted_as"}]

    second = _story(api, rerun)
    assert (second["status"], second["agent"]) == ("succeeded", "intern")
    assert second["approvals"] == first["approvals"]  # the same approval, from its other end
    assert second["gate"]["why"] == f"allowed by approval {approval_id}"
    assert _types(second)[:3] == ["call.requested", "call.resolved", "gate.allowed"]
    assert {"approval.consumed", "call.attempted", "call.succeeded", "side_effect.recorded",
            "side_effect.compensated"} <= set(_types(second))
    assert second["outcome"]["state"] == "succeeded"
    assert second["outcome"]["side_effect"] == "compensatable"
    [effect] = second["side_effects"]
    assert (effect["status"], effect["policy"]) == ("compensated", "compensatable")
    assert (effect["compensation_call_id"], effect["compensation_status"]) == (
        compensation, "succeeded")
    assert second["related"] == [{"call_id": original, "relation": "resubmission_of"},
                                 {"call_id": compensation, "relation": "compensated_by"}]
    assert second["duration_ms"] is not None and second["duration_ms"] >= 0

    third = _story(api, compensation)
    assert (third["tool"], third["action"], third["status"]) == ("bank", "refund", "succeeded")
    assert third["related"] == [{"call_id": asked_first, "relation": "resubmission_of"},
                                {"call_id": rerun, "relation": "compensation_of"}]
    [confirmed] = third["approvals"]
    assert (confirmed["kind"], confirmed["decided_by"], confirmed["edited"]) == (
        "confirm", "approver", False)
    assert _story(api, rerun, who="intern") == second  # the agent reads its own calls


def _at_ms_never_decrease(story: dict[str, Any]) -> None:
    at = [s["at_ms"] for s in story["steps"]]
    assert at[0] == 0.0 and at == sorted(at), at
    assert [s["seq"] for s in story["steps"]] == sorted(s["seq"] for s in story["steps"])


def test_at_audit_level_steps_every_step_is_there_in_order(api: RestClient) -> None:
    call = api.execute("bot", "charge", INVOICE).json()
    story = _story(api, call["call_id"])
    assert story["audit_level"] == "steps"
    assert _types(story) == ["call.requested", "call.resolved", "gate.allowed",
                             "call.attempted", "call.succeeded", "side_effect.recorded"]
    _at_ms_never_decrease(story)
    details = [s["detail"] for s in story["steps"]]
    assert details[:3] == ["agent bot asked for charge", "resolved to charge version 1.0.0",
                           "gate: allowed — risk low at autonomy 3"]
    assert details[4] == "the tool succeeded"
    assert story["started_at"] == story["steps"][0]["ts"]
    assert story["gate"] == {"gate": "allow", "risk": "low", "why": "risk low at autonomy 3"}


def test_at_audit_level_decisions_only_the_decisions_are_there(db_url: str) -> None:
    with api_for(db_url) as api:  # audit_level: decisions, the default
        call = api.execute("bot", "charge", INVOICE).json()
        story = _story(api, call["call_id"])
        assert story["audit_level"] == "decisions"
        assert _types(story) == ["call.attempted", "call.succeeded", "side_effect.recorded"]
        _at_ms_never_decrease(story)
        assert story["gate"] == {"gate": "allow", "risk": "low", "why": "risk low: gate allow"}
        gated = api.execute("intern", "bank", INVOICE, action="pay").json()
        assert _types(_story(api, gated["call_id"])) == ["gate.required", "approval.created"]


def test_a_denied_call_with_no_outcome_has_a_story(api: RestClient) -> None:
    wire = api.execute("intern", "bank", INVOICE, action="wire").json()
    assert (wire["status"], wire["reason"]) == ("denied", "gate_denied")
    assert api.gw.store.outcomes.get(wire["call_id"]) is None
    story = _story(api, wire["call_id"])
    assert (story["status"], story["reason"], story["outcome"]) == ("denied", "gate_denied",
                                                                    None)
    assert story["gate"] == {"gate": "deny", "risk": "critical",
                             "why": "risk critical at autonomy 0 is denied"}
    assert story["steps"][-1]["detail"] == "policy: denied — gate denied"
    assert story["steps"][-1]["duration_ms"] == story["duration_ms"] >= 0
    bad = api.execute("bot", "add", {"a": "one", "b": 2}).json()["error"]["details"]
    story = _story(api, bad["call_id"], who="bot")
    assert (story["status"], story["reason"], story["gate"]) == (
        "denied", "invalid_arguments", None)  # stopped before the gate
    assert story["approvals"] == story["side_effects"] == story["related"] == []


def test_another_tenants_or_agents_call_is_not_found(api: RestClient) -> None:
    call = api.execute("intern", "bank", INVOICE, action="pay").json()["call_id"]
    ran = api.execute("bot", "charge", INVOICE).json()["call_id"]  # has an outcome row
    for who, call_id in (("acme_admin", call), ("acme_admin", ran), ("acme_bot", ran),
                         ("other-bot", ran), ("intern", ran), ("bot", call)):
        assert_error(api.get(who, f"/calls/{call_id}/story"), 404, "not_found")
    for who in ("operator", "approver", "admin", "intern"):
        assert _story(api, call, who=who)["call_id"] == call


def test_an_unknown_call_is_not_found(api: RestClient) -> None:
    err = assert_error(api.get("operator", "/calls/nope/story"), 404, "not_found")
    assert err["message"] == "no call 'nope'"


def test_without_the_agent_rule_another_agents_call_would_be_read(
        api: RestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule the test above relies on, broken on purpose: its refusals then fail."""
    ran = api.execute("bot", "charge", INVOICE).json()["call_id"]
    monkeypatch.setattr(story_module, "hidden", lambda call_agent, agent: False)
    assert _story(api, ran, who="other-bot")["agent"] == "bot"


def test_without_the_tenant_check_another_tenants_call_would_be_read(
        api: RestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = api.execute("bot", "charge", INVOICE).json()["call_id"]
    monkeypatch.setattr(story_module.CallStory, "_outcome_of",
                        lambda self, tenant_id, call_id: api.gw.store.outcomes.get(call_id))
    assert _story(api, ran, who="acme_admin")["agent"] == "bot"


def test_a_story_reads_a_bounded_number_of_events(
        api: RestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    call = api.execute("bot", "charge", INVOICE).json()["call_id"]
    whole = _story(api, call)
    assert whole["truncated"] is False and len(whole["steps"]) == 6
    monkeypatch.setattr(story_module, "MAX_EVENTS", 6)
    assert _story(api, call) == whole  # exactly at the cap: all of it
    monkeypatch.setattr(story_module, "MAX_EVENTS", 4)
    cut = _story(api, call)
    assert cut["truncated"] is True
    assert cut["steps"] == whole["steps"][:4]  # the first ones


def test_a_repeated_call_answered_from_the_first_has_its_status(api: RestClient) -> None:
    first = api.execute("bot", "charge", INVOICE, idempotency_key="inv-7").json()
    again = api.execute("bot", "charge", INVOICE, idempotency_key="inv-7").json()
    assert again["deduped"] is True and again["call_id"] == first["call_id"]  # its answer
    api.gw.flush()
    [deduped] = api.gw.store.audit.list("default", types=["call.deduped"])
    assert deduped.call_id and deduped.call_id != first["call_id"]
    story = _story(api, deduped.call_id)
    assert (story["status"], story["outcome"]) == ("succeeded", None)
    assert story["steps"][-1]["detail"] == f"answered from the earlier call {first['call_id']}"


def test_a_preview_token_is_never_told(api: RestClient) -> None:
    """A preview's id is the token that lets its call run: the story names neither."""
    shown = api.execute("sup", "email", {"to": "a@example.com"}).json()
    token = shown["preview_token"]
    assert shown["status"] == "preview_required" and token
    ran = api.execute("sup", "email", {"to": "a@example.com"}, preview_token=token).json()
    assert ran["status"] == "succeeded", ran
    for call_id in (shown["call_id"], ran["call_id"]):
        story = api.get("operator", f"/calls/{call_id}/story")
        assert story.status_code == 200 and token not in story.text
        assert story.json()["approvals"] == []
    first, second = _story(api, shown["call_id"]), _story(api, ran["call_id"])
    assert first["status"] == "preview_required"
    assert second["gate"]["why"] == "allowed by the preview the caller confirmed"
    assert "the confirmed preview was used by this call" in [s["detail"] for s in second["steps"]]
    assert first["related"] == [{"call_id": ran["call_id"], "relation": "resubmitted_as"}]
    assert second["related"] == [{"call_id": shown["call_id"], "relation": "resubmission_of"}]


def test_an_agent_reads_no_other_agents_approval_on_its_call(api: RestClient) -> None:
    """The approvals API's rule holds in a story too: an agent sees only its own (an
    approval of another agent naming this call is planted in the store)."""
    ran = api.execute("bot", "charge", INVOICE).json()["call_id"]
    planted = api.gw.store.approvals.get(api.execute(
        "intern", "bank", INVOICE, action="pay").json()["approval_id"])
    assert planted is not None
    planted.id, planted.call_id = "ap-planted", ran
    api.gw.store.approvals.create(planted)
    assert [a["id"] for a in _story(api, ran)["approvals"]] == ["ap-planted"]
    assert _story(api, ran, who="bot")["approvals"] == []
