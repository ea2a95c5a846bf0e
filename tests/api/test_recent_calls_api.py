"""Issue 15 item 6 over HTTP: ``GET /calls/recent`` lists every finished call, whatever
became of it (denied, gated, pure, recorded), with its status and reason, never its
arguments; the log keeps the last ``recent_calls_max`` calls per tenant; agents see their
own calls only."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import text

from tests.api.exec_fixtures import add, add_config, api_for
from tests.support.rest import RestClient, assert_error
from toolkeeper import Activation, Agent, Gateway, Profile
from toolkeeper.api import create_app
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.observability.metrics import Metrics
from toolkeeper.pipeline.recent_calls import RecentCallsLog
from toolkeeper.store import Store
from toolkeeper.store.migrate import alembic_config, current, head, upgrade
from toolkeeper.store.recent_calls import RecentCall


def _result(resp: httpx2.Response) -> dict[str, Any]:
    """The call's result, also when it was refused (an error body carrying the result)."""
    body: dict[str, Any] = resp.json()
    return body["error"]["details"] if "error" in body else body


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def test_denied_gated_pure_and_recorded_calls_are_all_listed(api: RestClient) -> None:
    denied = api.execute("bot", "add", {"a": "one", "b": 2})
    gated = api.execute("intern", "bank", {"invoice": "inv-7", "amount": 120}, action="pay")
    pure = api.execute("bot", "add", {"a": 1, "b": 2}, trace_id="trace-pure")
    recorded = api.execute("bot", "charge", {"invoice": "inv-secret-9", "amount": 5})
    calls = [_result(r) for r in (denied, gated, pure, recorded)]
    assert [c["status"] for c in calls] == [
        "denied", "approval_required", "succeeded", "succeeded"]
    resp = api.get("operator", "/calls/recent")
    assert resp.status_code == 200, resp.text
    rows = {r["call_id"]: r for r in resp.json()}
    seen = [(rows[c["call_id"]]["status"], rows[c["call_id"]]["reason"],
             rows[c["call_id"]]["agent"], rows[c["call_id"]]["tool"]) for c in calls]
    assert seen == [("denied", "invalid_arguments", "bot", "add"),
                    ("approval_required", "approval_required", "intern", "bank"),
                    ("succeeded", None, "bot", "add"), ("succeeded", None, "bot", "charge")]
    assert [r["call_id"] for r in resp.json()] == [c["call_id"] for c in calls[::-1]]
    assert rows[calls[2]["call_id"]]["trace_id"] == "trace-pure"
    assert rows[calls[1]["call_id"]]["action"] == "pay"
    assert all(r["duration_ms"] >= 0 and r["ts"] for r in resp.json())
    assert "inv-secret-9" not in resp.text  # no arguments, no outputs
    only_recorded = api.get("operator", "/calls")
    assert [r["call_id"] for r in only_recorded.json()] == [recorded.json()["call_id"]]


def test_filters_and_pages(api: RestClient) -> None:
    for i in range(3):
        api.execute("bot", "add", {"a": i, "b": 1})
    api.execute("intern", "bank", {"invoice": "inv-7", "amount": 120}, action="pay")
    gated = api.get("approver", "/calls/recent", status="approval_required").json()
    assert [(r["agent"], r["status"]) for r in gated] == [("intern", "approval_required")]
    assert len(api.get("admin", "/calls/recent", agent="bot", tool="add").json()) == 3
    first = api.get("admin", "/calls/recent", limit=2).json()
    rest = api.get("admin", "/calls/recent", limit=2, before=first[-1]["id"]).json()
    assert len(first) == len(rest) == 2
    assert [r["id"] for r in first + rest] == sorted((r["id"] for r in first + rest),
                                                     reverse=True)
    assert_error(api.get("admin", "/calls/recent", limit=0), 422, "invalid_arguments")


def test_a_cursor_or_offset_past_the_stores_integers_is_refused_not_a_500(
        api: RestClient) -> None:
    """The store's integers are 64-bit: a larger ``before`` or tools' ``skip`` is a bad
    request, never an overflow in the driver."""
    for path, param, top in (("/calls/recent", "before", 2**63 - 1), ("/tools", "skip", 2**63 - 1)):
        resp = api.get("admin", path, **{param: top + 1})
        assert resp.status_code == 422, (path, resp.text)
        assert resp.json()["error"]["reason"] == "invalid_arguments"
        assert api.get("admin", path, **{param: top}).status_code == 200, path


def test_agents_see_only_their_own_calls_and_tenants_only_theirs(api: RestClient) -> None:
    api.execute("bot", "add", {"a": 1, "b": 2})
    api.execute("other-bot", "add", {"a": 1, "b": 2})
    api.execute("acme_bot", "add", {"a": 1, "b": 2})
    mine = api.get("bot", "/calls/recent").json()
    assert [r["agent"] for r in mine] == ["bot"]
    asked_for_other = api.get("bot", "/calls/recent", agent="other-bot").json()
    assert [r["agent"] for r in asked_for_other] == ["bot"]
    assert {r["agent"] for r in api.get("operator", "/calls/recent").json()} == {
        "bot", "other-bot"}
    assert [r["agent"] for r in api.get("acme_admin", "/calls/recent").json()] == ["acme-bot"]
    assert api.call("GET", "/calls/recent", who=None).status_code == 401


