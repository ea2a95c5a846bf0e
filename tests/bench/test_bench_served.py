"""Smoke tests of the benchmarks that run ``serve`` as users do (issue 32): group commit
over REST, and idle MCP sessions beside callers. Tiny sizes; structure and checks only,
never timings."""

from __future__ import annotations

import pytest

from toolkeeper.bench.idle_sessions import bench_idle_sessions
from toolkeeper.bench.irreversible_rest import bench_irreversible_rest
from toolkeeper.bench.model import BenchResult, Row, Sizes, Target

TINY = Sizes(warmup=5, blocks=2, block_calls=10, duration_s=0.5, workers=1, budget_s=30.0,
             idle_sessions=40)


def _metrics(result: BenchResult) -> dict[str, Row]:
    return {row.metric: row for row in result.rows}


@pytest.mark.slow
def test_the_rest_group_commit_bench_checks_every_call_was_recorded_once() -> None:
    rows = _metrics(bench_irreversible_rest(TINY))
    assert rows["irreversible_rest_outcome_rows_mismatch"].value == 0
    assert rows["irreversible_rest_audit_verify_problems"].value == 0
    assert rows["irreversible_rest_outcome_rows"].value > 0
    ratio = rows["irreversible_rest_16_in_flight_vs_one_by_one"]
    assert ratio.target == Target(op=">=", bound=1) and ratio.unit == "x"
    shared = rows["irreversible_rest_writes_per_commit_16_in_flight"]
    assert shared.target == Target(op=">=", bound=2) and shared.value >= 1
    assert rows["irreversible_rest_writes_per_commit_one_by_one"].value >= 1


@pytest.mark.slow
def test_the_idle_sessions_bench_holds_them_and_is_refused_at_the_cap() -> None:
    result = bench_idle_sessions(TINY)
    rows = _metrics(result)
    assert rows["idle_sessions_opened"].value == 40
    assert rows["idle_sessions_open_failures"].value == 0
    assert rows["idle_sessions_memory_per_idle_session"].unit == "KiB"
    assert rows["idle_sessions_callers_calls"].value > 0
    assert rows["idle_sessions_callers_p99_with_vs_without"].target == Target(op="<=", bound=1.5)
    # one session past the cap: a 503 with Retry-After, nothing else
    assert rows["idle_sessions_past_cap_refused_503"].value == 1
    assert rows["idle_sessions_past_cap_errors"].value == 0
    assert any("Retry-After 5" in note for note in result.notes), result.notes
