"""Smoke tests of the benchmarks that run ``serve`` as users do (issue 32): group commit
over REST, and idle MCP sessions beside callers. Tiny sizes; structure and checks only,
never timings."""

from __future__ import annotations

import os
import sys

import pytest

from toolkeeper.bench.idle_sessions import bench_idle_sessions
from toolkeeper.bench.irreversible_rest import bench_irreversible_rest
from toolkeeper.bench.mcp_sdk1 import bench_mcp_sdk1
from toolkeeper.bench.model import BenchResult, Row, Sizes, Target
from toolkeeper.bench.procs import serving

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


def test_a_server_that_logs_much_is_never_blocked_by_its_stderr() -> None:
    """The benches' servers write their stderr to a file: a pipe nobody reads while they
    run fills at 64 KiB and blocks a server that logs each request (FastMCP 1.x did)."""
    script = ("import socket, sys, time; sys.stderr.write('x' * 1_000_000); "
              "sys.stderr.flush(); s = socket.socket(); "
              "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(60)")
    with serving([sys.executable, "-c", script, "{port}"], timeout_s=20) as served:
        assert served.pid > 0


@pytest.mark.slow
def test_the_deployed_peers_bench_measures_every_client_era_and_worker_count() -> None:
    result = bench_mcp_sdk1(TINY)
    if any("NOT MEASURED" in note for note in result.notes):
        if os.environ.get("CI") == "true":
            pytest.fail("CI: no 1.x SDK venv: run `make handshake-peers`")
        pytest.skip("THE 1.x SDK VENV IS MISSING, mcp_sdk1 NOT RUN: `make handshake-peers`")
    rows = _metrics(result)
    for client in ("_sdk1_2025", "_sdk2_2025", "_sdk2_2026"):
        for workers in ("_1w", "_2w"):
            suffix = client + workers
            assert rows[f"mcp_sdk1_added_p50{suffix}"].target == Target(op="<=", bound=1.0)
            assert rows[f"mcp_sdk1_throughput_ratio{suffix}"].target == Target(op=">=",
                                                                               bound=0.9)
            assert rows[f"mcp_sdk1_cpu_vs_upstream{suffix}"].target == Target(op="<=",
                                                                              bound=0.5)
            assert rows[f"mcp_sdk1_governed_p50{suffix}"].value > 0
            assert rows[f"mcp_sdk1_upstream_cpu_per_call{suffix}"].value > 0
        # the passthrough floor, with the one-worker runs only: information, no target
        ratio = rows[f"mcp_sdk1_passthrough_throughput_ratio{client}_1w"]
        assert ratio.target is None and ratio.value > 0
        assert rows[f"mcp_sdk1_passthrough_cpu_vs_upstream{client}_1w"].value > 0
        assert f"mcp_sdk1_passthrough_cpu_vs_upstream{client}_2w" not in rows
