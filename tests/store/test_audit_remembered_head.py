"""A process chains its events onto the head it last left (``audit_chain.append_chained``: on
SQLite one statement moves the head only if it is still exactly there, instead of a read
and a write). Whatever moved the head meanwhile — another process, retention re-sealing
it at a new base, a transaction of ours that rolled back — the head is read again: the
chain never forks, never skips, and its head's MAC stays right. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from tests.support import audit_attacks as attack
from toolkeeper.pipeline.ids import new_event_id
from toolkeeper.store import Store
from toolkeeper.store.audit_key import AuditKey
from toolkeeper.store.raw import raw_write
from toolkeeper.store.records import AuditDraft


def _drafts(n: int, tag: str, ts: datetime | None = None) -> list[AuditDraft]:
    return [AuditDraft(type="test.event", tenant_id="default", event_id=new_event_id(),
                       ts=ts or datetime.now(UTC), data={"tag": tag, "i": i})
            for i in range(n)]


@pytest.fixture(params=[True, False], ids=["keyed", "plain"])
def stores(db_url: str, request: pytest.FixtureRequest) -> Iterator[tuple[Store, Store]]:
    """Two stores over one database: two processes' views (each remembers its heads)."""
    key = AuditKey(attack.KEY) if request.param else None
    one, two = Store.open(db_url, audit_key=key), Store.open(db_url, audit_key=key)
    yield one, two
    two.close()
    one.close()


def _check(store: Store, events: int) -> None:
    report = store.audit.verify("default")
    assert report.ok, report.problems
    assert report.events == events
    seqs = [e.seq for e in store.audit.list("default", limit=10_000)]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def test_two_processes_appending_in_turn_keep_one_chain(stores: tuple[Store, Store]) -> None:
    one, two = stores
    for i in range(6):
        (one if i % 3 else two).audit.append(_drafts(1 + i % 2, str(i)))
    _check(one, 9)


def test_a_head_remembered_from_a_rolled_back_transaction_is_not_chained_onto(
        stores: tuple[Store, Store]) -> None:
    one, _ = stores
    one.audit.append(_drafts(2, "a"))
    with pytest.raises(RuntimeError), raw_write(one.db) as txn:
        one.audit.append(_drafts(3, "gone"), txn)  # remembered, then rolled back
        raise RuntimeError
    one.audit.append(_drafts(1, "b"))
    _check(one, 3)


def test_a_head_retention_moved_the_base_of_is_read_again(stores: tuple[Store, Store]) -> None:
    one, two = stores
    one.audit.append(_drafts(3, "old", datetime.now(UTC) - timedelta(days=2)))
    one.audit.append(_drafts(1, "new"))
    [rep] = [r for r in two.audit.prune(datetime.now(UTC) - timedelta(days=1))
             if r.tenant_id == "default"]
    assert rep.deleted == 3
    one.audit.append(_drafts(2, "after"))  # remembered base is stale: the head's MAC too
    _check(one, 3)
    _check(two, 3)


def test_a_head_at_the_remembered_seq_with_another_hash_is_read_again(
        stores: tuple[Store, Store]) -> None:
    """Our rolled-back transaction left us remembering seq 3; another process then took the
    head to seq 3 with its own events: same seq, other hash. Chaining onto ours would fork."""
    one, two = stores
    one.audit.append(_drafts(1, "a"))
    with pytest.raises(RuntimeError), raw_write(one.db) as txn:
        one.audit.append(_drafts(2, "gone"), txn)
        raise RuntimeError
    two.audit.append(_drafts(2, "theirs"))
    one.audit.append(_drafts(1, "b"))
    _check(one, 4)
