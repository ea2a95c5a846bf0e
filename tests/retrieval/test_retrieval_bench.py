"""The ``retrieval`` benchmark runs through the pipeline over 10,000 chunks and reports
p50/p95 (shape only: timings are never asserted)."""

from __future__ import annotations

from toolkeeper.bench.model import Sizes
from toolkeeper.bench.retrieval import CHUNKS, bench_retrieval
from toolkeeper.bench.runner import BENCHMARKS

TINY = Sizes(warmup=5, blocks=2, block_calls=10, duration_s=0.2, workers=1, budget_s=30.0)


def test_retrieval_bench_reports_direct_governed_and_overhead_percentiles() -> None:
    assert BENCHMARKS["retrieval"] is bench_retrieval and CHUNKS == 10_000
    result = bench_retrieval(TINY)
    metrics = {row.metric: row for row in result.rows}
    assert set(metrics) == {f"retrieval_{kind}_p{q}" for kind in ("direct", "governed",
                                                                   "overhead")
                            for q in (50, 95)}
    assert all(row.unit == "us" for row in result.rows)
    assert metrics["retrieval_governed_p50"].value > 0
    assert any("10000 chunks" in note for note in result.notes)
