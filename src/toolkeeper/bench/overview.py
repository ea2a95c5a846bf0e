"""Issue 30 item 1: ``GET /stats/overview`` on a store of 1,000,000 recorded calls.

The store is filled directly (``executemany`` in big batches, progress on stderr): the
calls' outcome rows spread over the last week across four tenants, eight tools and
their statuses, some unknown; their call-stats rollup (``toolkeeper.store.stats``, minute
rows then pruned to two days as the retention sweep would); approvals, most decided. A
real server then answers the overview for the hour, the day and the week, timed side by
side with ``GET /calls?limit=20`` on the same store (the console's existing list).
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import insert

from toolkeeper.bench.irreversible import pg_server
from toolkeeper.bench.model import BenchResult, Row, Sizes, percentile
from toolkeeper.bench.rest import _free_port, _start, _wait_ready
from toolkeeper.bench.tools import fresh_pg_database, sqlite_url
from toolkeeper.store import Store
from toolkeeper.store.schema import approvals, outcomes
from toolkeeper.store.stats import KEEP_HOURS, KEEP_MINUTES, FinishedCall

NAME = "overview"
PG_NAME = "overview_pg"
CALLS = 1_000_000
BATCH = 50_000
WEEK_S = 7 * 86400
TENANTS = (("default", 0.7), ("acme", 0.1), ("globex", 0.1), ("initech", 0.1))
TOOLS = ("pay", "refund", "lookup", "email", "search", "fetch", "ledger", "report")
_STATES = (("succeeded", 0.93), ("failed", 0.06), ("unknown", 0.01))
_STOPPED = (("denied", "scope_missing"), ("denied", "invalid_arguments"),
            ("denied", "gate_denied"), ("approval_required", "approval_required"))
"""Calls stopped before running: counted in the rollup, no outcome row (as in the gateway)."""
PATHS = {"hour": "/stats/overview?window=hour", "day": "/stats/overview?window=day",
         "week": "/stats/overview?window=week", "calls": "/calls?limit=20"}


def bench_overview(sizes: Sizes, calls: int = CALLS) -> BenchResult:
    """The overview's latency per window and the fill time, on ``calls`` recorded calls
    in the embedded SQLite store."""
    result = BenchResult(name=NAME, title=f"GET /stats/overview on {calls:,} recorded calls "
                                          "(issue 30)")
    with tempfile.TemporaryDirectory(prefix="toolkeeper-overview-") as tmp:
        return _measure(result, nullcontext(sqlite_url(tmp)), sizes, calls)


def bench_overview_pg(sizes: Sizes, calls: int = CALLS) -> BenchResult:
    """The same in a fresh database on the PostgreSQL server of ``TOOLKEEPER_BENCH_PG_URL``
    (``make bench`` starts one); skipped without it."""
    result = BenchResult(name=PG_NAME, title=f"GET /stats/overview on {calls:,} recorded "
                                             "calls, PostgreSQL (issue 30)")
    server = pg_server(result)
    if server is None:
        return result
    return _measure(result, fresh_pg_database(server), sizes, calls)


def _measure(result: BenchResult, database: AbstractContextManager[str], sizes: Sizes,
             calls: int) -> BenchResult:
    with database as url:
        started = time.monotonic()
        token, counts = _fill(url, calls)
        fill_s = time.monotonic() - started
        port = _free_port()
        server = _start(url, port)
        try:
            _wait_ready(port, time.monotonic(), timeout_s=120)
            samples = _latencies(port, token, max(5, min(100, sizes.block_calls // 5)))
        finally:
            server.terminate()
            server.wait(timeout=15)
    base = statistics.median(samples["calls"])
    for name in ("hour", "day", "week", "calls"):
        ms = sorted(samples[name])
        p50 = percentile(ms, 50)
        result.rows += [Row(metric=f"{result.name}_{name}_p50", value=p50, unit="ms",
                            decimals=2),
                        Row(metric=f"{result.name}_{name}_p95", value=percentile(ms, 95),
                            unit="ms", decimals=2)]
        if name != "calls":
            result.rows.append(Row(metric=f"{result.name}_{name}_vs_calls_list",
                                   value=p50 / base, unit="x", decimals=2))
    result.rows.append(Row(metric=f"{result.name}_fill", value=fill_s, unit="s", decimals=1))
    result.notes += [
        f"{calls:,} outcome rows over 7 days ({counts['unknown']:,} unknown), 4 tenants "
        f"(70 % in the one measured), {len(TOOLS)} tools; {counts['stopped']:,} more calls "
        f"stopped before running (rollup only); {counts['stats']:,} call-stats rows after "
        f"pruning; {counts['approvals']:,} approvals",
        f"{len(samples['calls'])} rounds, each GET once per round over one keep-alive "
        "connection, interleaved; 'vs_calls_list' = p50 / p50 of GET /calls?limit=20",
    ]
    return result


def _pick(rng: random.Random, weighted: tuple[tuple[Any, float], ...]) -> Any:
    return rng.choices([w[0] for w in weighted], [w[1] for w in weighted])[0]


def _progress(done: int, total: int, started: float) -> None:
    print(f"overview: filled {done:,}/{total:,} calls ({time.monotonic() - started:.1f} s)",
          file=sys.stderr, flush=True)


def _fill(url: str, calls: int) -> tuple[str, dict[str, int]]:
    """Outcome rows, their rollup and approvals; returns an operator's token of
    ``default`` and what was written."""
    rng, now = random.Random(30), time.time()
    store = Store.open(url)
    counts = {"unknown": 0, "stopped": 0, "stats": 0, "approvals": 0}
    try:
        started = time.monotonic()
        for first in range(0, calls, BATCH):
            rows, finished = _batch(rng, now, first, min(BATCH, calls - first))
            counts["unknown"] += sum(r["state"] == "unknown" for r in rows)
            counts["stopped"] += len(finished) - len(rows)
            with store.db.write() as conn:
                conn.execute(insert(outcomes), rows)
            store.call_stats.add(finished)
            _progress(first + len(rows), calls, started)
        store.call_stats.purge(now - KEEP_MINUTES.total_seconds(),
                               now - KEEP_HOURS.total_seconds())
        if not store.db.is_sqlite:  # as autovacuum would after such a load
            with store.db.write() as conn:
                conn.exec_driver_sql("ANALYZE")
        with store.db.read() as conn:
            counts["stats"] = int(conn.exec_driver_sql(
                "select count(*) from call_stats").scalar_one())
        approval_rows = list(_approvals(rng, now, max(50, calls // 50)))
        with store.db.write() as conn:
            conn.execute(insert(approvals), approval_rows)
        counts["approvals"] = len(approval_rows)
        return store.tokens.create(tenant_id="default", role="operator")[1], counts
    finally:
        store.close()


def _batch(rng: random.Random, now: float, first: int,
           n: int) -> tuple[list[dict[str, Any]], list[FinishedCall]]:
    rows: list[dict[str, Any]] = []
    finished: list[FinishedCall] = []
    for i in range(first, first + n):
        ts = now - rng.random() * WEEK_S
        at = datetime.fromtimestamp(ts, UTC)
        tenant, t = _pick(rng, TENANTS), rng.randrange(len(TOOLS))
        state = _pick(rng, _STATES)
        ms = rng.lognormvariate(2.0 + t * 0.6, 1.0)
        reason = {"failed": "tool_error", "unknown": "upstream_error"}.get(state)
        rows.append({
            "call_id": f"c{i:08d}", "tenant_id": tenant, "agent": f"agent-{i % 20}",
            "key": f"k{i:08d}", "tool": TOOLS[t], "action": "run", "tool_version": "1.0.0",
            "args_digest": "sha256:0", "side_effect": "irreversible", "state": state,
            "status": state, "reason": reason, "result": None, "turn_group_id": None,
            "resolved_by": None, "created_at": at, "updated_at": at,
            "expires_at": at + timedelta(days=30), "stale_after": at + timedelta(minutes=1)})
        finished.append(FinishedCall(tenant_id=tenant, tool=TOOLS[t], status=state,
                                     reason=reason, duration_ms=ms, ts=ts))
        if i % 10 == 0:  # one call in ten more was stopped before it ran
            status, why = _STOPPED[rng.randrange(len(_STOPPED))]
            finished.append(FinishedCall(tenant_id=tenant, tool=TOOLS[t], status=status,
                                         reason=why, duration_ms=0.3, ts=ts))
    return rows, finished


def _approvals(rng: random.Random, now: float, n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        created = datetime.fromtimestamp(now - rng.random() * WEEK_S, UTC)
        decided = rng.random() < 0.8
        status = rng.choice(("approved", "denied", "consumed")) if decided else "pending"
        yield {"id": f"a{i:07d}", "tenant_id": _pick(rng, TENANTS), "agent": "agent-1",
               "kind": "approve", "tool": "pay", "action": "run", "tool_version": "1.0.0",
               "args_digest": "sha256:0", "arguments": None, "risk": "high",
               "gate": "approve", "policy_version": "p", "status": status,
               "call_id": f"c{i:08d}", "created_at": created,
               "expires_at": created + timedelta(days=1),
               "decided_by": "amy" if decided else None,
               "decided_at": created + timedelta(seconds=rng.expovariate(1 / 120))
               if decided else None}


def _latencies(port: int, token: str, rounds: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {name: [] for name in PATHS}
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"},
                      timeout=60) as client:
        for path in PATHS.values():  # warm: first reads load pages into the cache
            client.get(path).raise_for_status()
        for _ in range(rounds):
            for name, path in PATHS.items():
                t = time.perf_counter()
                client.get(path).raise_for_status()
                out[name].append((time.perf_counter() - t) * 1000)
    return out
