"""SPEC §10 item 2: an irreversible tool with a durable outcome and audit on SQLite —
overhead side by side, then multi-process throughput with an exactly-once check."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from typing import Any

from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, Target, latency_rows
from toolkeeper.bench.sampling import BlockFn, notes_for, side_by_side
from toolkeeper.bench.tools import (
    AGENT,
    direct_record,
    fresh_pg_database,
    open_gateway,
    sqlite_url,
)
from toolkeeper.bench.workers import WorkerReport, run_workers
from toolkeeper.gateway import Gateway

NAME = "irreversible"
PG_NAME = "irreversible_pg"
PG_URL_ENV = "TOOLKEEPER_BENCH_PG_URL"
CONCURRENT_THREADS = 8
"""Callers per process in the concurrent throughput run (what group commit batches)."""
OVERHEAD_P50 = Target(op="<=", bound=250)
THROUGHPUT = Target(op=">=", bound=3000)
NONE_ALLOWED = Target(op="<=", bound=0)
MAX_OUTCOME_ROWS = 10_000_000


def pg_server(result: BenchResult) -> str | None:
    """The PostgreSQL server of ``PG_URL_ENV``, or ``None`` and a note in ``result`` saying
    the scenario was not measured."""
    server = os.environ.get(PG_URL_ENV)
    if not server:
        result.notes.append(f"not measured: set {PG_URL_ENV} to a PostgreSQL URL whose user "
                            "may create databases")
    return server or None


def bench_irreversible(sizes: Sizes) -> BenchResult:
    """Durable irreversible calls on SQLite: latency in one loop, then throughput across
    processes (sequential callers, then concurrent callers sharing group commits)."""
    result = BenchResult(name=NAME, title="Irreversible call, durable outcome + audit, "
                                          "SQLite (SPEC 10.2)")
    with tempfile.TemporaryDirectory(prefix="toolkeeper-bench-") as tmp:
        _measure(result, sqlite_url(tmp), NAME, sizes)
        result.rows += _batched_rows(f"sqlite:///{tmp}/batched.db", sizes)
    return result


def bench_irreversible_pg(sizes: Sizes) -> BenchResult:
    """The same on PostgreSQL, in a fresh database created on the server named by
    ``TOOLKEEPER_BENCH_PG_URL`` (and dropped afterwards; ``make bench`` starts a throwaway
    server for it); skipped without it. Reported beside SQLite's figures, without their
    latency and throughput targets: a PostgreSQL commit is durable across power loss (an
    fsync each), SQLite's (``synchronous=NORMAL``) across a crash of the process only."""
    result = BenchResult(name=PG_NAME, title="Irreversible call, durable outcome + audit, "
                                             "PostgreSQL (SPEC 10.2, beside SQLite)")
    server = pg_server(result)
    if server is None:
        return result
    with fresh_pg_database(server) as url:
        _measure(result, url, PG_NAME, sizes, speed_targets=False)
        result.notes.append(f"the server's durability: {_pg_durability(url)}; each recorded "
                            "call commits twice (concurrent callers share commits through "
                            "group commit)")
    return result