def _small_log(db_url: str, keep: int) -> tuple[Gateway, str]:
    gw = Gateway.open(db_url, recent_calls_max=keep)
    gw.registry.register(add)
    gw.registry.put_profile(Profile(name="p", autonomy=3,
                                    activations=(Activation(tool="add"),)))
    gw.registry.put_agent(Agent(name="bot", profile="p"))
    return gw, gw.store.tokens.create(tenant_id="default", role="admin")[1]


def test_the_log_keeps_the_newest_n_calls_per_tenant(db_url: str) -> None:
    gw, token = _small_log(db_url, 3)
    try:
        ids = [gw.call_sync("add", arguments={"a": i, "b": 0}, agent="bot").call_id
               for i in range(8)]
        gw.flush()
        ids.append(gw.call_sync("add", arguments={"a": "x"}, agent="bot").call_id)
        with TestClient(create_app(gw)) as client:
            resp = client.get("/calls/recent", headers={"Authorization": f"Bearer {token}"})
        assert resp.status_code == 200, resp.text
        assert [r["call_id"] for r in resp.json()] == ids[::-1][:3]
        assert resp.json()[0]["reason"] == "invalid_arguments"
    finally:
        gw.close()


def test_zero_keeps_no_calls(db_url: str) -> None:
    gw, token = _small_log(db_url, 0)
    try:
        assert gw.call_sync("add", arguments={"a": 1, "b": 0}, agent="bot").ok
        with TestClient(create_app(gw)) as client:
            resp = client.get("/calls/recent", headers={"Authorization": f"Bearer {token}"})
        assert resp.status_code == 200 and resp.json() == []
    finally:
        gw.close()


def test_a_full_queue_drops_and_counts_instead_of_waiting(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path}/tk.db")
    metrics = Metrics()
    log = RecentCallsLog(store.recent_calls, 10, metrics, max_delay_s=60, max_pending=2)
    try:
        for n in range(3):
            log.record(CallResult(call_id=f"c{n}", status=CallStatus.DENIED, tool="add",
                                  reason="scope_missing"), "default", "bot", None)
        text = metrics.render("default").decode()
        assert 'tool_recent_calls_dropped_total{tenant="default"} 1.0' in text
    finally:
        log.close()
        kept = store.recent_calls.list("default")
        store.close()
    assert [r.call_id for r in kept] == ["c1", "c0"]


@pytest.mark.empty_database
def test_migration_0007_adds_the_log_and_downgrades_cleanly(db_url: str) -> None:
    upgrade(db_url, "0006")
    Store.open(db_url).close()
    assert current(db_url) == head()
    command.downgrade(alembic_config(db_url), "0006")
    assert current(db_url) == "0006"
    store = Store.open(db_url)
    try:
        store.recent_calls.append([RecentCall(
            tenant_id="t", call_id="c1", ts=datetime.now(UTC), agent=None, tool="x",
            action=None, tool_version=None, status="denied", reason="tool_not_found",
            duration_ms=0.5, trace_id=None)], keep=5)
        [row] = store.recent_calls.list("t")
        assert (row.call_id, row.reason, row.ts.tzinfo) == ("c1", "tool_not_found", UTC)
    finally:
        store.close()


def test_the_log_goes_on_past_32_bit_ids(db_url: str) -> None:
    """Ids grow with every call ever logged (trimmed rows leave the sequence where it was):
    past 2**31 the log still takes calls and pages by them (0014 made them 64-bit on
    PostgreSQL; SQLite's rowid always was)."""
    store = Store.open(db_url)
    try:
        late = 2**31 + 7
        with store.db.write() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text(f"ALTER SEQUENCE recent_calls_id_seq RESTART WITH {late}"))
            else:
                conn.execute(text(f"INSERT INTO recent_calls (id, tenant_id, call_id, ts, tool, "
                                  f"status, duration_ms) VALUES ({late - 1}, 'other', 'c0', "
                                  "'2026-11-28 00:00:00', 'x', 'denied', 0)"))
        store.recent_calls.append([RecentCall(
            tenant_id="t", call_id=f"c{i}", ts=datetime.now(UTC), agent=None, tool="x",
            action=None, tool_version=None, status="denied", reason=None, duration_ms=0.5,
            trace_id=None) for i in (1, 2)], keep=5)
        newest, older = store.recent_calls.list("t")
        assert older.id >= late and newest.id > older.id, (older.id, newest.id)
        assert [r.call_id for r in store.recent_calls.list("t", before=newest.id)] == ["c1"]
    finally:
        store.close()


def test_the_config_file_sets_the_bound(tmp_path: Path) -> None:
    config = add_config(tmp_path, "{recent_calls_max: 2}")
    with Gateway.open(f"sqlite:///{tmp_path}/tk.db", config=config) as gw:
        ids = [gw.call_sync("add", arguments={"a": i, "b": 0}, agent="bot").call_id
               for i in range(4)]
        token = gw.store.tokens.create(tenant_id="default", role="operator")[1]
        with TestClient(create_app(gw)) as client:
            resp = client.get("/calls/recent", headers={"Authorization": f"Bearer {token}"})
    assert [r["call_id"] for r in resp.json()] == ids[:1:-1]
