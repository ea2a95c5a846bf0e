"""The call-stats rollup (``toolkeeper.store.stats``, migration 0013) on SQLite and
PostgreSQL: batches add up per key, histograms give percentiles, old rows are pruned,
and the migration goes up and down."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from alembic import command
from sqlalchemy import func, inspect, select

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.observability.metrics import Metrics
from toolkeeper.pipeline.recent_calls import RecentCallsLog
from toolkeeper.store import Store
from toolkeeper.store.db import single_connection_engine
from toolkeeper.store.migrate import alembic_config, current, head, upgrade
from toolkeeper.store.stats import (
    EDGES_MS,
    HIST,
    FinishedCall,
    bucket_of,
    call_stats,
    percentile,
)

T0 = 1_800_000_000  # a whole hour, in epoch seconds


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = Store.open(db_url)
    yield s
    s.close()


def _call(ms: float, ts: float = T0 + 30, *, tenant: str = "t", tool: str = "pay",
          status: str = "succeeded", reason: str | None = None) -> FinishedCall:
    return FinishedCall(tenant_id=tenant, tool=tool, status=status, reason=reason,
                        duration_ms=ms, ts=ts)


def _rows(store: Store) -> dict[tuple[str, str, int, str, str, str], dict[str, float]]:
    c = call_stats.c
    with store.db.read() as conn:
        return {(r.tenant_id, r.resolution, r.bucket_start, r.tool, r.status, r.reason):
                {"count": r.count, "sum": r.duration_sum, "max": r.duration_max,
                 **{h: getattr(r, h) for h in HIST}}
                for r in conn.execute(select(call_stats).order_by(c.resolution))}


def test_batches_add_up_per_key_at_both_resolutions(store: Store) -> None:
    assert store.call_stats.add([_call(3.0), _call(40.0, T0 + 59),
                                 _call(0.5, T0 + 61, status="denied", reason="gate_denied")])
    store.call_stats.add([_call(7000.0, T0 + 119), _call(1.0, T0 + 3599)])
    rows = _rows(store)
    minute0 = rows[("t", "m", T0, "pay", "succeeded", "")]
    assert (minute0["count"], minute0["sum"], minute0["max"]) == (2, 43.0, 40.0)
    assert (minute0["h2"], minute0["h5"]) == (1, 1)  # 3 ms in (2, 5], 40 ms in (25, 50]
    minute1 = rows[("t", "m", T0 + 60, "pay", "succeeded", "")]
    assert (minute1["count"], minute1["max"], minute1["h12"]) == (1, 7000.0, 1)
    assert rows[("t", "m", T0 + 60, "pay", "denied", "gate_denied")]["count"] == 1
    hour = rows[("t", "h", T0, "pay", "succeeded", "")]
    assert (hour["count"], hour["sum"], hour["max"]) == (4, 7044.0, 7000.0)
    assert sum(int(hour[h]) for h in HIST) == 4
    assert ("t", "m", T0 + 3540, "pay", "succeeded", "") in rows  # the hour's last minute


def test_a_key_is_never_shared_between_tenants(store: Store) -> None:
    store.call_stats.add([_call(1.0, tenant="a"), _call(1.0, tenant="b"),
                          _call(1.0, tenant="b")])
    rows = _rows(store)
    assert rows[("a", "h", T0, "pay", "succeeded", "")]["count"] == 1
    assert rows[("b", "h", T0, "pay", "succeeded", "")]["count"] == 2


def test_concurrent_writers_lose_no_count(db_url: str) -> None:
    """Two processes on one store add to the same keys: the upsert adds, never replaces."""
    stores = [Store.open(db_url, migrate=False) for _ in range(2)]
    try:
        for _ in range(5):
            for s in stores:
                s.call_stats.add([_call(2.0), _call(2.0, status="failed", reason="x")])
        with stores[0].db.read() as conn:
            total = conn.execute(select(func.sum(call_stats.c.count)).where(
                call_stats.c.resolution == "m")).scalar_one()
        assert total == 20
    finally:
        for s in stores:
            s.close()


def test_purge_drops_minute_and_hour_rows_by_their_own_age(store: Store) -> None:
    store.call_stats.add([_call(1.0, T0 + 30), _call(1.0, T0 + 7200 + 30)])
    deleted = store.call_stats.purge(minutes_before=T0 + 7200, hours_before=T0 + 1)
    assert deleted == 2  # the first minute row and the first hour row
    assert sorted((k[1], k[2]) for k in _rows(store)) == [("h", T0 + 7200), ("m", T0 + 7200)]


def test_buckets_hold_their_upper_edge() -> None:
    assert [bucket_of(x) for x in (0.0, 1.0, 1.01, 30000.0, 30000.5, 1e9)] == [
        0, 0, 1, len(EDGES_MS) - 1, len(EDGES_MS), len(EDGES_MS)]


def test_percentiles_interpolate_within_a_bucket() -> None:
    hist = [0] * len(HIST)
    assert percentile(hist, 0.5, 0.0) is None
    hist[bucket_of(80.0)] = 100  # 100 calls in (50, 100]
    assert percentile(hist, 0.5, 100.0) == 75.0
    assert percentile(hist, 0.95, 100.0) == 97.5
    assert percentile(hist, 0.95, 90.0) == 90.0  # never above the slowest call
    hist[bucket_of(3000.0)] = 100  # and 100 in (2500, 5000]
    assert percentile(hist, 0.5, 5000.0) == 100.0
    assert percentile(hist, 0.95, 5000.0) == 4750.0  # rank 190: 90 % into the bucket
    tail = [0] * len(HIST)
    tail[-1] = 4  # past the last edge: up to the slowest call
    assert percentile(tail, 0.5, 50000.0) == 40000.0


def test_percentiles_from_the_store_match_the_calls(store: Store) -> None:
    """Summed in SQL, read back: p50/p95 of 1..1000 ms within the bucket's resolution."""
    store.call_stats.add([_call(float(ms), T0 + ms % 3000) for ms in range(1, 1001)])
    c = call_stats.c
    with store.db.read() as conn:
        row = conn.execute(select(*(func.sum(c[h]) for h in HIST), func.max(c.duration_max))
                           .where(c.resolution == "m")).one()
    hist, top = [int(n) for n in row[:-1]], float(row[-1])
    assert sum(hist) == 1000 and top == 1000.0
    p50, p95 = percentile(hist, 0.5, top), percentile(hist, 0.95, top)
    assert p50 is not None and 250.0 < p50 <= 500.0  # the true p50 (500) is in (250, 500]
    assert p95 is not None and 500.0 < p95 <= 1000.0  # the true p95 (950) is in (500, 1000]


