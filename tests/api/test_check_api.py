"""``POST /tools/check`` (issue 29 item 4): the gate asked without running the call.

``allowed: true`` when the call may run now (nothing recorded: the call that follows records
itself); otherwise the result that stops it, as ``/tools/execute`` answers it — an approval
created once and found again by the call, a refusal audited, the statuses SPEC §7 names.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient, assert_error

INVOICE = {"invoice": "inv-1", "amount": 120}


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def check(api: RestClient, who: str, tool: str, arguments: object, **fields: object) -> dict:
    resp = api.post(who, "/tools/check", {"tool": tool, "arguments": arguments, **fields})
    assert resp.status_code == 200, resp.text
    body: dict = resp.json()
    return body


def test_an_allowed_call_is_allowed_and_nothing_runs_or_is_recorded(api: RestClient) -> None:
    assert check(api, "bot", "add", {"a": 2, "b": 3}, idempotency_key="k1") == {
        "allowed": True, "result": None}
    api.gw.flush()
    assert api.gw.calls.list("default") == []
    assert api.gw.store.audit.list("default", tool="add") == []
    ran = api.execute("bot", "add", {"a": 2, "b": 3}, idempotency_key="k1").json()
    assert (ran["status"], ran["output"]) == ("succeeded", 5)


def test_a_gated_call_creates_its_approval_once_and_the_call_finds_it(api: RestClient) -> None:
    first = check(api, "intern", "bank", INVOICE, action="pay", turn_group_id="t1")
    assert first["allowed"] is False
    result = first["result"]
    assert (result["status"], result["reason"]) == ("approval_required", "approval_required")
    again = check(api, "intern", "bank", INVOICE, action="pay", turn_group_id="t1")
    assert again["result"]["approval_id"] == result["approval_id"]  # never a second one
    assert api.post("approver", f"/approvals/{result['approval_id']}/approve").status_code == 200
    assert check(api, "intern", "bank", INVOICE, action="pay", turn_group_id="t1") == {
        "allowed": True, "result": None}
    ran = api.execute("intern", "bank", INVOICE, action="pay", turn_group_id="t1").json()
    assert ran["status"] == "succeeded"


def test_a_refusal_is_its_result_and_audited_once(api: RestClient) -> None:
    body = check(api, "intern", "bank", INVOICE, action="wire")
    assert (body["allowed"], body["result"]["status"], body["result"]["reason"]) == (
        False, "denied", "gate_denied")
    api.gw.flush()
    assert [e.type for e in api.gw.store.audit.list("default", tool="bank",
                                                     types=["policy.denied"])] == [
        "policy.denied"]


def test_bad_calls_answer_the_statuses_execute_answers(api: RestClient) -> None:
    resp = api.post("bot", "/tools/check", {"tool": "add", "arguments": {"a": "x"}})
    assert_error(resp, 422, "invalid_arguments")
    resp = api.post("bot", "/tools/check", {"tool": "nope", "arguments": {}})
    assert_error(resp, 404, "tool_not_found")
    resp = api.call("POST", "/tools/check", None, json={"tool": "add", "arguments": {}})
    assert resp.status_code == 401
    assert api.call("GET", "/tools/check").status_code == 405
