"""Issue 30 item 1, the backend: ``GET /stats/overview`` over a real app and store (SQLite
and PostgreSQL). Calls made through the gateway show up by status, denial reason and
tool; approvals requested and decided with their wait; unknown outcomes and pending
approvals; buckets hold what falls in them and nothing from outside the window; another
tenant's calls are never counted; agents are refused."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.api.exec_fixtures import add_config, api_for
from tests.support.rest import RestClient, assert_error
from toolkeeper import Gateway
from toolkeeper.model.enums import ApprovalStatus, ToolStatus
from toolkeeper.services.overview import overview
from toolkeeper.store.records import ApprovalRecord
from toolkeeper.store.stats import CallStatsRepo, FinishedCall, call_stats

INVOICE = {"invoice": "inv-7", "amount": 120}


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def _overview(api: RestClient, who: str = "operator", window: str = "hour") -> dict[str, Any]:
    resp = api.get(who, "/stats/overview", window=window)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def _result(resp: Any) -> dict[str, Any]:
    body: dict[str, Any] = resp.json()
    return body["error"]["details"] if "error" in body else body


def _totals(body: dict[str, Any]) -> dict[str, int]:
    return {s: sum(v) for s, v in body["calls"]["by_status"].items()}


def test_calls_made_through_the_gateway_appear_by_status_reason_and_tool(
        api: RestClient) -> None:
    for i in range(3):
        assert api.execute("bot", "add", {"a": i, "b": 1}).status_code == 200
    api.execute("bot", "add", {"a": "one", "b": 2})  # denied: invalid_arguments
    api.execute("bot", "declined", {"x": 1})  # failed
    api.execute("bot", "lost", {"x": 1})  # unknown: may have executed
    api.execute("intern", "bank", INVOICE, action="pay")  # approval_required
    body = _overview(api)
    assert _totals(body) == {"succeeded": 3, "failed": 1, "denied": 1,
                             "approval_required": 1, "unknown": 1}
    assert list(body["calls"]["by_status"]) == [  # in the order of the call statuses
        "succeeded", "failed", "denied", "approval_required", "unknown"]
    assert body["calls"]["total"] == 7
    assert body["denials"] == [{"reason": "invalid_arguments", "count": 1}]
    slow = {t["tool"]: t for t in body["slowest_tools"]}
    assert set(slow) == {"add", "declined", "lost"}  # the denied and gated calls never ran
    assert slow["add"]["calls"] == 3
    assert 0 <= slow["add"]["p50_ms"] <= slow["add"]["p95_ms"]
    assert body["unknown_outcomes"]["count"] == 1 and body["unknown_outcomes"]["oldest"]
    assert body["pending_approvals"] == 1
    a = body["approvals"]
    assert (a["requested_total"], a["pending"], sum(a["decided"])) == (1, 1, 0)
    assert a["wait_ms"] == {"p50": None, "p95": None, "max": None}
    assert (len(body["buckets"]), body["step_s"], body["window"]) == (60, 60, "hour")
    assert all(len(v) == 60 for v in body["calls"]["by_status"].values())
    assert body["buckets"][0] == body["since"]


def test_a_decided_approval_counts_with_its_wait(api: RestClient) -> None:
    asked = [_result(api.execute("intern", "bank", {**INVOICE, "amount": n}, action="pay"))
             for n in (1, 2, 3)]
    ok = api.post("approver", f"/approvals/{asked[0]['approval_id']}/approve", {"note": "ok"})
    assert ok.status_code == 200, ok.text
    no = api.post("approver", f"/approvals/{asked[1]['approval_id']}/deny", {})
    assert no.status_code == 200, no.text
    for window, n in (("hour", 60), ("day", 24), ("week", 168)):
        a = _overview(api, "approver", window)["approvals"]
        assert (len(a["requested"]), len(a["decided"])) == (n, n)
        assert (a["requested_total"], a["approved"], a["denied"], a["pending"]) == (
            3, 1, 1, 1), window
        assert sum(a["decided"]) == 2
        wait = a["wait_ms"]
        assert 0 <= wait["p50"] <= wait["p95"] <= wait["max"]


def test_the_day_and_week_read_hour_buckets(api: RestClient) -> None:
    api.execute("bot", "add", {"a": 1, "b": 1})
    for window, n in (("day", 24), ("week", 168)):
        body = _overview(api, window=window)
        assert (len(body["buckets"]), body["step_s"]) == (n, 3600)
        assert body["calls"]["by_status"]["succeeded"][-1] == 1  # the current hour
        start, end = (datetime.fromisoformat(body[k]) for k in ("since", "until"))
        assert end - start == timedelta(hours=n) and start.minute == start.second == 0


def _approval(tenant: str, created: datetime, *, decided: datetime | None = None,
              n: int = 0) -> ApprovalRecord:
    return ApprovalRecord(
        id=f"ap-{tenant}-{created.timestamp()}-{n}", tenant_id=tenant, agent="bot",
        kind="approve", tool="bank", action="pay", tool_version="1", args_digest="d",
        arguments=None, risk="high", gate="approve", policy_version="p",
        status=ApprovalStatus.PENDING if decided is None else ApprovalStatus.APPROVED,
        created_at=created, expires_at=created + timedelta(days=1),
        decided_at=decided, decided_by=None if decided is None else "amy")


def test_buckets_hold_their_calls_and_nothing_from_outside_the_window(db_url: str) -> None:
    now = 1_799_971_200 + 3600 * 5 + 60 * 7 + 12  # 2027-01-15 05:07:12 UTC
    with Gateway.open(db_url) as gw:
        gw.store.call_stats.add([FinishedCall(tenant_id="default", tool="add",
                                              status="succeeded", reason=None,
                                              duration_ms=1.0, ts=ts) for ts in (
            now,  # the current minute: the last bucket
            now - 60,  # the previous minute
            now - 3600 + 48,  # 04:08:00, the first minute of the hour window
            now - 3600 + 47,  # 04:07:59: outside the hour window, in the day's
            now - 86400 * 7 - 3600)])  # outside even the week
        at = datetime.fromtimestamp(now, UTC)
        for i, created in enumerate((at - timedelta(seconds=30), at - timedelta(minutes=90))):
            gw.store.approvals.create(_approval("default", created,
                                                decided=created + timedelta(seconds=4), n=i))

        def view(window: str) -> dict[str, Any]:
            return overview(gw.store, gw.catalog, gw.runtime.health, "default", window,
                            approval_ttl=timedelta(days=1), now=now)

        hour = view("hour")
        assert hour["buckets"][0].startswith("2027-01-15T04:08:00")
        assert hour["until"].startswith("2027-01-15T05:08:00")
        series = hour["calls"]["by_status"]["succeeded"]
        assert (series[-1], series[-2], series[0], sum(series)) == (1, 1, 1, 3)
        assert hour["approvals"]["requested"][-2:] == [1, 0]  # 05:06:42
        assert hour["approvals"]["requested_total"] == 1  # the other one is 03:37
        assert hour["approvals"]["decided"][-2:] == [1, 0]  # decided at 05:06:46
        assert hour["approvals"]["wait_ms"] == {"p50": 4000.0, "p95": 4000.0, "max": 4000.0}
        day = view("day")
        series = day["calls"]["by_status"]["succeeded"]
        assert (series[-1], series[-2], sum(series)) == (2, 2, 4)  # 05:0x and 04:0x
        assert day["approvals"]["requested"][-3:] == [1, 0, 1]  # 03:37 and 05:06
        assert day["calls"]["total"] == view("week")["calls"]["total"] == 4


def _isolation_holds(api: RestClient) -> None:
    """Calls, denials, approvals and unknown outcomes of ``acme`` never reach ``default``."""
    for _ in range(2):
        api.execute("acme_bot", "add", {"a": "x", "b": 1})  # denied in acme
        api.execute("acme_bot", "lost", {"x": 1})  # unknown in acme
    api.execute("bot", "add", {"a": 1, "b": 1})
    mine = _overview(api, "operator")
    assert _totals(mine) == {"succeeded": 1}
    assert mine["denials"] == [] and mine["unknown_outcomes"]["count"] == 0
    assert [t["tool"] for t in mine["slowest_tools"]] == ["add"]
    theirs = _overview(api, "acme_admin")
    assert _totals(theirs) == {"denied": 2, "unknown": 2}


def test_another_tenants_calls_are_never_counted(api: RestClient) -> None:
    _isolation_holds(api)


def test_the_isolation_check_fails_when_the_tenant_filter_is_dropped(
        api: RestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken on purpose: rows of every tenant are read, and the check sees it."""
    def every_tenant(_tenant_id: str, resolution: str, since: int, until: int) -> list[Any]:
        c = call_stats.c
        return [c.resolution == resolution, c.bucket_start >= since, c.bucket_start < until]

    monkeypatch.setattr(CallStatsRepo, "_window", staticmethod(every_tenant))
    with pytest.raises(AssertionError):
        _isolation_holds(api)


