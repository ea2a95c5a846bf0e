"""The PostgreSQL fixtures hand out real, isolated databases."""

from __future__ import annotations

import psycopg
import pytest

from tests.support.pgcluster import PgCluster, libpq_url


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
