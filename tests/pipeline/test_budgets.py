"""Cost and call budgets (toolkeeper.pipeline.budgets): refused before execution with
``budget_exceeded`` and when the budget resets, charged once per execution at the outcome
(a deduplicated call is never charged twice), warned once a period. SQLite and PostgreSQL."""

from __future__ import annotations

import concurrent.futures as cf
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from tests.pipeline.sample_tools import add, broken, charge
from toolkeeper import CallStatus, EventType, Gateway, Limits, Reason
from toolkeeper.model.profile import Budget
from toolkeeper.model.tool import Cost
from toolkeeper.pipeline.budgets import period_of
from toolkeeper.store import Store


def _gateway(make_gateway: Any, *budgets: Budget, cost: Cost | None = None) -> Gateway:
    gw: Gateway = make_gateway(tools=[charge, add], limits=Limits(budgets=budgets))
    if cost is not None:
        gw.registry.register(charge, replace=True, version="1.1.0", costs={"run": cost})
    return gw


def _pay(gw: Gateway, invoice: str, amount: Any = 1, **kw: Any) -> Any:
    return gw.call_sync("charge", arguments={"invoice": invoice, "amount": amount},
                        agent="bot", **kw)


def _types(gw: Gateway, call_id: str) -> list[str]:
    gw.flush()
    return [e.type for e in gw.store.audit.list("default", call_id=call_id)]


def test_a_call_budget_stops_the_call_before_it_runs_and_says_when_it_resets(
        make_gateway: Any, ledger: dict[str, Any]) -> None:
    gw = _gateway(make_gateway, Budget(name="daily", per="agent", max_calls=2))
    assert _pay(gw, "a").ok and _pay(gw, "b").ok
    res = _pay(gw, "c")
    assert (res.status, res.reason) == (CallStatus.DENIED, Reason.BUDGET_EXCEEDED)
    assert ledger["runs"] == 2  # refused before execution
    resets = datetime.fromisoformat(res.details["resets_at"])
    assert resets == period_of("day", datetime.now(UTC))[1]
    assert res.retry_after is not None and 0 < res.retry_after <= 86_400
    assert res.details["budget"] == "daily" and res.details["calls"] == 2
    assert _types(gw, res.call_id)[-1] == EventType.LIMIT_DENIED
    # per agent: another agent of the same profile has its own budget
    other = gw.call_sync("charge", arguments={"invoice": "d", "amount": 1}, agent="other-bot")
    assert other.ok


def test_a_cost_budget_refuses_the_call_that_would_cross_it(
        make_gateway: Any, ledger: dict[str, Any]) -> None:
    gw = _gateway(make_gateway, Budget(name="money", per="tenant", max_cost=5.0),
                  cost=Cost(fixed=2.0))
    assert _pay(gw, "a").ok and _pay(gw, "b").ok  # 4 of 5 spent
    res = _pay(gw, "c")  # 6 > 5
    assert res.reason == Reason.BUDGET_EXCEEDED and res.details["cost"] == 4.0
    assert ledger["runs"] == 2
    assert gw.call_sync("add", arguments={"a": 1, "b": 2}, agent="bot").ok  # costs nothing


def test_a_cost_read_from_the_output_is_charged(make_gateway: Any) -> None:
    gw = _gateway(make_gateway, Budget(name="usage", per="tool", max_cost=10.0),
                  cost=Cost(fixed=0.5, from_output="amount"))
    assert _pay(gw, "a", amount=6).ok  # 6.5 spent
    assert _pay(gw, "b", amount=4).ok  # 11 spent: not known before it ran
    res = _pay(gw, "c", amount=0)
    assert res.reason == Reason.BUDGET_EXCEEDED and res.details["cost"] == 11.0


def test_a_deduplicated_call_is_not_charged_twice_and_answers_at_a_full_budget(
        make_gateway: Any, ledger: dict[str, Any]) -> None:
    gw = _gateway(make_gateway, Budget(name="one", per="agent", max_calls=2),
                  cost=Cost(fixed=1.0))
    first = _pay(gw, "a", idempotency_key="k-1")
    again = _pay(gw, "a", idempotency_key="k-1")
    assert first.ok and again.deduped and ledger["runs"] == 1
    assert _pay(gw, "b").ok  # the budget had one call left: the repeat took nothing
    # the budget is full, yet an exact repeat is answered from its outcome, not refused
    late = _pay(gw, "a", idempotency_key="k-1")
    assert late.deduped and late.ok and late.call_id == first.call_id
    assert _pay(gw, "c").reason == Reason.BUDGET_EXCEEDED
    rows = gw.store.budgets.period_rows("default", [period_of("day", datetime.now(UTC))[0]])
    assert [(calls, cost) for _k, _p, calls, cost in rows] == [(2, 2.0)]


def test_the_warning_is_audited_and_counted_once_a_period(make_gateway: Any) -> None:
    gw = _gateway(make_gateway, Budget(name="soft", per="agent", max_calls=4, warn_at=0.5))
    first = _pay(gw, "a")
    second = _pay(gw, "b")
    third = _pay(gw, "c")
    assert EventType.BUDGET_WARNING not in _types(gw, first.call_id)
    warning = [e for e in gw.store.audit.list("default", call_id=second.call_id)
               if e.type == EventType.BUDGET_WARNING]
    assert len(warning) == 1 and warning[0].data["budget"] == "soft"
    assert warning[0].data["calls"] == 2 and warning[0].data["max_calls"] == 4
    assert EventType.BUDGET_WARNING not in _types(gw, third.call_id)
    text = gw.metrics.render().decode()
    assert 'tool_budget_warnings_total{budget="soft",tenant="default"} 1.0' in text


