"""Smoke tests of the adapter-overhead benchmark: tiny sizes, rows and notes only.
Timings are never asserted (benchmarks print figures; tests must not flake on load)."""

from __future__ import annotations

import sys

import pytest

import toolkeeper.adapters
from toolkeeper import bench
from toolkeeper.bench.__main__ import main
from toolkeeper.bench.adapters import bench_adapters
from toolkeeper.bench.model import Row, Sizes

TINY = Sizes(warmup=5, blocks=3, block_calls=10, duration_s=0.2, workers=1, budget_s=30.0)
SIDES = ("pydantic_ai", "openai_agents", "openai_agents_invoke", "langchain")


def _metrics(rows: list[Row]) -> dict[str, Row]:
    return {row.metric: row for row in rows}


def test_adapters_bench_measures_each_adapter_beside_the_bare_call() -> None:
    result = bench_adapters(TINY)
    rows = _metrics(result.rows)
    assert result.name == "adapters" and "adapters" in bench.BENCHMARKS
    for q in (50, 99):
        assert rows[f"adapters_bare_p{q}"].value > 0
    for side in SIDES:
        for q in (50, 99):
            assert rows[f"adapters_{side}_p{q}"].value > 0
            assert f"adapters_{side}_added_p{q}" in rows
        assert rows[f"adapters_{side}_ratio_p50"].unit == "x"
    # SPEC §10 names no bound for adapters: figures only, no PASS/FAIL lines
    assert all(row.target is None for row in result.rows)
    assert result.summary_lines() == []
    assert any("3 rounds" in note for note in result.notes)


def test_a_missing_framework_is_a_skipped_row_naming_its_extra(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # as if the extra were not installed: importing the adapter raises ImportError
    monkeypatch.setitem(sys.modules, "toolkeeper.adapters.openai_agents", None)
    monkeypatch.delattr(toolkeeper.adapters, "openai_agents", raising=False)
    rows = _metrics(bench_adapters(TINY).rows)
    for side in ("openai_agents", "openai_agents_invoke"):
        skipped = rows[f"adapters_{side}_skipped"]
        assert skipped.unit == "skipped: install toolkeeper[openai-agents]"
        assert f"adapters_{side}_p50" not in rows
    assert rows["adapters_pydantic_ai_p50"].value > 0  # the others still measured
    assert rows["adapters_langchain_p50"].value > 0


def test_cli_runs_the_adapters_bench_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick", "--only", "adapters"]) == 0
    text = capsys.readouterr().out
    assert "adapters_langchain_added_p50" in text and "adapters_bare_p50" in text
