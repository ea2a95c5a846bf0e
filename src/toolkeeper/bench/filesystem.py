"""Issue 10: ``filesystem.read`` through the pipeline vs a bare ``os`` read of the same file."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

from toolkeeper.bench.model import BenchError, BenchResult, Row, Sizes, percentile
from toolkeeper.bench.sampling import BlockFn, notes_for, side_by_side
from toolkeeper.bench.tools import sqlite_url
from toolkeeper.builtins import definition
from toolkeeper.gateway import Gateway
from toolkeeper.model.enums import Autonomy
from toolkeeper.model.profile import Activation, Agent, Profile

NAME = "filesystem"
FILE_BYTES = 4096
_AGENT = "bench-fs"
_FILE = "data.txt"


def bench_filesystem(sizes: Sizes) -> BenchResult:
    """Read one 4 KiB file: ``os.open``/``os.read`` vs ``gw.call("filesystem", "read")``."""
    with tempfile.TemporaryDirectory(prefix="toolkeeper-bench-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        (root / _FILE).write_text("x" * (FILE_BYTES - 1) + "\n")
        with _gateway(sqlite_url(tmp), root) as gw:
            measured = asyncio.run(side_by_side(
                _direct_block(root / _FILE), _governed_block(gw), gw.flush, sizes))
    rows = _rows(measured.direct_ns, measured.governed_ns)
    notes = notes_for(measured, sizes)
    notes.append(f"one {FILE_BYTES}-byte UTF-8 file; direct = os.open + os.read + os.close + "
                 "decode; governed = the whole pipeline on SQLite, audit on, worker thread")
    return BenchResult(name=NAME, title="filesystem.read through the pipeline (issue 10)",
                       rows=rows, notes=notes)


def _gateway(url: str, root: Path) -> Gateway:
    gw = Gateway.open(url)
    try:
        gw.registry.register(definition("filesystem", policy={"root": str(root)}))
        gw.registry.put_profile(Profile(name=_AGENT, autonomy=Autonomy.GUARDED,
                                        activations=(Activation(tool="filesystem"),)))
        gw.registry.put_agent(Agent(name=_AGENT, profile=_AGENT))
    except BaseException:
        gw.close()
        raise
    return gw


def _rows(direct_ns: list[int], governed_ns: list[int]) -> list[Row]:
    d, g = sorted(direct_ns), sorted(governed_ns)
    rows: list[Row] = []
    for q in (50, 95):
        direct, governed = percentile(d, q) / 1000.0, percentile(g, q) / 1000.0
        rows += [Row(metric=f"fs_read_direct_p{q}", value=direct, unit="us", decimals=2),
                 Row(metric=f"fs_read_governed_p{q}", value=governed, unit="us"),
                 Row(metric=f"fs_read_overhead_p{q}", value=governed - direct, unit="us")]
    return rows


def _direct_block(path: Path) -> BlockFn:
    name = os.fspath(path)

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        for _ in range(count):
            t0 = clock()
            fd = os.open(name, os.O_RDONLY)
            try:
                os.read(fd, FILE_BYTES + 1).decode("utf-8")
            finally:
                os.close(fd)
            samples.append(clock() - t0)
        return samples

    return block


def _governed_block(gw: Gateway) -> BlockFn:
    call = gw.call

    async def block(first: int, count: int) -> list[int]:
        clock = time.perf_counter_ns
        samples = []
        failed = None
        for _ in range(count):
            t0 = clock()
            res = await call("filesystem", "read", {"path": _FILE}, agent=_AGENT)
            samples.append(clock() - t0)
            if not res.ok or len(res.output["content"]) != FILE_BYTES:
                failed = res
        if failed is not None:
            raise BenchError(f"governed filesystem.read failed: {failed.status} "
                             f"{failed.reason} {failed.message}")
        return samples

    return block
