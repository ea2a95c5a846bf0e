"""Group commit of outcome claims and finishes, on SQLite and a real PostgreSQL: callers that
queue while the store is busy share one transaction, each still learns its own result, and
a batch that cannot commit fails every member.

To make callers queue deterministically, another connection holds what the first batch
needs: SQLite's write lock (the leader waits at ``BEGIN``, before it takes the queue), or on
PostgreSQL the tenant's audit chain head (the leader has taken its own claim and waits on
the row lock; the next batch takes everyone who queued meanwhile)."""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import text

from tests.store.group_commit_support import (
    COMMIT_FAILS_PG,
    COMMIT_FAILS_SQLITE,
    TENANT,
    count_sqlite_commits,
    events,
    held,
    install,
    rec,
    warmed_store,
)
from tests.support.waiting import wait_until
from toolkeeper.model.enums import OutcomeState
from toolkeeper.store import Store
from toolkeeper.store.records import OutcomeRecord

CALLERS = 8
RESULT_TIMEOUT_S = 60.0


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    yield from warmed_store(db_url)


def _claim(store: Store, key: str, call_id: str | None = None) -> OutcomeRecord | None:
    cid = call_id or f"c-{key}"
    return store.outcomes.claim(rec(key, cid), events(cid, "call.attempted"))


def _finish(store: Store, call_id: str) -> bool:
    return store.outcomes.finish(call_id, state=OutcomeState.SUCCEEDED, status="succeeded",
                                 reason=None, result={"ok": True},
                                 events=events(call_id, "call.succeeded"))


