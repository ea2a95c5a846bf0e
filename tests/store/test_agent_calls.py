"""The agent calls in flight (``agent_call``'s chain guard record) as every process on one
store sees them: written at start, gone at the end, and a dead process's row stops
counting at its expiry (issue 26, item 11)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import select, update

from tests.support.migrations import table_names
from toolkeeper.providers.agent_chains import MARGIN_S, InFlight
from toolkeeper.store import Store
from toolkeeper.store.schema import agent_calls_in_flight as calls


@pytest.fixture
def stores(db_url: str) -> Iterator[tuple[Store, Store]]:
    """Two stores over one database: two processes' views."""
    one, two = Store.open(db_url), Store.open(db_url)
    yield one, two
    two.close()
    one.close()


def _age(store: Store, row: str, expires_at: float) -> None:
    with store.db.write() as conn:
        conn.execute(update(calls).where(calls.c.id == row).values(expires_at=expires_at))


def test_a_call_in_one_process_is_seen_by_another_until_it_ends(
        stores: tuple[Store, Store]) -> None:
    one, two = stores
    with InFlight(one.agent_calls).running("t1", "b", ("a",), timeout_s=5):
        assert two.agent_calls.chains_into("t1", "b") == [("a",)]
        assert two.agent_calls.chains_into("t2", "b") == []  # per tenant
        assert two.agent_calls.chains_into("t1", "a") == []  # per callee
    assert two.agent_calls.chains_into("t1", "b") == []


def test_the_row_goes_when_the_call_fails(stores: tuple[Store, Store]) -> None:
    one, two = stores
    with pytest.raises(RuntimeError), \
            InFlight(one.agent_calls).running("t1", "b", ("a",), timeout_s=5):
        raise RuntimeError("the callee hung up")
    assert two.agent_calls.chains_into("t1", "b") == []


def test_a_dead_process_row_counts_until_its_expiry_then_stops(
        stores: tuple[Store, Store]) -> None:
    one, two = stores
    started = time.time()
    row = one.agent_calls.start("t1", "b", ("x", "a"), ttl_s=120 + MARGIN_S)
    # the writer dies here: nothing ends the row
    with one.db.read() as conn:
        found = conn.execute(select(calls).where(calls.c.id == row)).one()._mapping
    assert found["owner"] == one.agent_calls.owner != two.agent_calls.owner
    assert started + 120 + MARGIN_S <= found["expires_at"] <= time.time() + 120 + MARGIN_S
    assert two.agent_calls.chains_into("t1", "b") == [("x", "a")]  # a refusal, not an escape
    _age(one, row, time.time() - 1)  # its timeout and margin have passed
    assert two.agent_calls.chains_into("t1", "b") == []
    # a later start in any process deletes expired rows (its first one at once)
    two.agent_calls.start("t1", "c", ("a",), ttl_s=60)
    with one.db.read() as conn:
        assert conn.execute(select(calls.c.id).where(calls.c.id == row)).first() is None


def test_a_live_call_keeps_counting_beside_an_expired_one(
        stores: tuple[Store, Store]) -> None:
    one, two = stores
    stale = one.agent_calls.start("t1", "b", ("old",), ttl_s=60)
    _age(one, stale, time.time() - 1)
    with InFlight(two.agent_calls).running("t1", "b", ("a",), timeout_s=5):
        assert one.agent_calls.chains_into("t1", "b") == [("a",)]


@pytest.mark.empty_database
def test_migration_0009_adds_the_table_and_downgrades_cleanly(db_url: str) -> None:
    from alembic import command

    from toolkeeper.store.migrate import alembic_config, current, upgrade

    upgrade(db_url, "0009")
    assert "agent_calls_in_flight" in table_names(db_url)
    command.downgrade(alembic_config(db_url), "0008")
    assert current(db_url) == "0008" and "agent_calls_in_flight" not in table_names(db_url)
    upgrade(db_url)
    store = Store.open(db_url)
    try:
        with InFlight(store.agent_calls).running("t1", "b", ("a",), timeout_s=5):
            assert store.agent_calls.chains_into("t1", "b") == [("a",)]
    finally:
        store.close()