def test_a_failed_or_refused_call_is_not_charged(make_gateway: Any) -> None:
    gw: Gateway = make_gateway(tools=[charge, broken], limits=Limits(
        budgets=(Budget(name="one", per="agent", max_calls=1),)))
    ran = gw.call_sync("broken", arguments={"x": 1}, agent="bot")  # ran, and failed
    assert (ran.status, ran.reason) == (CallStatus.FAILED, Reason.TOOL_ERROR)
    assert not _pay(gw, "a", amount="x").ok  # refused: invalid arguments
    assert _pay(gw, "a").ok
    assert _pay(gw, "b").reason == Reason.BUDGET_EXCEEDED


def test_a_budget_without_a_limit_is_refused() -> None:
    with pytest.raises(ValidationError, match="neither max_calls nor max_cost"):
        Budget(name="nothing")


def test_periods_are_utc_days_and_months() -> None:
    day, month = "day", "month"
    at = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    assert period_of(day, at) == ("d:2026-12-31", datetime(2027, 1, 1, tzinfo=UTC))
    assert period_of(month, at) == ("m:2026-12", datetime(2027, 1, 1, tzinfo=UTC))
    assert period_of(month, datetime(2026, 2, 3, tzinfo=UTC))[1] == datetime(2026, 3, 1,
                                                                              tzinfo=UTC)


def test_charges_from_many_threads_all_count_and_warn_once(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        with cf.ThreadPoolExecutor(8) as pool:
            done = list(pool.map(lambda _: store.budgets.charge(
                "default", "k", "d:2026-11-28", 0.25, warn_calls=10, warn_cost=None),
                range(40)))
        assert sum(c.warned_now for c in done) == 1
        assert store.budgets.spent("default", [("k", "d:2026-11-28")]) == {
            ("k", "d:2026-11-28"): (40, 10.0)}
        assert store.budgets.spent("default", [("k", "d:2026-11-29")])[
            ("k", "d:2026-11-29")] == (0, 0.0)  # the next period starts empty
    finally:
        store.close()


def test_the_overview_shows_each_budgets_spend_and_state(make_gateway: Any) -> None:
    from toolkeeper.api.stats_responses import OverviewOut
    from toolkeeper.services.overview import overview

    gw = make_gateway(tools=[charge, add], limits=Limits(budgets=(
        Budget(name="per-agent", per="agent", max_calls=2, warn_at=0.5),
        Budget(name="monthly", per="tenant", period="month", max_calls=100))))
    assert _pay(gw, "a").ok and _pay(gw, "b").ok
    assert gw.call_sync("charge", arguments={"invoice": "c", "amount": 1},
                        agent="other-bot").ok
    body = overview(gw.store, gw.catalog, gw.runtime.health, "default", "hour",
                    approval_ttl=timedelta(days=1))
    OverviewOut.model_validate(body)  # the REST body's model takes it
    rows = [(r["budget"], r["layer"], r["subject"], r["calls"], r["state"])
            for r in body["budgets"]]
    assert rows == [("per-agent", "profile:p", "bot", 2, "exceeded"),
                    ("per-agent", "profile:p", "other-bot", 1, "warning"),
                    ("monthly", "profile:p", None, 3, "ok")]
    assert body["budgets"][0]["resets_at"] == period_of(
        "day", datetime.now(UTC))[1].isoformat()
    # another tenant sees none of it
    assert overview(gw.store, gw.catalog, gw.runtime.health, "other", "hour",
                    approval_ttl=timedelta(days=1))["budgets"] == []


def test_two_gateways_on_one_database_share_the_spend(make_gateway: Any, db_url: str,
                                                      ledger: dict[str, Any]) -> None:
    limits = Limits(budgets=(Budget(name="shared", per="tenant", max_calls=3),))
    one: Gateway = make_gateway(tools=[charge], limits=limits)
    two: Gateway = make_gateway(url=db_url, tools=[charge], limits=limits)
    assert _pay(one, "a").ok and _pay(two, "b").ok and _pay(one, "c").ok
    assert _pay(two, "d").reason == Reason.BUDGET_EXCEEDED
    assert _pay(one, "e").reason == Reason.BUDGET_EXCEEDED
    assert ledger["runs"] == 3


def test_the_retention_sweep_deletes_periods_that_ended_before_it(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        for period in ("d:2026-10-30", "d:2026-10-31", "d:2026-11-01", "m:2026-09",
                       "m:2026-10", "m:2026-11"):
            store.budgets.charge("default", "k", period, 1.0, warn_calls=None, warn_cost=None)
        assert store.budgets.purge(datetime(2026, 11, 1, 12, tzinfo=UTC)) == 4
        left = store.budgets.period_rows("default", ["d:2026-11-01", "m:2026-11"])
        assert [p for _k, p, _c, _s in left] == ["d:2026-11-01", "m:2026-11"]
        assert store.budgets.period_rows("default", ["d:2026-10-31", "m:2026-10"]) == []
    finally:
        store.close()
