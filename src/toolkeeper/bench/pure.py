"""SPEC §10 item 1: a trivial pure native tool, governed in-process vs called directly."""

from __future__ import annotations

import asyncio
import tempfile
import time

from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, Target, latency_rows
from toolkeeper.bench.sampling import BlockFn, notes_for, side_by_side
from toolkeeper.bench.tools import AGENT, direct_add, open_gateway, sqlite_url
from toolkeeper.gateway import Gateway

NAME = "pure"
OVERHEAD_P50 = Target(op="<=", bound=20)  # issue 12 item 4 (SPEC §10: 25)


def bench_pure(sizes: Sizes) -> BenchResult:
    """``add(a, b)`` direct vs ``await gw.call("add", ...)``; SQLite store, audit on."""
    with tempfile.TemporaryDirectory(prefix="toolkeeper-bench-") as tmp, \
            open_gateway(sqlite_url(tmp)) as gw:
        measured = asyncio.run(side_by_side(_direct_block(), _governed_block(gw), gw.flush,
                                            sizes))
    rows = latency_rows("pure", measured.direct_ns, measured.governed_ns, OVERHEAD_P50)
    rows.append(Row(metric="pure_governed_calls_per_s", value=measured.governed_calls_per_s,
                    unit="calls/s", decimals=0))
    notes = notes_for(measured, sizes)
    notes.append("calls/s: one event loop, sequential, incl. audit writes (flush) - "
                 "sustained, not 1/latency")
    return BenchResult(name=NAME, title="Pure in-process call (SPEC 10.1)", rows=rows,
                       notes=notes)


def _direct_block() -> BlockFn:
    fn = direct_add()

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        for i in range(first, first + count):
            t0 = clock()
            fn(a=1, b=i)
            samples.append(clock() - t0)
        return samples

    return block


def _governed_block(gw: Gateway) -> BlockFn:
    call = gw.call

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        failed = None
        for i in range(first, first + count):
            t0 = clock()
            res = await call("add", arguments={"a": 1, "b": i}, agent=AGENT)
            samples.append(clock() - t0)
            if not res.ok:
                failed = res
        if failed is not None:
            raise BenchError(f"governed add failed: {failed.status} {failed.reason} "
                             f"{failed.message}")
        return samples

    return block
