"""Shared fixtures: a real PostgreSQL cluster per session, a fresh database per test.

``db_url``'s databases start at the newest schema, copied from a template migrated once per
session (migrating costs ~0.13 s on SQLite and ~0.26 s on PostgreSQL, paid by ~1,600 tests
otherwise); a test that needs a database without tables (migration tests) says
``@pytest.mark.empty_database``. ``pg_url``'s databases are always empty.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pgcluster import PgCluster, PgUnavailable

pytest_plugins = [
    "tests.secrets.backends",  # secrets_backend: each secrets backend in turn
    "tests.support.idp",  # idp: a real OpenID provider on loopback (module scope)
]


@pytest.fixture(scope="session", autouse=True)
def _state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The audit key a gateway makes for a PostgreSQL store on its first start goes to the
    user's state directory: the session's own, never the home of whoever runs the tests."""
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    yield
    if before is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = before


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


_PG_TEMPLATE = "toolkeeper_template"


@pytest.fixture(scope="session")
def _pg_template(pg_cluster: PgCluster) -> str:
    """A database at the newest schema that ``db_url`` copies (nobody stays connected)."""
    from toolkeeper.store.migrate import upgrade

    upgrade(pg_cluster.fresh_database(_PG_TEMPLATE))
    return _PG_TEMPLATE


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the newest schema that ``db_url`` copies (the migration's one
    connection closes at its end, which folds the WAL into the file and removes it)."""
    from toolkeeper.store.migrate import upgrade

    path = tmp_path_factory.mktemp("template") / "toolkeeper.db"
    upgrade(f"sqlite:///{path}")
    return path


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
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """SQLAlchemy URL of a database at the newest schema without rows (no tables at all
    under ``@pytest.mark.empty_database``), once per backend."""
    empty = request.node.get_closest_marker("empty_database") is not None
    if request.param == "sqlite":
        path = tmp_path / "toolkeeper.db"
        if not empty:
            shutil.copyfile(request.getfixturevalue("_sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    # Looked up lazily so SQLite-only runs (-m "not postgres") never start PostgreSQL.
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    template = None if empty else request.getfixturevalue("_pg_template")
    name = _database_name(request)
    yield cluster.fresh_database(name, template)
    # Dropped at once: with ~800 databases (~6 MB each) left to the end, the session's last
    # teardown (stopping the cluster, deleting its directory) took ~40 s.
    cluster.drop_database(name)


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
