"""What the approvals inbox reads over REST: an approval past its expiry reads ``expired``
(one, the list and its status filter) and a decision on it is refused with
``approval_expired``; an approval carries the tool's preview of the effect (SPEC §3, §6)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient, assert_error

INVOICE = {"invoice": "inv-9", "amount": 40}


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def _expired_approval(api: RestClient) -> str:
    api.gw.settings.approval_ttl = timedelta(seconds=-1)  # expired as soon as it is made
    resp = api.execute("intern", "bank", INVOICE, action="pay")
    assert resp.json()["status"] == "approval_required"
    approval_id: str = resp.json()["approval_id"]
    return approval_id


def test_an_expired_approval_reads_expired_not_pending(api: RestClient) -> None:
    approval_id = _expired_approval(api)
    one = api.client.get(f"/approvals/{approval_id}", headers=api.auth("approver"))
    assert one.status_code == 200 and one.json()["status"] == "expired"
    by_agent = api.client.get(f"/approvals/{approval_id}", headers=api.auth("intern"))
    assert by_agent.json()["status"] == "expired"


def test_the_status_filter_lists_expired_approvals_as_expired(api: RestClient) -> None:
    approval_id = _expired_approval(api)
    listed = {s: [a["id"] for a in api.client.get(
        "/approvals", params={"status": s}, headers=api.auth("approver")).json()]
        for s in ("pending", "expired")}
    assert approval_id not in listed["pending"] and approval_id in listed["expired"]
    every = api.client.get("/approvals", params={"status": ""}, headers=api.auth("approver"))
    assert {a["id"]: a["status"] for a in every.json()}[approval_id] == "expired"


@pytest.mark.parametrize("verb", ["approve", "deny"])
def test_a_decision_on_an_expired_approval_is_refused(api: RestClient, verb: str) -> None:
    approval_id = _expired_approval(api)
    resp = api.client.post(f"/approvals/{approval_id}/{verb}", json={},
                           headers=api.auth("approver"))
    assert_error(resp, 409, "approval_expired")
    after = api.client.get(f"/approvals/{approval_id}", headers=api.auth("approver"))
    assert after.json()["status"] == "expired" and after.json()["decided_by"] is None


def test_a_gated_call_with_a_preview_shows_it_to_the_approver(api: RestClient) -> None:
    resp = api.execute("intern", "email", {"to": "ann@example.com"}, action="send")
    assert resp.json()["status"] == "confirmation_required"
    approval_id = resp.json()["approval_id"]
    one = api.client.get(f"/approvals/{approval_id}", headers=api.auth("approver")).json()
    assert one["preview"] == {"summary": "email to ann@example.com",
                              "data": {"to": "ann@example.com"}}
    [listed] = [a for a in api.client.get("/approvals", headers=api.auth("approver")).json()
                if a["id"] == approval_id]
    assert listed["preview"] == one["preview"] and listed["expires_at"] == one["expires_at"]


def test_a_tool_without_preview_has_none(api: RestClient) -> None:
    resp = api.execute("intern", "bank", INVOICE, action="pay")
    one = api.client.get(f"/approvals/{resp.json()['approval_id']}",
                         headers=api.auth("approver")).json()
    assert one["preview"] is None and one["tool_version"] and one["expires_at"]


def test_edited_arguments_outside_the_schema_are_refused_and_nothing_is_decided(
        api: RestClient) -> None:
    resp = api.execute("intern", "bank", INVOICE, action="pay")
    approval_id = resp.json()["approval_id"]
    bad = api.client.post(f"/approvals/{approval_id}/approve",
                          json={"arguments": {"invoice": "inv-9", "amount": "lots"}},
                          headers=api.auth("approver"))
    assert_error(bad, 422, "invalid_arguments")
    assert "/amount" in bad.json()["error"]["message"]
    after = api.client.get(f"/approvals/{approval_id}", headers=api.auth("approver"))
    assert after.json()["status"] == "pending"
