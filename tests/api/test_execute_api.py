"""SPEC §7 REST, execution: a call that ran the pipeline answers 200 whatever its status,
except the statuses §7 names (401, 404, 409, 422, 429 with Retry-After), always in the
error shape ``{"error": {"reason", "message", "details"}}``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.exec_fixtures import Gate, api_for
from tests.support.rest import RestClient, assert_error

INVOICE = {"invoice": "inv-1", "amount": 120}


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def test_succeeded_call_answers_200_with_its_output(api: RestClient) -> None:
    resp = api.execute("bot", "add", {"a": 2, "b": 3})
    assert resp.status_code == 200
    body = resp.json()
    assert (body["status"], body.get("reason"), body["output"]) == ("succeeded", None, 5)
    assert body["call_id"] and body["tool"] == "add" and body["action"] == "run"


@pytest.mark.parametrize(("who", "tool", "action", "status", "reason"), [
    ("intern", "bank", "wire", "denied", "gate_denied"),
    ("intern", "bank", "pay", "approval_required", "approval_required"),
    ("sup", "bank", "pay", "confirmation_required", "confirmation_required"),
    ("sup", "email", None, "preview_required", "preview_required"),
    ("bot", "lost", None, "unknown", "upstream_error"),
    ("bot", "declined", None, "failed", "tool_error"),
])
def test_stopped_calls_answer_200_with_status_and_reason(
        api: RestClient, who: str, tool: str, action: str | None, status: str, reason: str) -> None:
    args: dict[str, Any] = {"to": "a@example.com"} if tool == "email" else (
        {"x": 1} if tool in ("lost", "declined") else INVOICE)
    resp = api.execute(who, tool, args, action=action)
    assert resp.status_code == 200, resp.text
    assert (resp.json()["status"], resp.json()["reason"]) == (status, reason)


def test_stopped_gates_carry_what_the_caller_needs_next(api: RestClient) -> None:
    approval = api.execute("intern", "bank", INVOICE, action="pay").json()
    assert approval["approval_id"] and approval["gate"] == "approve"
    preview = api.execute("sup", "email", {"to": "a@example.com"}).json()
    assert preview["preview_token"] and preview["preview"] is not None


def test_scope_missing_is_a_200_denial(api: RestClient) -> None:
    resp = api.execute("bot", "bank", INVOICE, action="pay", scopes=[])
    assert resp.status_code == 200
    assert (resp.json()["status"], resp.json()["reason"]) == ("denied", "scope_missing")


def test_irreversible_call_in_a_superseded_turn_answers_200_superseded(api: RestClient) -> None:
    assert api.client.post("/turns/t1/supersede", headers=api.auth("bot")).status_code == 200
    resp = api.execute("bot", "charge", INVOICE, turn_group_id="t1")
    assert resp.status_code == 200
    assert (resp.json()["status"], resp.json()["reason"]) == ("superseded", "superseded")


@pytest.mark.parametrize("header", [
    None, "Bearer", "Bearer tk_not-a-real-token", "Basic dXNlcjpwYXNz", "tk_no-scheme",
])
def test_missing_malformed_or_unknown_token_is_401(api: RestClient, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    resp = api.client.post("/tools/execute", json={"tool": "add", "arguments": {}},
                           headers=headers)
    assert_error(resp, 401, "unauthenticated")


def test_revoked_token_is_401(api: RestClient) -> None:
    rec = api.gw.store.tokens.find(api.tokens["bot"])
    assert rec is not None and api.gw.store.tokens.revoke(rec.id)
    assert_error(api.execute("bot", "add", {"a": 1, "b": 1}), 401, "unauthenticated")


def test_unknown_tool_is_404_tool_not_found(api: RestClient) -> None:
    err = assert_error(api.execute("bot", "no-such-tool"), 404, "tool_not_found")
    assert err["details"]["tool"] == "no-such-tool"


def test_invalid_arguments_are_422_with_json_pointers(api: RestClient) -> None:
    err = assert_error(api.execute("bot", "add", {"a": "x", "zzz": 1}), 422,
                       "invalid_arguments")
    pointers = {e["pointer"] for e in err["details"]["details"]["errors"]}
    assert "/a" in pointers
    assert all(p == "" or p.startswith("/") for p in pointers)


def test_reused_key_with_other_arguments_is_422(api: RestClient) -> None:
    first = api.execute("bot", "charge", INVOICE, idempotency_key="k1")
    assert first.status_code == 200 and first.json()["status"] == "succeeded"
    other = api.execute("bot", "charge", {**INVOICE, "amount": 999}, idempotency_key="k1")
    assert_error(other, 422, "idempotency_key_reused")


def test_same_key_and_arguments_return_the_recorded_outcome(api: RestClient) -> None:
    first = api.execute("bot", "charge", INVOICE, idempotency_key="k2").json()
    again = api.execute("bot", "charge", INVOICE, idempotency_key="k2").json()
    assert again["deduped"] is True and not first.get("deduped")
    assert again["call_id"] == first["call_id"] and again["output"] == first["output"]


def test_idempotency_key_header_dedupes_like_the_body_field(api: RestClient) -> None:
    first = api.execute("bot", "charge", INVOICE, headers={"Idempotency-Key": "h1"}).json()
    by_field = api.execute("bot", "charge", INVOICE, idempotency_key="h1").json()
    by_header = api.execute("bot", "charge", INVOICE, headers={"Idempotency-Key": "h1"}).json()
    assert first["status"] == "succeeded" and not first.get("deduped")
    assert by_field["deduped"] and by_header["deduped"]
    assert by_field["call_id"] == by_header["call_id"] == first["call_id"]
    reused = api.execute("bot", "charge", {**INVOICE, "amount": 1},
                         headers={"Idempotency-Key": "h1"})
    assert_error(reused, 422, "idempotency_key_reused")


def test_concurrent_identical_call_is_409_in_progress_and_runs_once(db_url: str) -> None:
    hold = Gate()
    results: list[Any] = []
    with api_for(db_url, hold=hold) as api:
        first = threading.Thread(target=lambda: results.append(
            api.execute("bot", "hold", {"job": "j"}, idempotency_key="slow")))
        first.start()
        try:
            assert hold.started.wait(10), "the first call never reached the tool"
            second = api.execute("bot", "hold", {"job": "j"}, idempotency_key="slow")
            assert_error(second, 409, "idempotency_in_progress")
        finally:
            hold.release.set()
            first.join(10)
    assert not first.is_alive()
    assert results[0].status_code == 200 and results[0].json()["status"] == "succeeded"
    assert hold.runs == 1


def test_rate_limited_call_is_429_with_retry_after(api: RestClient) -> None:
    assert api.execute("bot", "ping").status_code == 200
    resp = api.execute("bot", "ping")
    err = assert_error(resp, 429, "rate_limited")
    assert int(resp.headers["Retry-After"]) >= 1
    assert err["details"]["retry_after"] > 0


def test_operator_token_acts_for_a_named_agent(api: RestClient) -> None:
    resp = api.execute("operator", "charge", INVOICE, agent="bot", idempotency_key="op1")
    assert resp.status_code == 200 and resp.json()["status"] == "succeeded"
    # the call is the agent's: the agent's own token finds the same outcome
    mine = api.execute("bot", "charge", INVOICE, idempotency_key="op1").json()
    assert mine["deduped"] and mine["call_id"] == resp.json()["call_id"]


def test_operator_token_without_an_agent_is_refused(api: RestClient) -> None:
    assert_error(api.execute("operator", "add", {"a": 1, "b": 1}), 422, "invalid_arguments")


def test_agent_token_cannot_act_for_another_agent(api: RestClient) -> None:
    resp = api.execute("bot", "add", {"a": 1, "b": 1}, agent="other-bot")
    assert_error(resp, 403, "forbidden")
    same = api.execute("bot", "add", {"a": 1, "b": 1}, agent="bot")
    assert same.status_code == 200


def test_acting_for_another_tenants_agent_is_unauthenticated(api: RestClient) -> None:
    resp = api.execute("acme_admin", "add", {"a": 1, "b": 1}, agent="bot")
    assert_error(resp, 401, "unauthenticated")
    own = api.execute("acme_admin", "add", {"a": 1, "b": 1}, agent="acme-bot")
    assert own.status_code == 200 and own.json()["output"] == 2


def test_batch_returns_results_in_request_order(api: RestClient) -> None:
    calls = [{"tool": "add", "arguments": {"a": i, "b": 1}} for i in range(5)]
    calls.insert(2, {"tool": "no-such-tool", "arguments": {}})
    for mode in ("sequential", "parallel_safe"):
        resp = api.client.post("/tools/execute-batch", json={"calls": calls, "mode": mode},
                               headers=api.auth("bot"))
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert [r["output"] for r in body] == [1, 2, None, 3, 4, 5]
        assert body[2]["reason"] == "tool_not_found"


@pytest.mark.parametrize("body", [
    {"calls": [{"tool": "add", "arguments": {"a": 1, "b": 1}}], "mode": "whenever"},
    {"calls": []},
    {"calls": [{"tool": "add", "arguments": {}, "bogus": 1}]},
    {"mode": "sequential"},
])
def test_batch_bad_mode_or_calls_is_422(api: RestClient, body: dict[str, Any]) -> None:
    resp = api.client.post("/tools/execute-batch", json=body, headers=api.auth("bot"))
    assert_error(resp, 422, "invalid_arguments")


def test_batch_needs_a_token_and_checks_who_acts(api: RestClient) -> None:
    body = {"calls": [{"tool": "add", "arguments": {"a": 1, "b": 1}}]}
    assert_error(api.client.post("/tools/execute-batch", json=body), 401, "unauthenticated")
    resp = api.client.post("/tools/execute-batch", json={**body, "agent": "other-bot"},
                           headers=api.auth("bot"))
    assert_error(resp, 403, "forbidden")
    ok = api.client.post("/tools/execute-batch", json={**body, "agent": "bot"},
                         headers=api.auth("operator"))
    assert ok.status_code == 200 and ok.json()[0]["output"] == 2