def _leader_blocked(store: Store, before: int) -> bool:
    """The first batch has begun and waits on the held lock, its own claim taken on
    PostgreSQL (nobody else can join it) and still queued on SQLite (everyone will)."""
    group = store.outcomes.group
    if group.transactions != before + 1:
        return False
    if store.db.is_sqlite:
        return group.pending() == 1
    with store.db.engine.connect() as conn:
        return bool(conn.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'")).scalar())


def _queued_behind_a_held_store(store: Store, plug: Callable[[], Any],
                                works: list[Callable[[], Any]]) -> tuple[Any, list[Any], int]:
    """Run ``plug`` until it blocks on the held store, queue ``works`` behind it, release.
    Returns the plug's outcome, each work's outcome (value or exception), and how many
    batch transactions all of it took."""
    group = store.outcomes.group
    before = group.transactions
    with cf.ThreadPoolExecutor(len(works) + 1) as pool:
        with held(store):
            first = pool.submit(plug)
            wait_until(lambda: _leader_blocked(store, before), what="the first batch waits")
            futs = [pool.submit(w) for w in works]
            wait_until(lambda: group.pending() >= len(works), what="every caller queued")
        plugged = _outcome(first)
        outcomes = [_outcome(f) for f in futs]
    return plugged, outcomes, group.transactions - before


def _outcome(fut: cf.Future[Any]) -> Any:
    try:
        return fut.result(timeout=RESULT_TIMEOUT_S)
    except Exception as exc:
        return exc


def _batches_for_plug_and_queue(store: Store) -> int:
    """SQLite: the plug and the queue share one batch; PostgreSQL: the plug's own batch,
    then one for everyone who queued behind it."""
    return 1 if store.db.is_sqlite else 2


def test_claims_and_finishes_queued_together_share_one_transaction(store: Store) -> None:
    keys = [f"k{i}" for i in range(CALLERS)]
    commits = count_sqlite_commits(store) if store.db.is_sqlite else None
    plugged, won, txns = _queued_behind_a_held_store(
        store, lambda: _claim(store, "plug"), [lambda k=k: _claim(store, k) for k in keys])
    assert plugged is None and won == [None] * CALLERS
    assert txns == _batches_for_plug_and_queue(store)
    if commits is not None:
        assert len(commits) == 1  # nine claims, one COMMIT

    plugged, done, txns = _queued_behind_a_held_store(
        store, lambda: _finish(store, "c-plug"),
        [lambda k=k: _finish(store, f"c-{k}") for k in keys])
    assert plugged is True and done == [True] * CALLERS
    assert txns == _batches_for_plug_and_queue(store)
    assert all(store.outcomes.get(f"c-{k}").state is OutcomeState.SUCCEEDED  # type: ignore[union-attr]
               for k in keys)
    report = store.audit.verify(TENANT)
    assert report.ok and report.events == 2 * (CALLERS + 1) + 1


def test_contended_claims_in_one_batch_exactly_one_wins(store: Store) -> None:
    _, outcomes, txns = _queued_behind_a_held_store(
        store, lambda: _claim(store, "plug"),
        [lambda i=i: _claim(store, "same", f"c-same-{i}") for i in range(CALLERS)])
    assert txns == _batches_for_plug_and_queue(store)
    winners = [i for i, o in enumerate(outcomes) if o is None]
    assert len(winners) == 1
    assert {o.call_id for o in outcomes if o is not None} == {f"c-same-{winners[0]}"}
    attempted = store.audit.list(TENANT, types=["call.attempted"], limit=100)
    assert [e.call_id for e in attempted if e.call_id and "same" in e.call_id] == \
        [f"c-same-{winners[0]}"]  # only the winner's events were written
    assert store.audit.verify(TENANT).ok


def test_a_batch_that_cannot_commit_fails_every_member(store: Store) -> None:
    install(store, COMMIT_FAILS_SQLITE, COMMIT_FAILS_PG)
    keys = [f"k{i}" for i in range(CALLERS)] + ["poison"]
    plugged, outcomes, _ = _queued_behind_a_held_store(
        store, lambda: _claim(store, "plug"), [lambda k=k: _claim(store, k) for k in keys])
    assert all(isinstance(o, Exception) for o in outcomes), outcomes
    assert all(store.outcomes.by_key(TENANT, "bot", k) is None for k in keys)
    # on SQLite the plug shared the failed batch; on PostgreSQL it committed alone before
    assert (plugged is None) == (not store.db.is_sqlite)
    assert store.audit.verify(TENANT).ok
    assert _claim(store, "after") is None  # the shared writer is usable again


ROW_FAILS_SQLITE = ["CREATE TRIGGER bad BEFORE INSERT ON outcomes WHEN NEW.key = 'bad' "
                    "BEGIN SELECT RAISE(ABORT, 'bad row'); END"]
ROW_FAILS_PG = [
    "CREATE FUNCTION bad() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'bad row'; END $$",
    "CREATE TRIGGER bad BEFORE INSERT ON outcomes FOR EACH ROW WHEN (NEW.key = 'bad') "
    "EXECUTE FUNCTION bad()",
]


def test_one_members_failing_statement_fails_only_that_member(store: Store) -> None:
    install(store, ROW_FAILS_SQLITE, ROW_FAILS_PG)
    keys = [f"k{i}" for i in range(CALLERS)]
    _, outcomes, _ = _queued_behind_a_held_store(
        store, lambda: _claim(store, "plug"),
        [lambda k=k: _claim(store, k) for k in [*keys[:3], "bad", *keys[3:]]])
    assert "bad row" in str(outcomes[3])
    assert outcomes[:3] + outcomes[4:] == [None] * CALLERS
    assert all(store.outcomes.by_key(TENANT, "bot", k) is not None for k in keys)
    assert store.outcomes.by_key(TENANT, "bot", "bad") is None
    report = store.audit.verify(TENANT)
    assert report.ok and report.events == CALLERS + 2


def test_a_lone_caller_leads_its_own_transaction(store: Store) -> None:
    group = store.outcomes.group
    before = group.transactions
    assert _claim(store, "alone") is None and _finish(store, "c-alone") is True
    assert group.transactions == before + 2 and group.pending() == 0
    kinds = [e.type for e in store.audit.list(TENANT, call_id="c-alone")]
    assert kinds == ["call.attempted", "call.succeeded"]