def test_people_read_it_agents_and_strangers_are_refused(api: RestClient) -> None:
    for who in ("operator", "approver", "admin"):
        assert api.get(who, "/stats/overview").status_code == 200
    assert api.get("operator", "/stats/overview").json()["window"] == "day"  # the default
    assert_error(api.get("bot", "/stats/overview"), 403, "forbidden")
    assert_error(api.call("GET", "/stats/overview", who=None), 401, "unauthenticated")


@pytest.mark.parametrize("window", ["month", "", "HOUR"])
def test_a_bad_window_is_refused(api: RestClient, window: str) -> None:
    assert_error(api.get("operator", "/stats/overview", window=window), 422,
                 "invalid_arguments")


def test_the_setting_turns_the_counting_off(tmp_path: Path) -> None:
    config = add_config(tmp_path, "{call_stats: false, recent_calls_max: 0}")
    with Gateway.open(f"sqlite:///{tmp_path}/tk.db", config=config) as gw:
        gw.call_sync("add", arguments={"a": 1, "b": 0}, agent="bot")
        gw.flush()
        assert gw.settings.call_stats is False
        assert overview(gw.store, gw.catalog, gw.runtime.health, "default", "hour",
                        approval_ttl=timedelta(days=1))["calls"]["total"] == 0


