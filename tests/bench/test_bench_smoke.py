"""Smoke tests of the benchmark harness: tiny sizes, structure and output shape only.
Timings are never asserted (benchmarks print figures; tests must not flake on load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.pgcluster import PgCluster
from toolkeeper import bench
from toolkeeper.bench.__main__ import main
from toolkeeper.bench.asgi import SERVERS, bench_asgi
from toolkeeper.bench.irreversible import PG_URL_ENV, bench_irreversible, bench_irreversible_pg
from toolkeeper.bench.mcp import bench_mcp
from toolkeeper.bench.model import SUMMARY_LINE, BenchResult, Row, Sizes, Target, percentile
from toolkeeper.bench.pure import bench_pure
from toolkeeper.bench.report import summary_lines

TINY = Sizes(warmup=5, blocks=2, block_calls=10, duration_s=0.2, workers=1, budget_s=30.0)


def _metrics(result: BenchResult) -> dict[str, Row]:
    return {row.metric: row for row in result.rows}


def _assert_summary_parses(results: list[BenchResult]) -> list[str]:
    lines = summary_lines(results)
    assert lines
    for line in lines:
        assert SUMMARY_LINE.match(line), line
    return lines


def test_pure_bench_reports_latency_against_its_floor_and_sustained_rate() -> None:
    result = bench_pure(TINY)
    rows = _metrics(result)
    for name in ("pure_floor_p50", "pure_floor_p99", "pure_governed_p50",
                 "pure_governed_p99", "pure_overhead_p50", "pure_overhead_p99",
                 "pure_governed_calls_per_s"):
        assert name in rows
    # the target is the ratio to the floor measured in the same run; microseconds inform
    ratio = rows["pure_vs_floor_p50"]
    assert ratio.target == Target(op="<=", bound=32) and ratio.unit == "x"
    assert ratio.value == pytest.approx(
        rows["pure_governed_p50"].value / rows["pure_floor_p50"].value)
    assert rows["pure_overhead_p50"].target is None
    assert rows["pure_governed_calls_per_s"].unit == "calls/s"
    lines = _assert_summary_parses([result])
    assert [line.split()[0] for line in lines] == ["pure_vs_floor_p50"]
    assert any("2 rounds" in note for note in result.notes)


def test_irreversible_bench_records_one_outcome_per_succeeded_call() -> None:
    result = bench_irreversible(TINY)
    rows = _metrics(result)
    assert rows["irreversible_overhead_p50"].target is None
    assert rows["irreversible_vs_floor_p50"].target == Target(op="<=", bound=12)
    assert rows["irreversible_floor_p50"].value > 0
    floor = rows["irreversible_floor_throughput_1cores"].value
    assert floor > 0 and rows["irreversible_throughput_1cores"].target is None
    for suffix in ("", "_8threads"):
        ratio = rows[f"irreversible_throughput{suffix}_vs_floor"]
        assert ratio.target == Target(op=">=", bound=0.08)
        speed = rows[f"irreversible_throughput_1cores{suffix}"].value
        assert ratio.value == pytest.approx(speed / floor)
    # correctness, not speed: these hold on any machine
    assert rows["irreversible_throughput_failed_calls"].value == 0
    assert rows["irreversible_throughput_8threads_failed_calls"].value == 0
    assert rows["irreversible_outcome_rows_mismatch"].value == 0
    assert rows["irreversible_outcome_rows"].value == rows[
        "irreversible_outcome_rows_succeeded"].value
    assert rows["irreversible_audit_verify_problems"].value == 0
    _assert_summary_parses([result])


@pytest.mark.postgres
def test_the_irreversible_bench_measures_postgresql_in_a_database_of_its_own(
        pg_cluster: PgCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PG_URL_ENV, pg_cluster.url_for("postgres"))
    result = bench_irreversible_pg(TINY)
    rows = _metrics(result)
    # held to SPEC's ratios against its own floor (an fsync per commit dominates there)
    assert rows["irreversible_pg_overhead_p50"].target is None
    assert rows["irreversible_pg_vs_floor_p50"].target == Target(op="<=", bound=2)
    assert rows["irreversible_pg_throughput_8threads_vs_floor"].target == Target(
        op=">=", bound=0.5)
    speeds = [r for r in rows.values() if r.unit == "calls/s"]
    assert speeds and all(r.target is None for r in speeds)
    assert any("fsync=off" in n and "synchronous_commit=off" in n  # the test cluster's
               for n in result.notes)
    assert rows["irreversible_pg_overhead_p50"].value > 0
    for name in ("irreversible_pg_throughput_failed_calls",
                 "irreversible_pg_throughput_8threads_failed_calls",
                 "irreversible_pg_outcome_rows_mismatch", "irreversible_pg_audit_verify_problems"):
        assert rows[name].value == 0, name
    assert rows["irreversible_pg_outcome_rows"].value > 0


def test_without_a_postgresql_url_the_pg_bench_says_it_measured_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PG_URL_ENV, raising=False)
    result = bench_irreversible_pg(TINY)
    assert result.rows == [] and PG_URL_ENV in result.notes[0]


@pytest.mark.slow
def test_mcp_bench_compares_direct_and_governed_calls_of_one_upstream_tool() -> None:
    result = bench_mcp(TINY)
    rows = _metrics(result)
    for era in ("", "_2025"):  # both protocol eras: 2026-07-28 and a 2025-11-25 session
        assert rows[f"mcp_added_p50{era}"].target == Target(op="<=", bound=1.0)
        assert rows[f"mcp_throughput_ratio{era}"].target == Target(op=">=", bound=0.9)
        assert rows[f"mcp_cpu_vs_upstream{era}"].target == Target(op="<=", bound=0.5)
        assert rows[f"mcp_governed_p50{era}"].value > 0
    sides = ["direct", "governed", "passthrough"]
    for era in ("", "_2025"):  # the passthrough floor: information, never a target
        for figure in ("added_p50", "throughput_ratio", "cpu_vs_upstream"):
            assert rows[f"mcp_passthrough_{figure}{era}"].target is None
    if any("FastMCP NOT MEASURED" in note for note in result.notes):
        assert "mcp_lead_over_fastmcp_throughput" not in rows
    else:  # the bench peers venv is there: FastMCP beside them, with toolkeeper's lead
        sides.append("fastmcp")
        assert rows["mcp_fastmcp_throughput_ratio"].target is None
        for lead in ("added_p50", "throughput"):
            assert rows[f"mcp_lead_over_fastmcp_{lead}"].target == Target(op=">=", bound=10)
    for side in sides:  # every side measured, same client, same run
        assert rows[f"mcp_{side}_p50"].value > 0 and rows[f"mcp_{side}_calls_per_s_16"].value > 0
        assert rows[f"mcp_{side}_cpu_per_call"].unit == "ms"
    for side in ("direct", "governed"):  # which side's CPU moved between the eras
        era_row = rows[f"mcp_{side}_cpu_2026_over_2025"]
        assert era_row.target is None and era_row.value == pytest.approx(
            rows[f"mcp_{side}_cpu_per_call"].value / rows[f"mcp_{side}_cpu_per_call_2025"].value)
    _assert_summary_parses([result])


@pytest.mark.slow
def test_asgi_bench_serves_the_same_app_on_every_server_and_names_the_fastest() -> None:
    result = bench_asgi(TINY)
    rows = _metrics(result)
    for server in SERVERS:  # the dev extra installs granian and hypercorn beside uvicorn
        for kind in ("rest", "mcp"):
            assert rows[f"asgi_{server}_{kind}_rps"].value > 0
            assert rows[f"asgi_{server}_{kind}_cpu_per_request"].value > 0
    verdict = next(n for n in result.notes if n.startswith("fastest by requests/s"))
    assert '"rest": "' in verdict and '"mcp": "' in verdict


def test_cli_prints_machine_tables_and_summary_and_writes_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench.json"
    assert main(["--quick", "--only", "pure", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "cpu_count=" in text and "python=" in text and "noisy" in text
    summary = text.split("summary:\n", 1)[1].strip().splitlines()
    assert summary and all(SUMMARY_LINE.match(line) for line in summary)
    doc = json.loads(out.read_text())
    assert [b["name"] for b in doc["benchmarks"]] == ["pure"]
    assert doc["summary"] == summary
    assert doc["machine"]["cpu_count"]


def test_summary_line_says_pass_or_fail_against_its_target() -> None:
    row = Row(metric="pure_overhead_p50", value=18.24, unit="us", target=Target(op="<=",
                                                                               bound=25))
    assert row.summary_line() == "pure_overhead_p50 18.2 us target <=25 PASS"
    rate = Row(metric="x_throughput", value=2999.4, unit="calls/s", decimals=0,
               target=Target(op=">=", bound=3000))
    assert rate.summary_line() == "x_throughput 2999 calls/s target >=3000 FAIL"
    # the verdict follows the printed figure
    edge = Row(metric="x_throughput", value=2999.6, unit="calls/s", decimals=0,
               target=Target(op=">=", bound=3000))
    assert edge.summary_line() == "x_throughput 3000 calls/s target >=3000 PASS"
    # a difference inside the noise can be negative; its line keeps the summary's shape
    faster = Row(metric="mcp_added_p50", value=-2.6, unit="ms", decimals=2,
                 target=Target(op="<=", bound=1.0))
    assert SUMMARY_LINE.match(faster.summary_line()), faster.summary_line()


def test_percentile_is_nearest_rank() -> None:
    samples = list(range(1, 101))
    assert percentile(samples, 50) == 50
    assert percentile(samples, 99) == 99
    assert percentile([7], 99) == 7


def test_unknown_benchmark_is_refused() -> None:
    with pytest.raises(KeyError):
        bench.run(["nope"], TINY)


def test_public_names_are_exported() -> None:
    assert sorted(bench.__all__) == sorted(
        ["BENCHMARKS", "BenchError", "BenchResult", "Row", "Sizes", "Target", "run"])
    assert set(bench.BENCHMARKS) >= {"pure", "irreversible"}


def test_cli_writes_json_under_dot_bench_by_default_and_profiles_with_one_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--quick", "--only", "pure", "--profile"]) == 0
    text = capsys.readouterr().err
    [written] = (tmp_path / ".bench").glob("bench-*.json")
    assert f"results: {written.relative_to(tmp_path)}" in text
    assert [b["name"] for b in json.loads(written.read_text())["benchmarks"]] == ["pure"]
    [profiles] = (tmp_path / ".bench").glob("profile-*")
    assert (profiles / "pure.pstats").stat().st_size > 0
    assert "bench_pure" in (profiles / "pure.txt").read_text()


def test_cli_no_json_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["--quick", "--only", "pure", "--no-json"]) == 0
    assert not (tmp_path / ".bench").exists()


def test_profile_flag_samples_every_server_the_bench_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import httpx

    from toolkeeper.bench.procs import PROFILE_DIR, serving

    monkeypatch.setenv(PROFILE_DIR, str(tmp_path))
    trivial = [sys.executable, "-m", "uvicorn", "toolkeeper.bench.loadgen:trivial", "--port",
               "{port}", "--log-level", "warning"]
    with serving(trivial) as served:
        for _ in range(50):
            assert httpx.get(served.base + "/").status_code == 200
    graphs = list(tmp_path.glob("uvicorn-*.svg"))
    assert len(graphs) == 1 and graphs[0].read_text().lstrip().startswith("<?xml")


def test_overview_bench_fills_a_tiny_store_and_times_each_window() -> None:
    from toolkeeper.bench.overview import bench_overview

    result = bench_overview(TINY, calls=3000)
    rows = _metrics(result)
    for name in ("hour", "day", "week", "calls"):
        assert rows[f"overview_{name}_p50"].value > 0
    for name in ("hour", "day", "week"):
        assert rows[f"overview_{name}_vs_calls_list"].unit == "x"
    assert rows["overview_fill"].unit == "s"
    assert any("3,000 outcome rows" in note for note in result.notes)


@pytest.mark.postgres
def test_overview_bench_on_postgresql_in_a_database_of_its_own(
        pg_cluster: PgCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolkeeper.bench.overview import bench_overview_pg

    monkeypatch.setenv(PG_URL_ENV, pg_cluster.url_for("postgres"))
    rows = _metrics(bench_overview_pg(TINY, calls=2000))
    assert rows["overview_pg_week_p50"].value > 0
    assert rows["overview_pg_fill"].unit == "s"
