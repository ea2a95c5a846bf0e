"""The floors the benchmark's targets are ratios to: each must do the work it claims (real
commits on the same database, the validator the gateway uses, the server's own imports).
Timings are never asserted."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from tests.support.pgcluster import PgCluster
from toolkeeper.bench.floors import (
    COMMITS_PER_CALL,
    TABLE,
    bare_commit_block,
    bare_commit_throughput,
    bare_commits,
    server_dependencies,
    validated_add_block,
)
from toolkeeper.bench.model import BenchError, Target, ratio_row
from toolkeeper.bench.tools import fresh_pg_database


def _rows(url: str) -> list[tuple[int, int]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:  # another connection: only committed rows show
            return [(r[0], r[1]) for r in conn.execute(text(f"SELECT n, step FROM {TABLE}"))]
    finally:
        engine.dispose()


def _check_bare_commits(url: str) -> None:
    with bare_commits(url) as commit:
        samples = asyncio.run(bare_commit_block(commit)(7, 3))
        assert len(samples) == 3 and all(s > 0 for s in samples)
        assert sorted(_rows(url)) == [(n, step) for n in (7, 8, 9)
                                      for step in range(COMMITS_PER_CALL)]
    engine = create_engine(url, poolclass=NullPool)
    try:  # its table is gone afterwards: the bench's own rows are all that stay
        with engine.connect() as conn:
            assert not conn.dialect.has_table(conn, TABLE)
    finally:
        engine.dispose()


def test_the_sqlite_floor_commits_each_calls_two_rows_in_the_same_file(
        tmp_path: Path) -> None:
    _check_bare_commits(f"sqlite:///{tmp_path}/bench.db")


@pytest.mark.postgres
def test_the_postgresql_floor_commits_each_calls_two_rows_in_the_same_database(
        pg_cluster: PgCluster) -> None:
    with fresh_pg_database(pg_cluster.url_for("postgres")) as url:
        _check_bare_commits(url)


def test_the_throughput_floor_runs_processes_on_one_table_and_drops_it_after_all(
        tmp_path: Path) -> None:
    # two workers: the one finishing first must not drop the table under the other
    url = f"sqlite:///{tmp_path}/bench.db"
    assert bare_commit_throughput(url, 2, 0.3) > 0
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            assert not conn.dialect.has_table(conn, TABLE)
    finally:
        engine.dispose()


def test_the_pure_floor_validates_then_calls() -> None:
    samples = asyncio.run(validated_add_block()(0, 5))
    assert len(samples) == 5 and all(s > 0 for s in samples)


def test_the_startup_floor_imports_the_servers_third_party_modules_only() -> None:
    found = server_dependencies()
    tops = {m.split(".")[0] for m in found}
    assert {"fastapi", "sqlalchemy", "uvicorn", "pydantic"} <= tops
    assert "toolkeeper" not in tops
    assert not tops & set(sys.stdlib_module_names)


def test_a_ratio_is_the_figure_over_its_floor_and_a_zero_floor_is_refused() -> None:
    row = ratio_row("x_vs_floor", 30.0, 10.0, Target(op="<=", bound=2))
    assert (row.value, row.unit, row.passed) == (3.0, "x", False)
    assert ratio_row("x_vs_floor", 15.0, 10.0, Target(op="<=", bound=2)).passed
    with pytest.raises(BenchError, match="floor"):
        ratio_row("x_vs_floor", 1.0, 0.0, None)
