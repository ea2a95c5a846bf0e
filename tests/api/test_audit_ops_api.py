"""SPEC §7 REST audit and ops, §8 (hash-chained audit, verify detects edits), §9 (metric
names), §4 (supersede, compensation) over HTTP, with the roles each endpoint needs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient, assert_error

INVOICE = {"invoice": "inv-3", "amount": 50}
METRICS = ("tool_execution_duration_seconds", "tool_execution_total",
           "tool_idempotency_cache_hits_total", "tool_side_effect_total",
           "tool_gate_decisions_total", "tool_denials_total", "approvals_pending")


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def _audit(api: RestClient, who: str = "operator", **params: Any) -> dict[str, Any]:
    resp = api.client.get("/audit", params=params, headers=api.auth(who))
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def _some_calls(api: RestClient) -> dict[str, str]:
    ids = {"add": api.execute("bot", "add", {"a": 1, "b": 2}).json()["call_id"],
           "charge": api.execute("bot", "charge", INVOICE).json()["call_id"],
           "declined": api.execute("other-bot", "declined", {"x": 1}).json()["call_id"]}
    return ids


def test_audit_filters_by_call_agent_and_tool(api: RestClient) -> None:
    ids = _some_calls(api)
    by_call = _audit(api, call_id=ids["add"])["events"]
    assert by_call and {e["call_id"] for e in by_call} == {ids["add"]}
    by_agent = _audit(api, agent="other-bot")["events"]
    assert by_agent and {e["agent_id"] for e in by_agent} == {"other-bot"}
    by_tool = _audit(api, tool="charge")["events"]
    assert by_tool and {e["tool"] for e in by_tool} == {"charge"}
    assert {"call.succeeded"} <= {e["type"] for e in by_tool}


def test_audit_filters_by_event_types(api: RestClient) -> None:
    _some_calls(api)
    events = _audit(api, type=["call.succeeded", "call.failed"])["events"]
    assert {e["type"] for e in events} == {"call.succeeded", "call.failed"}
    assert {e["tool"] for e in events if e["type"] == "call.failed"} == {"declined"}


def test_audit_filters_by_time_range(api: RestClient) -> None:
    _some_calls(api)
    every = _audit(api)["events"]
    middle = every[len(every) // 2]
    since = _audit(api, since=middle["ts"])["events"]
    until = _audit(api, until=middle["ts"])["events"]
    assert middle["seq"] in {e["seq"] for e in since}
    assert middle["seq"] not in {e["seq"] for e in until}
    assert all(e["ts"] >= middle["ts"] for e in since)
    assert all(e["ts"] < middle["ts"] for e in until)
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert _audit(api, since=future)["events"] == []


def test_audit_pages_with_a_cursor_without_gaps_or_repeats(api: RestClient) -> None:
    _some_calls(api)
    every = [e["seq"] for e in _audit(api, limit=1000)["events"]]
    assert len(every) > 4
    seen: list[int] = []
    cursor: int | None = 0
    for _ in range(len(every) + 1):  # bounded: one page per event at most
        page = _audit(api, limit=2, cursor=cursor)
        seen += [e["seq"] for e in page["events"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == every


def test_audit_shows_a_call_right_after_it_returns(api: RestClient) -> None:
    call_id = api.execute("bot", "add", {"a": 1, "b": 1}).json()["call_id"]
    assert _audit(api, call_id=call_id)["events"], "a stopped or pure call's events lag"


def test_audit_is_per_tenant(api: RestClient) -> None:
    ids = _some_calls(api)
    assert _audit(api, "acme_admin", call_id=ids["add"])["events"] == []
    assert all(e["tenant_id"] == "acme" for e in _audit(api, "acme_admin")["events"])


def test_audit_verify_is_ok_then_detects_a_tampered_row(api: RestClient) -> None:
    _some_calls(api)
    ok = api.client.get("/audit/verify", headers=api.auth("operator"))
    assert ok.status_code == 200
    assert (ok.json()["ok"], ok.json()["problems"]) == (True, [])
    assert ok.json()["events"] > 0 and ok.json()["tenant_id"] == "default"
    with api.gw.store.db.write() as conn:
        conn.execute(text("UPDATE audit_events SET reason = 'nothing to see' "
                          "WHERE tenant_key = 'default' AND seq = 2"))
    bad = api.client.get("/audit/verify", headers=api.auth("operator")).json()
    assert bad["ok"] is False
    assert any("seq 2" in p for p in bad["problems"])


def test_audit_verify_detects_a_deleted_row(api: RestClient) -> None:
    _some_calls(api)
    with api.gw.store.db.write() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE tenant_key = 'default' AND seq = 3"))
    bad = api.client.get("/audit/verify", headers=api.auth("approver")).json()
    assert bad["ok"] is False and bad["problems"]


@pytest.mark.parametrize("path", ["/audit", "/audit/verify", "/metrics"])
def test_agent_token_cannot_read_audit_or_metrics(api: RestClient, path: str) -> None:
    assert_error(api.client.get(path, headers=api.auth("bot")), 403, "forbidden")
    assert_error(api.client.get(path), 401, "unauthenticated")


def test_liveness_and_readiness_answer_without_a_token(api: RestClient) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok"}
    ready = api.client.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


def test_metrics_expose_the_spec_names(api: RestClient) -> None:
    _some_calls(api)
    api.execute("intern", "bank", INVOICE, action="pay")  # one pending approval
    resp = api.client.get("/metrics", headers=api.auth("operator"))
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    for name in METRICS:
        assert name in resp.text, name
    assert 'tool_execution_total{' in resp.text and 'tool="add"' in resp.text


def test_supersede_stops_later_irreversible_calls_of_that_turn_only(api: RestClient) -> None:
    before = api.execute("bot", "charge", INVOICE, turn_group_id="t1").json()
    assert before["status"] == "succeeded"
    refused = api.client.post("/turns/t1/supersede", headers=api.auth("approver"))
    assert_error(refused, 403, "forbidden")  # approvers decide approvals, not turns
    resp = api.client.post("/turns/t1/supersede", headers=api.auth("operator"))
    assert resp.status_code == 200 and resp.json()["superseded"] is True
    after = api.execute("bot", "charge", {**INVOICE, "amount": 1}, turn_group_id="t1")
    assert (after.status_code, after.json()["status"]) == (200, "superseded")
    pure = api.execute("bot", "add", {"a": 1, "b": 1}, turn_group_id="t1").json()
    assert pure["status"] == "succeeded"
    other_turn = api.execute("bot", "charge", INVOICE, turn_group_id="t2").json()
    assert other_turn["status"] == "succeeded"


def test_supersede_in_another_tenant_does_not_touch_this_one(api: RestClient) -> None:
    api.client.post("/turns/t3/supersede", headers=api.auth("acme_admin"))
    resp = api.execute("bot", "charge", INVOICE, turn_group_id="t3").json()
    assert resp["status"] == "succeeded"


def _paid(api: RestClient) -> str:
    resp = api.execute("bot", "bank", INVOICE, action="pay").json()
    assert resp["status"] == "succeeded" and resp["side_effect_id"]
    side_effect_id: str = resp["side_effect_id"]
    return side_effect_id


def test_compensation_runs_once_through_the_pipeline(api: RestClient) -> None:
    effect = _paid(api)
    resp = api.client.post(f"/side-effects/{effect}/compensate", headers=api.auth("operator"))
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["status"], body["tool"], body["action"]) == ("succeeded", "bank", "refund")
    assert body["output"] == {"done": "refund", "invoice": "inv-3", "amount": 50}
    again = api.client.post(f"/side-effects/{effect}/compensate", headers=api.auth("operator"))
    assert_error(again, 409, "already_compensated")


def test_compensation_is_refused_to_others(api: RestClient) -> None:
    effect = _paid(api)
    assert_error(api.client.post(f"/side-effects/{effect}/compensate",
                                 headers=api.auth("other-bot")), 403, "forbidden")
    assert_error(api.client.post(f"/side-effects/{effect}/compensate",
                                 headers=api.auth("acme_admin")), 404, "not_found")
    assert_error(api.client.post("/side-effects/nope/compensate",
                                 headers=api.auth("operator")), 404, "not_found")


def test_compensating_an_effect_without_compensation_is_422(api: RestClient) -> None:
    effect = api.execute("bot", "charge", INVOICE).json()["side_effect_id"]
    resp = api.client.post(f"/side-effects/{effect}/compensate", headers=api.auth("bot"))
    assert_error(resp, 422, "compensation_not_defined")