def test_retention_drops_old_minute_and_hour_rows(db_url: str) -> None:
    with Gateway.open(db_url) as gw:
        now = datetime.now(UTC)
        old = (now - timedelta(days=3)).timestamp()
        gw.store.call_stats.add([FinishedCall(tenant_id="default", tool="add",
                                              status="succeeded", reason=None,
                                              duration_ms=1.0, ts=ts)
                                 for ts in (old, (now - timedelta(days=40)).timestamp())])
        report = gw.retention.run(now)
        assert report.call_stats == 3  # both minute rows, the 40-day-old hour row
        with gw.store.db.read() as conn:
            left = [(r.resolution, r.bucket_start) for r in conn.execute(
                call_stats.select())]
        assert left == [("h", int(old // 3600) * 3600)]


def test_the_slowest_tools_are_ranked_by_p95_of_the_calls_that_ran(db_url: str) -> None:
    now = time.time()
    calls = [("fast", "succeeded", 2.0)] * 20 + [("steady", "succeeded", 40.0)] * 20 + [
        ("spiky", "succeeded", 3.0)] * 18 + [("spiky", "failed", 4000.0)] * 2 + [
        ("fast", "denied", 60_000.0)] * 5  # denied: never ran, its time is not the tool's
    with Gateway.open(db_url) as gw:
        gw.store.call_stats.add([FinishedCall(tenant_id="default", tool=t, status=s,
                                              reason=None, duration_ms=ms, ts=now)
                                 for t, s, ms in calls])
        slow = overview(gw.store, gw.catalog, gw.runtime.health, "default", "hour",
                        approval_ttl=timedelta(days=1), now=now)["slowest_tools"]
    assert [(t["tool"], t["calls"]) for t in slow] == [("spiky", 20), ("steady", 20),
                                                       ("fast", 20)]
    assert slow[0]["p50_ms"] <= 5.0 and 2500.0 < slow[0]["p95_ms"] <= 4000.0
    assert 25.0 < slow[1]["p50_ms"] <= slow[1]["p95_ms"] <= 40.0
    assert slow[2]["p95_ms"] <= 2.0


def test_tools_needing_attention_are_listed_with_why(api: RestClient) -> None:
    api.gw.registry.set_status("declined", None, ToolStatus.DISABLED)
    api.gw.registry.set_status("charge", None, ToolStatus.QUARANTINED)
    for _ in range(3):
        api.gw.runtime.health.failure("default:lost", "connection reset")
        api.gw.runtime.health.failure("acme:ping", "refused")  # another tenant's board
    attention = {t["tool"]: t for t in _overview(api)["tools_attention"]}
    assert sorted(attention) == ["charge", "declined", "lost"]
    assert (attention["charge"]["status"], attention["charge"]["health"]) == (
        "quarantined", "healthy")
    assert "review it" in attention["charge"]["detail"]
    assert attention["declined"]["status"] == "disabled"
    assert (attention["lost"]["status"], attention["lost"]["health"]) == (
        "published", "degraded")
    assert attention["lost"]["detail"] == "3 failed calls in a row: connection reset"
    assert attention["lost"]["id"] == api.tool_id("lost", None)  # a global tool
    acme = {t["tool"] for t in _overview(api, "acme_admin")["tools_attention"]}
    assert "ping" in acme and "lost" not in acme


def test_the_wait_percentiles_are_nearest_rank_of_the_decided_approvals(db_url: str) -> None:
    now = datetime.now(UTC)
    with Gateway.open(db_url) as gw:
        for i in range(1, 21):  # waited 1 s … 20 s, decided within the last hour
            created = now - timedelta(minutes=30, seconds=i)
            gw.store.approvals.create(_approval("default", created, n=i,
                                                decided=created + timedelta(seconds=i)))
        gw.store.approvals.create(_approval("default", now - timedelta(minutes=5)))  # pending
        gw.store.approvals.create(_approval(  # decided before the window: not counted
            "default", now - timedelta(hours=3), decided=now - timedelta(hours=2), n=99))
        a = overview(gw.store, gw.catalog, gw.runtime.health, "default", "hour",
                     approval_ttl=timedelta(days=1))["approvals"]
    assert a["wait_ms"] == {"p50": 10000.0, "p95": 19000.0, "max": 20000.0}
    assert (sum(a["decided"]), a["requested_total"], a["approved"], a["pending"]) == (
        20, 21, 20, 1)
