"""Group commit for coroutines (``claim_async``/``finish_async``), on SQLite and a real
PostgreSQL: calls sharing one event loop wait for their commit without blocking the loop,
so their writes queue together and share transactions; a thread's batch hands the lead to
the drainer when coroutines are next; a cancelled caller still learns what was committed;
a batch that cannot commit fails every coroutine in it; a write never taken times out with
nothing written. The store is held as in ``test_group_commit`` (``held``)."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
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
from toolkeeper.model.enums import OutcomeState
from toolkeeper.store import Store
from toolkeeper.store.group_commit import GroupCommit
from toolkeeper.store.records import OutcomeRecord

CALLERS = 8
WAIT_S = 30.0


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    yield from warmed_store(db_url)


def _claim(store: Store, key: str, call_id: str | None = None
           ) -> Awaitable[OutcomeRecord | None]:
    cid = call_id or f"c-{key}"
    return store.outcomes.claim_async(rec(key, cid), events(cid, "call.attempted"),
                                      offload=True)


def _finish(store: Store, call_id: str) -> Awaitable[bool]:
    return store.outcomes.finish_async(
        call_id, state=OutcomeState.SUCCEEDED, status="succeeded", reason=None,
        result={"ok": True}, events=events(call_id, "call.succeeded"), offload=True)


async def _until(test: Callable[[], bool], what: str) -> None:
    """Polls on the loop: it returns at all only if the loop is free while others wait."""
    async with asyncio.timeout(WAIT_S):
        while not test():
            await asyncio.sleep(0.005)
    assert test(), what


@contextmanager
def _held_elsewhere(store: Store) -> Iterator[threading.Event]:
    """``held`` on a thread of its own, let go when the event is set (or on exit)."""
    release, holding = threading.Event(), threading.Event()

    def hold() -> None:
        with held(store):
            holding.set()
            release.wait(WAIT_S)

    with cf.ThreadPoolExecutor(1) as pool:
        done = pool.submit(hold)
        assert holding.wait(WAIT_S)
        try:
            yield release
        finally:
            release.set()
            done.result(timeout=WAIT_S)


def _first_batch_waits(store: Store, before: int) -> bool:
    """A batch has begun and waits on the held store: at ``BEGIN`` on SQLite (the queue
    not taken), on PostgreSQL on the row lock (the batch taken)."""
    if store.outcomes.group.transactions < before + 1:
        return False
    if store.db.is_sqlite:
        return True
    with store.db.engine.connect() as conn:
        return bool(conn.execute(text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'")).scalar())


def test_coroutines_on_one_loop_share_commits_without_blocking_it(store: Store) -> None:
    group = store.outcomes.group
    keys = [f"k{i}" for i in range(CALLERS)]
    commits = count_sqlite_commits(store) if store.db.is_sqlite else None

    async def scenario() -> tuple[list[Any], list[Any], int]:
        before = group.transactions
        with _held_elsewhere(store) as release:
            claims = [asyncio.ensure_future(_claim(store, k)) for k in keys]
            await _until(lambda: _first_batch_waits(store, before), "the first batch waits")
            if store.db.is_sqlite:  # all of them queued while the loop was free
                await _until(lambda: group.pending() == CALLERS, "every claim queued")
            release.set()
            won = await asyncio.gather(*claims)
        claim_txns = group.transactions - before
        done = await asyncio.gather(*(_finish(store, f"c-{k}") for k in keys))
        return won, done, claim_txns

    won, done, txns = asyncio.run(scenario())
    assert won == [None] * CALLERS and done == [True] * CALLERS
    assert txns <= (1 if store.db.is_sqlite else 2), txns  # eight claims, shared
    if commits is not None:
        assert len(commits) <= 1 + CALLERS  # one for the claims, the finishes shared too
    assert group.drained >= 2 * CALLERS
    assert all(store.outcomes.get(f"c-{k}").state is OutcomeState.SUCCEEDED  # type: ignore[union-attr]
               for k in keys)
    report = store.audit.verify(TENANT)
    assert report.ok and report.events == 2 * CALLERS + 1


def test_a_threads_batch_hands_the_lead_to_the_drainer(store: Store) -> None:
    """A thread leads (blocked on the held store); coroutines queue behind it; whatever
    the thread's batch did not take, the drainer commits."""
    group = store.outcomes.group

    async def scenario() -> tuple[Any, list[Any]]:
        before = group.transactions
        with _held_elsewhere(store) as release, cf.ThreadPoolExecutor(1) as pool:
            plug = pool.submit(store.outcomes.claim, rec("plug"),
                               events("c-plug", "call.attempted"))
            await _until(lambda: _first_batch_waits(store, before), "the thread leads")
            claims = [asyncio.ensure_future(_claim(store, f"k{i}")) for i in range(CALLERS)]
            await _until(lambda: group.pending() >= CALLERS, "the coroutines queued")
            release.set()
            won = await asyncio.gather(*claims)
            return plug.result(timeout=WAIT_S), won

    plugged, won = asyncio.run(scenario())
    assert plugged is None and won == [None] * CALLERS
    if not store.db.is_sqlite:  # the thread's batch was its own claim: the rest drained
        assert group.drained == CALLERS
    assert store.audit.verify(TENANT).ok


