"""Multi-process throughput: N spawned workers, each with its own Gateway on one SQLite file,
started together and run for a fixed, bounded time."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import queue
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from toolkeeper.bench.model import BenchError
from toolkeeper.bench.tools import AGENT

READY_TIMEOUT_S = 120.0
"""Spawning a worker re-imports toolkeeper and opens the store; generous on slow machines."""
MAX_CALLS_PER_S = 100_000
"""With the duration, bounds each worker's loop by count as well as by time."""


@dataclass(frozen=True, kw_only=True)
class WorkerReport:
    """What one worker did; ``succeeded`` includes warm-up calls (they record outcomes too)."""

    succeeded: int
    measured: int
    """Succeeded calls inside the measured window."""
    failed: int
    elapsed_s: float
    error: str | None = None
    last_failure: str | None = None


def worker_main(url: str, duration_s: float, warmup: int, ready: Any, start: Any,
                results: Any, threads: int = 1) -> None:
    """Process entry point (module-level so spawn can import it). With ``threads`` > 1,
    that many threads each call in a loop (concurrent callers of one gateway, as a server
    on PostgreSQL runs them): what group commit batches."""
    try:
        if threads > 1:
            report = _work_threads(url, duration_s, warmup, ready, start, threads)
        else:
            report = asyncio.run(_work(url, duration_s, warmup, ready, start))
    except BaseException as exc:  # the parent must hear about it rather than wait
        report = WorkerReport(succeeded=0, measured=0, failed=0, elapsed_s=0.0,
                              error=f"{type(exc).__name__}: {exc}")
    results.put(report)


async def _work(url: str, duration_s: float, warmup: int, ready: Any,
                start: Any) -> WorkerReport:
    from toolkeeper.gateway import Gateway

    prefix = uuid.uuid4().hex[:12]
    # recover=False: another worker's in-flight outcomes are not this process's to judge
    with Gateway.open(url, recover=False) as gw:
        counts = {"ok": 0, "failed": 0}
        last: list[str] = []

        async def one(i: int) -> None:
            res = await gw.call("record", arguments={"n": i}, agent=AGENT,
                                idempotency_key=f"{prefix}-{i}")
            if res.ok:
                counts["ok"] += 1
            else:
                counts["failed"] += 1
                last[:] = [f"{res.status} {res.reason} {res.message}"]

        for i in range(warmup):
            await one(i)
        warm_ok = counts["ok"]
        ready.put(True)
        if not start.wait(READY_TIMEOUT_S):
            raise BenchError("start signal never came")
        i, limit = warmup, warmup + int(duration_s * MAX_CALLS_PER_S)
        t0 = time.perf_counter()
        deadline = t0 + duration_s
        while i < limit and time.perf_counter() < deadline:
            await one(i)
            i += 1
        elapsed = time.perf_counter() - t0
        gw.flush()
    return WorkerReport(succeeded=counts["ok"], measured=counts["ok"] - warm_ok,
                        failed=counts["failed"], elapsed_s=elapsed,
                        last_failure=last[0] if last else None)


def _work_threads(url: str, duration_s: float, warmup: int, ready: Any, start: Any,
                  threads: int) -> WorkerReport:
    from toolkeeper.gateway import Gateway

    prefix = uuid.uuid4().hex[:12]
    lock = threading.Lock()
    counts = {"ok": 0, "failed": 0, "measured": 0}
    last: list[str] = []
    with Gateway.open(url, recover=False) as gw:
        def loop(t: int, first: int, deadline: float, measured: bool) -> None:
            i, limit = first, first + int(duration_s * MAX_CALLS_PER_S)
            while i < limit and time.perf_counter() < deadline:
                res = gw.call_sync("record", arguments={"n": i}, agent=AGENT,
                                   idempotency_key=f"{prefix}-{t}-{i}")
                with lock:
                    counts["ok" if res.ok else "failed"] += 1
                    counts["measured"] += int(measured and res.ok)
                    if not res.ok:
                        last[:] = [f"{res.status} {res.reason} {res.message}"]
                i += 1

        def run_all(first: int, seconds: float, measured: bool) -> float:
            t0 = time.perf_counter()
            workers = [threading.Thread(target=loop, args=(t, first, t0 + seconds, measured))
                       for t in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(seconds + READY_TIMEOUT_S)
            return time.perf_counter() - t0

        run_all(0, max(warmup / 1000.0, 0.2), False)
        ready.put(True)
        if not start.wait(READY_TIMEOUT_S):
            raise BenchError("start signal never came")
        elapsed = run_all(MAX_CALLS_PER_S * 10, duration_s, True)
        gw.flush()
    return WorkerReport(succeeded=counts["ok"], measured=counts["measured"],
                        failed=counts["failed"], elapsed_s=elapsed,
                        last_failure=last[0] if last else None)


def run_workers(url: str, workers: int, duration_s: float, warmup: int,
                threads: int = 1) -> list[WorkerReport]:
    """Start ``workers`` processes, release them together, and collect their reports."""
    ctx = mp.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    start = ctx.Event()
    procs = [ctx.Process(target=worker_main, name=f"toolkeeper-bench-{n}", daemon=True,
                         args=(url, duration_s, warmup, ready, start, results, threads))
             for n in range(workers)]
    for p in procs:
        p.start()
    try:
        _wait_ready(ready, results, workers)
        start.set()
        reports = [_get(results, duration_s + READY_TIMEOUT_S) for _ in range(workers)]
    finally:
        start.set()
        for p in procs:
            p.join(timeout=10.0)
            if p.is_alive():  # only our own children, by object
                p.terminate()
                p.join(timeout=5.0)
    errors = [r.error for r in reports if r.error]
    if errors:
        raise BenchError(f"throughput worker failed: {errors[0]}")
    return reports


def _wait_ready(ready: Any, results: Any, workers: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    seen = 0
    while seen < workers:
        if time.monotonic() > deadline:
            raise BenchError(f"only {seen} of {workers} workers became ready")
        try:
            ready.get(timeout=0.5)
            seen += 1
        except queue.Empty:
            _raise_early_error(results)


def _raise_early_error(results: Any) -> None:
    try:
        report: WorkerReport = results.get_nowait()
    except queue.Empty:
        return
    raise BenchError(f"throughput worker failed before start: {report.error}")


def _get(results: Any, timeout_s: float) -> WorkerReport:
    try:
        report: WorkerReport = results.get(timeout=timeout_s)
    except queue.Empty:
        raise BenchError(f"a throughput worker reported nothing within {timeout_s:g} s") \
            from None
    return report