@pytest.mark.empty_database
def test_migration_0013_adds_the_rollup_and_indexes_and_downgrades_cleanly(
        db_url: str) -> None:
    upgrade(db_url, "0012")
    Store.open(db_url).close()
    assert current(db_url) == head() >= "0013"
    engine = single_connection_engine(db_url)
    try:
        names = {i["name"] for t in ("approvals", "side_effects", "outcomes")
                 for i in inspect(engine).get_indexes(t)}
        assert {"ix_approvals_tenant_created", "ix_approvals_call", "ix_approvals_consumed_by",
                "ix_side_effects_call", "ix_outcomes_unknown"} <= names
        assert "call_stats" in inspect(engine).get_table_names()
    finally:
        engine.dispose()
    command.downgrade(alembic_config(db_url), "0012")
    assert current(db_url) == "0012"
    engine = single_connection_engine(db_url)
    try:
        assert "call_stats" not in inspect(engine).get_table_names()
        assert "ix_approvals_call" not in {
            i["name"] for i in inspect(engine).get_indexes("approvals")}
    finally:
        engine.dispose()
    store = Store.open(db_url)  # and up again
    try:
        assert store.call_stats.add([_call(1.0)]) == 2
    finally:
        store.close()


def test_the_writer_counts_calls_even_when_the_log_keeps_none(store: Store) -> None:
    """``recent_calls_max: 0`` keeps no calls but the rollup still gets every one."""
    log = RecentCallsLog(store.recent_calls, 0, Metrics(), stats=store.call_stats)
    try:
        log.record(CallResult(call_id="c1", status=CallStatus.DENIED, tool="pay",
                              reason="gate_denied", duration_ms=2.0), "t", "bot", None)
        log.record(CallResult(call_id="c2", status=CallStatus.SUCCEEDED, tool="pay",
                              duration_ms=20.0), "t", "bot", None)
        log.record(CallResult(call_id="c3", status=CallStatus.SUCCEEDED, tool="pay",
                              duration_ms=20.0), None, "bot", None)  # no tenant: not counted
    finally:
        log.close()
    counts = {(k[1], k[4], k[5]): v["count"] for k, v in _rows(store).items()}
    assert counts == {("m", "denied", "gate_denied"): 1, ("h", "denied", "gate_denied"): 1,
                      ("m", "succeeded", ""): 1, ("h", "succeeded", ""): 1}
    assert store.recent_calls.list("t") == []


def test_the_writer_without_stats_and_log_starts_no_thread(store: Store) -> None:
    log = RecentCallsLog(store.recent_calls, 0, Metrics(), stats=None)
    log.record(CallResult(call_id="c1", status=CallStatus.SUCCEEDED, tool="pay",
                          duration_ms=1.0), "t", "bot", None)
    log.close()
    assert _rows(store) == {}


def test_the_schema_and_the_migrations_agree(db_url: str) -> None:
    """Every table and index of ``store.schema`` and ``store.stats`` is what the migrations
    build (the full-text index of migration 0006 is the backend's own, outside both)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from toolkeeper.store.schema import metadata

    engine = single_connection_engine(db_url)
    try:
        with engine.connect() as conn:
            diffs = compare_metadata(MigrationContext.configure(conn), metadata)
    finally:
        engine.dispose()

    def fts(diff: Any) -> bool:
        text = repr(diff)
        return "retrieval_fts" in text or "'tsv'" in text or "ix_retrieval_chunks_tsv" in text

    assert [d for d in diffs if not fts(d)] == []