def test_a_cancelled_caller_learns_what_was_committed(store: Store) -> None:
    """Cancelled while its claim waits in a batch, the coroutine still gets the claim's
    result (the row is there); the cancellation comes at its next ``await``."""
    group = store.outcomes.group
    seen: list[Any] = []

    async def caller() -> None:
        seen.append(await _claim(store, "cancelled"))
        await asyncio.sleep(0)
        seen.append("went on")

    async def scenario() -> bool:
        before = group.transactions
        with _held_elsewhere(store) as release:
            task = asyncio.ensure_future(caller())
            await _until(lambda: _first_batch_waits(store, before), "its batch waits")
            task.cancel()
            threading.Timer(0.2, release.set).start()  # while the loop waits for the batch
            try:
                await task
            except asyncio.CancelledError:
                return True
        return False

    assert asyncio.run(scenario()) is True
    assert seen == [None]  # it won the claim, and went no further
    row = store.outcomes.by_key(TENANT, "bot", "cancelled")
    assert row is not None and row.state is OutcomeState.IN_PROGRESS


def test_a_batch_of_coroutines_that_cannot_commit_fails_every_one(store: Store) -> None:
    install(store, COMMIT_FAILS_SQLITE, COMMIT_FAILS_PG)
    keys = [f"k{i}" for i in range(CALLERS)] + ["poison"]

    async def scenario() -> list[Any]:
        before = store.outcomes.group.transactions
        with _held_elsewhere(store) as release:
            claims = [asyncio.ensure_future(_claim(store, k)) for k in ["plug", *keys]]
            await _until(lambda: _first_batch_waits(store, before), "the first batch waits")
            if store.db.is_sqlite:
                await _until(lambda: store.outcomes.group.pending() > len(keys), "all queued")
            release.set()
            return await asyncio.gather(*claims, return_exceptions=True)

    outcomes = asyncio.run(scenario())
    assert all(isinstance(o, Exception) for o in outcomes[1:]), outcomes
    assert all(store.outcomes.by_key(TENANT, "bot", k) is None for k in keys)
    assert store.audit.verify(TENANT).ok
    assert asyncio.run(_claim(store, "after")) is None  # the writer is usable again


def test_a_write_never_taken_times_out_with_nothing_written() -> None:
    """A batch stuck before taking the queue (its ``begin`` never returns): a coroutine
    queued behind it gives up after the wait, withdrawn; nothing of it is applied."""
    gate, applied = threading.Event(), list[Any]()

    @contextmanager
    def begin() -> Iterator[None]:
        assert gate.wait(WAIT_S)
        yield

    def apply(_: Any, batch: list[Any]) -> None:
        applied.extend(m.work for m in batch)

    group = GroupCommit(begin, apply, wait_timeout_s=0.2)

    async def scenario() -> BaseException | None:
        try:
            await group.submit_async("lost", offload=True)
        except TimeoutError as exc:
            return exc
        return None

    error = asyncio.run(scenario())
    gate.set()
    group.close()
    assert isinstance(error, TimeoutError) and "did not take" in str(error), error
    assert applied == [] and group.pending() == 0 and group.writes == 0


class _SlowRead:
    """``OutcomeRepo._by_key`` held until ``release`` is set (by the loop: the test's
    coroutine sets it once it sees the read begin, which it can only if the loop is free),
    bounded; says whether the loop let it go and whether it ended."""

    def __init__(self, by_key: Callable[..., Any]) -> None:
        self._by_key = by_key
        self.entered, self.release = threading.Event(), threading.Event()
        self.let_go_by_loop = False
        self.ended = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        self.let_go_by_loop = self.release.wait(5.0)
        try:
            return self._by_key(*args, **kwargs)
        finally:
            self.ended.set()


@pytest.fixture
def slow_read(store: Store, monkeypatch: pytest.MonkeyPatch) -> _SlowRead:
    assert asyncio.run(_claim(store, "taken")) is None  # the key's first claim wins
    slow = _SlowRead(store.outcomes._by_key)
    monkeypatch.setattr(store.outcomes, "_by_key", slow)
    return slow


def test_a_taken_key_is_read_off_the_loop(store: Store, slow_read: _SlowRead) -> None:
    """The claim that finds its key taken reads the record holding it in a transaction of
    its own; with company on the loop, that waits off the loop too."""
    async def scenario() -> OutcomeRecord | None:
        claim = asyncio.ensure_future(_claim(store, "taken", "c-again"))
        await _until(slow_read.entered.is_set, "the read of the taken key began")
        slow_read.release.set()
        return await claim

    found = asyncio.run(scenario())
    assert slow_read.let_go_by_loop, "the loop was blocked while the read waited"
    assert found is not None and found.call_id == "c-taken"


def test_a_cancelled_caller_waits_for_the_taken_keys_read(store: Store,
                                                          slow_read: _SlowRead) -> None:
    """Cancelled while that read runs, the caller still waits for it to end (nothing of
    the claim is left half-done behind it); the cancellation comes at its next ``await``."""
    async def scenario() -> bool:
        claim = asyncio.ensure_future(_claim(store, "taken", "c-again"))
        await _until(slow_read.entered.is_set, "the read of the taken key began")
        claim.cancel()
        threading.Timer(0.2, slow_read.release.set).start()
        try:
            await claim
        except asyncio.CancelledError:
            return slow_read.ended.is_set()
        return False

    assert asyncio.run(scenario()) is True