def _pg_durability(url: str) -> str:
    """The server settings a commit's cost depends on, as the server reports them."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return ", ".join(f"{name}={conn.execute(text(f'SHOW {name}')).scalar()}"
                             for name in ("fsync", "synchronous_commit", "wal_sync_method"))
    finally:
        engine.dispose()


def _measure(result: BenchResult, url: str, prefix: str, sizes: Sizes, *,
             speed_targets: bool = True) -> None:
    with open_gateway(url) as gw:
        measured = asyncio.run(side_by_side(_direct_block(), _governed_block(gw),
                                            gw.flush, sizes))
    # every governed call used a fresh key and succeeded, or the block raised
    expected = len(measured.governed_ns) + sizes.warmup
    result.rows += latency_rows(prefix, measured.direct_ns, measured.governed_ns,
                                OVERHEAD_P50 if speed_targets else None)
    result.rows.append(Row(metric=f"{prefix}_sequential_calls_per_s",
                           value=measured.governed_calls_per_s, unit="calls/s", decimals=0))
    result.notes += notes_for(measured, sizes)
    workers = sizes.workers or os.cpu_count() or 1
    for threads in (1, CONCURRENT_THREADS):
        reports = run_workers(url, workers, sizes.duration_s, min(sizes.warmup, 200),
                              threads=threads)
        result.rows += _throughput_rows(prefix, reports, workers, threads,
                                        THROUGHPUT if speed_targets else None)
        expected += sum(r.succeeded for r in reports)
        result.notes.append(_throughput_note(reports, workers, threads, sizes.duration_s))
    result.rows += _verify(prefix, url, expected)


def _batched_rows(url: str, sizes: Sizes) -> list[Row]:
    """The same latency with ``audit_durability=batched`` (outcome durable, audit events
    written by the background writer within ~50 ms): informational, no target."""
    with open_gateway(url, audit_durability="batched") as gw:
        measured = asyncio.run(side_by_side(_direct_block(), _governed_block(gw),
                                            gw.flush, sizes))
    rows = latency_rows("irreversible_batched", measured.direct_ns, measured.governed_ns,
                        None)
    return [r for r in rows if r.metric.startswith("irreversible_batched_overhead")]


def _direct_block() -> BlockFn:
    fn = direct_record()

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        for i in range(first, first + count):
            t0 = clock()
            await fn(n=i)
            samples.append(clock() - t0)
        return samples

    return block


def _governed_block(gw: Gateway) -> BlockFn:
    call = gw.call
    prefix = uuid.uuid4().hex[:12]

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        failed = None
        for i in range(first, first + count):
            key = f"{prefix}-{i}"
            t0 = clock()
            res = await call("record", arguments={"n": i}, agent=AGENT, idempotency_key=key)
            samples.append(clock() - t0)
            if not res.ok or res.deduped:
                failed = res
        if failed is not None:
            raise BenchError(f"governed record failed: {failed.status} {failed.reason} "
                             f"deduped={failed.deduped} {failed.message}")
        return samples

    return block


def _throughput_rows(prefix: str, reports: list[WorkerReport], workers: int,
                     threads: int, target: Target | None) -> list[Row]:
    elapsed = max(r.elapsed_s for r in reports)
    measured = sum(r.measured for r in reports)
    suffix = f"_{threads}threads" if threads > 1 else ""
    return [
        Row(metric=f"{prefix}_throughput_{workers}cores{suffix}", value=measured / elapsed,
            unit="calls/s", target=target, decimals=0),
        Row(metric=f"{prefix}_throughput{suffix}_failed_calls",
            value=sum(r.failed for r in reports),
            unit="calls", target=NONE_ALLOWED, decimals=0),
    ]


def _verify(prefix: str, url: str, expected: int) -> list[Row]:
    """Outcome rows must equal succeeded calls, and the audit chain must verify."""
    with Gateway.open(url, recover=False) as gw:
        rows = gw.store.outcomes.list("default", limit=MAX_OUTCOME_ROWS)
        succeeded = sum(1 for r in rows if r.status == "succeeded")
        # typed Any: AuditRepo.tenants() is annotated with its class's own ``list`` method
        tenants: Any = gw.store.audit.tenants()
        problems = sum(len(gw.store.audit.verify(t).problems) for t in tenants)
    return [
        Row(metric=f"{prefix}_outcome_rows_mismatch", value=abs(len(rows) - expected),
            unit="rows", target=NONE_ALLOWED, decimals=0),
        Row(metric=f"{prefix}_outcome_rows", value=len(rows), unit="rows", decimals=0),
        Row(metric=f"{prefix}_outcome_rows_succeeded", value=succeeded, unit="rows",
            decimals=0),
        Row(metric=f"{prefix}_audit_verify_problems", value=problems, unit="problems",
            target=NONE_ALLOWED, decimals=0),
    ]


def _throughput_note(reports: list[WorkerReport], workers: int, threads: int,
                     duration_s: float) -> str:
    per = ", ".join(f"{r.measured}" for r in reports)
    callers = ("sequential calls" if threads == 1 else
               f"{threads} threads each calling in a loop (call_sync)")
    note = (f"throughput: {workers} spawned processes, one Gateway each on the same "
            f"database, {callers} with unique keys for {duration_s:g} s (per worker: {per})")
    failures = [r.last_failure for r in reports if r.last_failure]
    if failures:
        note += f"; last failure: {failures[0]}"
    return note
