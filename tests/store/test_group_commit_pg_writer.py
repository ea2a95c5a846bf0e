"""On PostgreSQL the group commit's batches keep one connection (one batch runs at a time
per process): no pool checkout, ping or reset per transaction. A kept connection that the
server dropped costs nothing once it sat idle (pinged first), and at most its own batch
otherwise: the next batch takes a new one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import event, text

from tests.store.group_commit_support import TENANT, events, rec
from toolkeeper.store import Store, raw
from toolkeeper.store.db import Database

pytestmark = pytest.mark.postgres


@pytest.fixture
def store(pg_url: str) -> Iterator[Store]:
    from toolkeeper.store.migrate import ensure_head

    ensure_head(pg_url)
    s = Store(Database(pg_url))
    yield s
    s.close()


def _claim(store: Store, key: str) -> object:
    return store.outcomes.claim(rec(key), events(f"c-{key}", "call.attempted"))


def _kill_the_kept_connection(store: Store) -> None:
    kept = store.db.pg_group_writer
    assert kept is not None
    pid = kept.driver_connection.info.backend_pid
    with store.db.engine.connect() as conn:
        assert conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()


def test_batches_keep_one_connection_no_checkout_each(store: Store) -> None:
    checkouts: list[object] = []
    event.listen(store.db.engine, "checkout", lambda *a: checkouts.append(a))
    for i in range(20):
        assert _claim(store, f"k{i}") is None
    assert len(checkouts) == 1, len(checkouts)  # the first batch took it; the others kept it
    assert store.audit.verify(TENANT).ok


def test_a_dropped_idle_connection_is_replaced_before_the_batch(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _claim(store, "before") is None
    _kill_the_kept_connection(store)
    monkeypatch.setattr(raw, "PG_IDLE_PING_S", 0.0)  # as if it had sat idle
    assert _claim(store, "after") is None
    assert store.outcomes.by_key(TENANT, "bot", "after") is not None


def test_a_connection_dropped_while_busy_fails_only_its_own_batch(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _claim(store, "before") is None
    _kill_the_kept_connection(store)
    monkeypatch.setattr(raw, "PG_IDLE_PING_S", 3600.0)  # no ping: the batch meets it
    with pytest.raises(Exception, match=r"terminat|closed|connection"):
        _claim(store, "lost")
    assert store.outcomes.by_key(TENANT, "bot", "lost") is None  # nothing half-written
    assert _claim(store, "next") is None  # a new connection
    assert store.audit.verify(TENANT).ok
