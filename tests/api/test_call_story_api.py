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
from tests.support.rest import RestClient

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
    assert steps["gate.required"]["detail"] == "gate: approval required — risk high"
    assert steps["approval.granted"]["detail"] == "approved by approver with edits"
    assert first["gate"] == {"gate": "approve", "risk": "high",
                             "why": "risk high needs an approver's decision"}
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
