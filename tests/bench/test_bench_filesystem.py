"""Smoke test of the ``filesystem`` benchmark: tiny sizes, structure only (never timings)."""

from __future__ import annotations

import pytest

from toolkeeper.bench.__main__ import main
from toolkeeper.bench.filesystem import bench_filesystem
from toolkeeper.bench.model import Sizes

TINY = Sizes(warmup=5, blocks=2, block_calls=10, duration_s=0.2, workers=1, budget_s=30.0)


def test_filesystem_read_is_measured_side_by_side_with_a_bare_read() -> None:
    result = bench_filesystem(TINY)
    rows = {row.metric: row for row in result.rows}
    for q in (50, 95):
        for side in ("direct", "governed", "overhead"):
            assert rows[f"fs_read_{side}_p{q}"].unit == "us"
        assert rows[f"fs_read_direct_p{q}"].value > 0
        assert rows[f"fs_read_governed_p{q}"].value > 0
    assert any("2 rounds" in note for note in result.notes)


def test_the_cli_selects_it_with_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick", "--only", "filesystem"]) == 0
    assert "fs_read_overhead_p95" in capsys.readouterr().out
