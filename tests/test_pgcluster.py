"""The PostgreSQL fixtures hand out real, isolated databases."""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import func, inspect, select

from tests.support.pgcluster import PgCluster, libpq_url, run_with_cluster
from toolkeeper.bench.irreversible import PG_URL_ENV
from toolkeeper.store.db import single_connection_engine
from toolkeeper.store.migrate import current, head
from toolkeeper.store.schema import audit_events, outcomes


@pytest.mark.postgres
def test_pg_url_accepts_queries(pg_url: str) -> None:
    with psycopg.connect(libpq_url(pg_url), connect_timeout=10) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


@pytest.mark.postgres
def test_each_pg_url_is_a_separate_empty_database(pg_cluster: PgCluster, pg_url: str) -> None:
    other_url = pg_cluster.fresh_database("t_other_database")
    assert other_url != pg_url
    with psycopg.connect(libpq_url(pg_url), connect_timeout=10) as conn:
        conn.execute("create table marker (id int)")
        conn.commit()
        name = conn.execute("select current_database()").fetchone()
    with psycopg.connect(libpq_url(other_url), connect_timeout=10) as other:
        other_name = other.execute("select current_database()").fetchone()
        visible = other.execute("select to_regclass('marker')").fetchone()
    assert name != other_name
    assert visible == (None,)


def test_db_url_is_given_per_backend(db_url: str) -> None:
    assert db_url.startswith(("sqlite:///", "postgresql+psycopg://"))


def test_db_url_starts_at_the_newest_schema_without_rows(db_url: str) -> None:
    assert current(db_url) == head()
    engine = single_connection_engine(db_url)
    try:
        with engine.connect() as conn:
            for table in (audit_events, outcomes):
                assert conn.execute(select(func.count()).select_from(table)).scalar() == 0
    finally:
        engine.dispose()


@pytest.mark.empty_database
def test_an_empty_database_has_no_tables(db_url: str) -> None:
    assert current(db_url) is None
    engine = single_connection_engine(db_url)
    try:
        assert inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_copy_of_a_template_then_dropped(pg_cluster: PgCluster) -> None:
    pg_cluster.fresh_database("t_tpl_source")
    with psycopg.connect(libpq_url(pg_cluster.url_for("t_tpl_source")), connect_timeout=10,
                         autocommit=True) as conn:
        conn.execute("create table marker (id int)")
    copy = pg_cluster.fresh_database("t_tpl_copy", template="t_tpl_source")
    with psycopg.connect(libpq_url(copy), connect_timeout=10) as conn:
        assert conn.execute("select to_regclass('marker')").fetchone() != (None,)
    held = psycopg.connect(libpq_url(copy), connect_timeout=10)  # a test's leftover
    try:
        pg_cluster.drop_database("t_tpl_copy")
    finally:
        held.close()
    with psycopg.connect(libpq_url(pg_cluster.url_for("postgres")), connect_timeout=10) as conn:
        left = conn.execute("select count(*) from pg_database where datname = 't_tpl_copy'")
        assert left.fetchone() == (0,)
    pg_cluster.drop_database("t_tpl_source")


_SHOWS = """
import os, psycopg
url = os.environ["TOOLKEEPER_BENCH_PG_URL"].replace("postgresql+psycopg://", "postgresql://")
with psycopg.connect(url, connect_timeout=10) as conn:
    print(conn.execute("show fsync").fetchone()[0], conn.execute(
        "show synchronous_commit").fetchone()[0])
"""


@pytest.mark.postgres
def test_the_bench_wrapper_runs_a_command_beside_a_durable_cluster_and_removes_it(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(PG_URL_ENV, raising=False)
    before = set(Path("/tmp").glob("toolkeeper-pg-*"))
    assert run_with_cluster([sys.executable, "-c", _SHOWS]) == 0
    out, err = capfd.readouterr()
    assert out.split() == ["on", "on"]  # PostgreSQL's durability defaults, not the tests'
    assert "throwaway cluster" in err
    assert set(Path("/tmp").glob("toolkeeper-pg-*")) <= before  # stopped and deleted
