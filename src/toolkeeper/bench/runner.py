"""The benchmark list. Each entry is a function ``(Sizes) -> BenchResult``; later items
(REST, MCP, catalog scale) are added here."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable, Sequence
from pathlib import Path

from toolkeeper.bench.adapters import bench_adapters
from toolkeeper.bench.asgi import bench_asgi
from toolkeeper.bench.catalog import bench_catalog
from toolkeeper.bench.filesystem import bench_filesystem
from toolkeeper.bench.idle_sessions import bench_idle_sessions
from toolkeeper.bench.irreversible import bench_irreversible, bench_irreversible_pg
from toolkeeper.bench.irreversible_rest import bench_irreversible_rest
from toolkeeper.bench.mcp import bench_mcp
from toolkeeper.bench.mcp_sdk1 import bench_mcp_sdk1
from toolkeeper.bench.model import BenchResult, Sizes
from toolkeeper.bench.overview import bench_overview, bench_overview_pg
from toolkeeper.bench.pure import bench_pure
from toolkeeper.bench.rest import bench_rest
from toolkeeper.bench.retrieval import bench_retrieval
from toolkeeper.bench.sandbox import bench_sandbox
from toolkeeper.bench.web_fetch import bench_web_fetch

BenchFn = Callable[[Sizes], BenchResult]

BENCHMARKS: dict[str, BenchFn] = {
    "pure": bench_pure,
    "irreversible": bench_irreversible,
    "irreversible_pg": bench_irreversible_pg,
    "irreversible_rest": bench_irreversible_rest,
    "rest": bench_rest,
    "mcp": bench_mcp,
    "mcp_sdk1": bench_mcp_sdk1,
    "idle_sessions": bench_idle_sessions,
    "asgi": bench_asgi,
    "catalog": bench_catalog,
    "adapters": bench_adapters,
    "web_fetch": bench_web_fetch,
    "filesystem": bench_filesystem,
    "retrieval": bench_retrieval,
    "sandbox": bench_sandbox,
    "overview": bench_overview,
    "overview_pg": bench_overview_pg,
}


def run(names: Sequence[str], sizes: Sizes, *,
        profile_dir: Path | None = None) -> list[BenchResult]:
    """Run the named benchmarks in order (all of them when ``names`` is empty); with
    ``profile_dir``, each under cProfile, its stats written there as ``<name>.pstats`` and
    the top functions by cumulative time as ``<name>.txt``."""
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise KeyError(f"unknown benchmark(s) {unknown}; known: {sorted(BENCHMARKS)}")
    results = []
    for name in names or list(BENCHMARKS):
        if profile_dir is None:
            results.append(BENCHMARKS[name](sizes))
            continue
        profile_dir.mkdir(parents=True, exist_ok=True)
        with cProfile.Profile() as prof:
            results.append(BENCHMARKS[name](sizes))
        prof.dump_stats(profile_dir / f"{name}.pstats")
        with (profile_dir / f"{name}.txt").open("w", encoding="utf-8") as out:
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(60)
    return results
