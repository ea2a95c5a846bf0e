"""Single use of MCP requestState nonces in the store (migration 0012): a nonce is accepted
once by any process on the store, kept until its state's expiry, then purged."""

from __future__ import annotations

import threading

from toolkeeper.store import Store


def test_a_nonce_is_accepted_once_and_purged_after_its_expiry(db_url: str) -> None:
    store = Store.open(db_url)
    other = Store.open(db_url, migrate=False)  # another worker or replica
    try:
        assert store.request_states.consume("n1", 1100.0, 1000.0)
        assert not store.request_states.consume("n1", 1100.0, 1000.0)
        assert not other.request_states.consume("n1", 1100.0, 1001.0)
        assert other.request_states.consume("n2", 1200.0, 1001.0)
        assert store.request_states.purge(1150.0) == 1  # n1 expired, n2 not
        assert store.request_states.purge(1150.0) == 0
        with store.db.read() as conn:
            left = [r[0] for r in conn.exec_driver_sql("select nonce from request_states")]
        assert left == ["n2"]
    finally:
        other.close()
        store.close()


def test_racing_consumers_accept_a_nonce_once(db_url: str) -> None:
    stores = [Store.open(db_url, migrate=False) for _ in range(4)]
    try:
        wins: list[bool] = []
        start = threading.Barrier(len(stores))

        def take(store: Store) -> None:
            start.wait(timeout=10)
            wins.append(store.request_states.consume("race", 5000.0, 1000.0))

        threads = [threading.Thread(target=take, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert sorted(wins) == [False, False, False, True]
    finally:
        for s in stores:
            s.close()
