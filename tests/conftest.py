"""Shared fixtures: a real PostgreSQL cluster per session, a fresh database per test."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pgcluster import PgCluster, PgUnavailable

pytest_plugins = ["tests.secrets.backends"]  # secrets_backend: each secrets backend in turn


@pytest.fixture(scope="session")
def pg_cluster(request: pytest.FixtureRequest) -> PgCluster:
    """One throwaway PostgreSQL cluster for the whole session, stopped at session end."""
    try:
        cluster = PgCluster.start()
    except PgUnavailable as exc:
        unavailable = str(exc)
    else:
        unavailable = ""
    if unavailable:
        reason = f"POSTGRESQL NOT AVAILABLE, PostgreSQL tests NOT RUN: {unavailable}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    # A finalizer rather than yield-teardown: registered the moment the server exists.
    request.addfinalizer(cluster.stop)
    return cluster


def _database_name(request: pytest.FixtureRequest) -> str:
    # Named after the test so a leftover database points back at who made it.
    slug = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")[:40]
    return f"t_{slug}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def pg_url(pg_cluster: PgCluster, request: pytest.FixtureRequest) -> str:
    """SQLAlchemy URL of a new, empty PostgreSQL database for this test alone."""
    return pg_cluster.fresh_database(_database_name(request))


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
    ]
)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """SQLAlchemy URL of an empty database, once per backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/toolkeeper.db"
    # Looked up lazily so SQLite-only runs (-m "not postgres") never start PostgreSQL.
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    return cluster.fresh_database(_database_name(request))


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real redis-server on a free loopback port (skipped loudly locally, fails in CI)."""
    from tests.support.redisserver import RedisServer, RedisUnavailable

    server = RedisServer()
    try:
        url = server.start()
    except RedisUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"REDIS NOT AVAILABLE in CI: {exc}")
        pytest.skip(f"REDIS NOT AVAILABLE, Redis tests NOT RUN: {exc}")
    yield url
    server.stop()
