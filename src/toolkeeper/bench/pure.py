"""SPEC §10 item 1: a trivial pure native tool, governed in-process vs its floor (the same
function called bare after one JSON Schema validation of its arguments), side by side."""

from __future__ import annotations

import asyncio
import tempfile
import time

from toolkeeper.bench.floors import validated_add_block
from toolkeeper.bench.model import (
    BenchError,
    BenchResult,
    Row,
    Sizes,
    Target,
    latency_rows,
    percentile,
    ratio_row,
)
from toolkeeper.bench.sampling import BlockFn, notes_for, side_by_side
from toolkeeper.bench.tools import AGENT, open_gateway, sqlite_url
from toolkeeper.gateway import Gateway

NAME = "pure"
VS_FLOOR_P50 = Target(op="<=", bound=32)
"""The governed p50 as a multiple of the floor's: 32x is the old absolute bound (20 us of
overhead, issue 12) carried over at the floor measured on the reference machine (0.65 us)."""


def bench_pure(sizes: Sizes) -> BenchResult:
    """``add(a, b)`` direct vs ``await gw.call("add", ...)``; SQLite store, audit on."""
    with tempfile.TemporaryDirectory(prefix="toolkeeper-bench-") as tmp, \
            open_gateway(sqlite_url(tmp)) as gw:
        measured = asyncio.run(side_by_side(validated_add_block(), _governed_block(gw),
                                            gw.flush, sizes))
    rows = latency_rows("pure", measured.direct_ns, measured.governed_ns, None,
                        direct="floor")
    rows.append(ratio_row("pure_vs_floor_p50", percentile(sorted(measured.governed_ns), 50),
                          percentile(sorted(measured.direct_ns), 50), VS_FLOOR_P50))
    rows.append(Row(metric="pure_governed_calls_per_s", value=measured.governed_calls_per_s,
                    unit="calls/s", decimals=0))
    notes = notes_for(measured, sizes)
    notes.append("floor: add(a, b) called bare after one jsonschema_rs validation of its "
                 "arguments; the ratio is the target, the microseconds are information")
    notes.append("calls/s: one event loop, sequential, incl. audit writes (flush) - "
                 "sustained, not 1/latency")
    return BenchResult(name=NAME, title="Pure in-process call (SPEC 10.1)", rows=rows,
                       notes=notes)


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
