"""The benchmark list. Each entry is a function ``(Sizes) -> BenchResult``; later items
(REST, MCP, catalog scale) are added here."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from toolkeeper.bench.adapters import bench_adapters
from toolkeeper.bench.catalog import bench_catalog
from toolkeeper.bench.filesystem import bench_filesystem
from toolkeeper.bench.irreversible import bench_irreversible
from toolkeeper.bench.mcp import bench_mcp
from toolkeeper.bench.model import BenchResult, Sizes
from toolkeeper.bench.pure import bench_pure
from toolkeeper.bench.rest import bench_rest
from toolkeeper.bench.retrieval import bench_retrieval
from toolkeeper.bench.web_fetch import bench_web_fetch

BenchFn = Callable[[Sizes], BenchResult]

BENCHMARKS: dict[str, BenchFn] = {
    "pure": bench_pure,
    "irreversible": bench_irreversible,
    "rest": bench_rest,
    "mcp": bench_mcp,
    "catalog": bench_catalog,
    "adapters": bench_adapters,
    "web_fetch": bench_web_fetch,
    "filesystem": bench_filesystem,
    "retrieval": bench_retrieval,
}


def run(names: Sequence[str], sizes: Sizes) -> list[BenchResult]:
    """Run the named benchmarks in order (all of them when ``names`` is empty)."""
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise KeyError(f"unknown benchmark(s) {unknown}; known: {sorted(BENCHMARKS)}")
    return [BENCHMARKS[name](sizes) for name in (names or list(BENCHMARKS))]
