"""SPEC §3 and §4 over HTTP: the approval flow end to end (approve, edit, confirm, deny),
who may decide, recorded calls and the manual resolution of unknown outcomes, tenant
isolation (another tenant's ids are 404, not 403)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient, assert_error

INVOICE = {"invoice": "inv-7", "amount": 120}


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def _ask_approval(api: RestClient, args: dict[str, Any] = INVOICE) -> str:
    resp = api.execute("intern", "bank", args, action="pay")
    assert resp.status_code == 200 and resp.json()["status"] == "approval_required"
    approval_id: str = resp.json()["approval_id"]
    return approval_id


def _ask_confirmation(api: RestClient) -> str:
    resp = api.execute("sup", "bank", INVOICE, action="pay")
    assert resp.status_code == 200 and resp.json()["status"] == "confirmation_required"
    approval_id: str = resp.json()["approval_id"]
    return approval_id


def test_approved_call_runs_when_resubmitted_with_its_approval(api: RestClient) -> None:
    approval_id = _ask_approval(api)
    inbox = api.client.get("/approvals", params={"status": "pending"},
                           headers=api.auth("approver"))
    assert inbox.status_code == 200
    [pending] = [a for a in inbox.json() if a["id"] == approval_id]
    assert (pending["agent"], pending["tool"], pending["action"]) == ("intern", "bank", "pay")
    assert pending["arguments"] == INVOICE and pending["gate"] == "approve"
    ok = api.client.post(f"/approvals/{approval_id}/approve", json={"note": "fine"},
                         headers=api.auth("approver"))
    assert ok.status_code == 200 and ok.json()["status"] == "approved"
    run = api.execute("intern", "bank", INVOICE, action="pay", approval_id=approval_id)
    assert run.status_code == 200
    assert (run.json()["status"], run.json()["output"]["invoice"]) == ("succeeded", "inv-7")
    consumed = api.client.get(f"/approvals/{approval_id}", headers=api.auth("approver"))
    assert consumed.json()["status"] == "consumed"
    assert approval_id not in [a["id"] for a in api.client.get(
        "/approvals", headers=api.auth("approver")).json()]


def test_approval_with_edited_arguments_binds_the_edit(api: RestClient) -> None:
    approval_id = _ask_approval(api)
    edited = {"invoice": "inv-7", "amount": 100}
    ok = api.client.post(f"/approvals/{approval_id}/approve", json={"arguments": edited},
                         headers=api.auth("approver"))
    assert ok.status_code == 200 and ok.json()["edited_arguments"] == edited
    original = api.execute("intern", "bank", INVOICE, action="pay", approval_id=approval_id)
    assert original.status_code == 200 and original.json()["reason"] == "approval_mismatch"
    run = api.execute("intern", "bank", edited, action="pay", approval_id=approval_id)
    assert run.json()["status"] == "succeeded" and run.json()["output"]["amount"] == 100


def test_agent_cannot_approve_its_own_call(api: RestClient) -> None:
    approval_id = _ask_approval(api)
    resp = api.client.post(f"/approvals/{approval_id}/approve", headers=api.auth("intern"))
    assert_error(resp, 403, "approver_not_allowed")
    by_confirm = api.client.post(f"/approvals/{approval_id}/confirm",
                                 headers=api.auth("intern"))
    assert_error(by_confirm, 403, "approver_not_allowed")
    still = api.client.get(f"/approvals/{approval_id}", headers=api.auth("approver"))
    assert still.json()["status"] == "pending"


def test_operator_without_approver_role_cannot_approve(api: RestClient) -> None:
    approval_id = _ask_approval(api)
    resp = api.client.post(f"/approvals/{approval_id}/approve", headers=api.auth("operator"))
    assert_error(resp, 403, "approver_not_allowed")


def test_confirm_gate_is_confirmed_by_the_agents_own_token(api: RestClient) -> None:
    approval_id = _ask_confirmation(api)
    other = api.client.post(f"/approvals/{approval_id}/confirm", headers=api.auth("bot"))
    assert_error(other, 403, "approver_not_allowed")
    ok = api.client.post(f"/approvals/{approval_id}/confirm", headers=api.auth("sup"))
    assert ok.status_code == 200 and ok.json()["status"] == "approved"
    run = api.execute("sup", "bank", INVOICE, action="pay", approval_id=approval_id)
    assert run.status_code == 200 and run.json()["status"] == "succeeded"
    twice = api.client.post(f"/approvals/{approval_id}/confirm", headers=api.auth("sup"))
    assert_error(twice, 409, "invalid_state")


def test_denied_approval_stops_the_resubmitted_call(api: RestClient) -> None:
    approval_id = _ask_approval(api)
    denied = api.client.post(f"/approvals/{approval_id}/deny", json={"note": "not today"},
                             headers=api.auth("approver"))
    assert denied.status_code == 200
    assert (denied.json()["status"], denied.json()["note"]) == ("denied", "not today")
    run = api.execute("intern", "bank", INVOICE, action="pay", approval_id=approval_id)
    assert run.status_code == 200
    assert run.json()["reason"] == "approval_denied" and run.json()["status"] != "succeeded"
    again = api.client.post(f"/approvals/{approval_id}/approve", headers=api.auth("approver"))
    assert_error(again, 409, "invalid_state")


def test_agent_sees_only_its_own_approvals(api: RestClient) -> None:
    approval_id = _ask_approval(api)
    mine = api.client.get("/approvals", headers=api.auth("intern")).json()
    assert [a["id"] for a in mine] == [approval_id]
    assert api.client.get("/approvals", headers=api.auth("bot")).json() == []
    resp = api.client.get(f"/approvals/{approval_id}", headers=api.auth("bot"))
    assert_error(resp, 404, "not_found")


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/approvals/{id}"), ("POST", "/approvals/{id}/approve"),
    ("POST", "/approvals/{id}/deny"), ("POST", "/approvals/{id}/confirm"),
])
def test_another_tenants_approval_is_404(api: RestClient, method: str, path: str) -> None:
    approval_id = _ask_approval(api)
    resp = api.client.request(method, path.format(id=approval_id),
                              headers=api.auth("acme_admin"))
    assert_error(resp, 404, "not_found")
    assert api.client.get("/approvals", headers=api.auth("acme_admin")).json() == []


def test_unknown_approval_id_is_404(api: RestClient) -> None:
    resp = api.client.post("/approvals/ap_nope/approve", headers=api.auth("approver"))
    assert_error(resp, 404, "not_found")


def _unknown_call(api: RestClient) -> str:
    resp = api.execute("bot", "lost", {"x": 1}, idempotency_key="lost-1")
    assert resp.status_code == 200 and resp.json()["status"] == "unknown"
    call_id: str = resp.json()["call_id"]
    return call_id


def test_recorded_call_is_fetched_by_id(api: RestClient) -> None:
    done = api.execute("bot", "charge", INVOICE, idempotency_key="c1").json()
    resp = api.client.get(f"/calls/{done['call_id']}", headers=api.auth("bot"))
    assert resp.status_code == 200
    body = resp.json()
    assert (body["call_id"], body["status"], body["tool"]) == (done["call_id"], "succeeded",
                                                               "charge")
    assert body["agent"] == "bot" and body["side_effect"] == "irreversible"


def test_calls_are_listed_by_status(api: RestClient) -> None:
    api.execute("bot", "charge", INVOICE, idempotency_key="c2")
    call_id = _unknown_call(api)
    unknown = api.client.get("/calls", params={"status": "unknown"},
                             headers=api.auth("operator"))
    assert unknown.status_code == 200
    assert [c["call_id"] for c in unknown.json()] == [call_id]
    everything = api.client.get("/calls", headers=api.auth("operator")).json()
    assert {c["status"] for c in everything} == {"succeeded", "unknown"}


def test_operator_resolves_an_unknown_call(api: RestClient) -> None:
    call_id = _unknown_call(api)
    again = api.execute("bot", "lost", {"x": 1}, idempotency_key="lost-1")
    assert again.json()["reason"] == "outcome_unknown"  # never re-executed by itself
    resp = api.client.post(f"/calls/{call_id}/resolve",
                           json={"status": "succeeded", "output": 42, "note": "checked"},
                           headers=api.auth("operator"))
    assert resp.status_code == 200, resp.text
    assert (resp.json()["status"], resp.json()["state"]) == ("succeeded", "succeeded")
    assert resp.json()["resolved_by"]
    after = api.execute("bot", "lost", {"x": 1}, idempotency_key="lost-1").json()
    assert (after["status"], after["deduped"], after["output"]) == ("succeeded", True, 42)
    twice = api.client.post(f"/calls/{call_id}/resolve", json={"status": "failed"},
                            headers=api.auth("operator"))
    assert_error(twice, 409, "invalid_state")


def test_agent_cannot_resolve_a_call(api: RestClient) -> None:
    call_id = _unknown_call(api)
    resp = api.client.post(f"/calls/{call_id}/resolve", json={"status": "succeeded"},
                           headers=api.auth("bot"))
    assert_error(resp, 403, "forbidden")


def test_resolve_needs_a_final_status(api: RestClient) -> None:
    call_id = _unknown_call(api)
    resp = api.client.post(f"/calls/{call_id}/resolve", json={"status": "unknown"},
                           headers=api.auth("operator"))
    assert_error(resp, 422, "invalid_arguments")


def test_another_tenants_call_is_404(api: RestClient) -> None:
    call_id = _unknown_call(api)
    assert_error(api.client.get(f"/calls/{call_id}", headers=api.auth("acme_admin")),
                 404, "not_found")
    resolve = api.client.post(f"/calls/{call_id}/resolve", json={"status": "failed"},
                              headers=api.auth("acme_admin"))
    assert_error(resolve, 404, "not_found")
    assert api.client.get("/calls", headers=api.auth("acme_admin")).json() == []


def test_agent_cannot_see_another_agents_call(api: RestClient) -> None:
    call_id = _unknown_call(api)
    assert_error(api.client.get(f"/calls/{call_id}", headers=api.auth("other-bot")),
                 404, "not_found")
    assert api.client.get("/calls", headers=api.auth("other-bot")).json() == []
