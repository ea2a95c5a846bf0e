"""Taking SQLite's write lock on the hot path: the dedicated writer first retries without
sleeping for a short spin, then polls with a short, capped backoff (a waiter asleep when the
holder lets go leaves the lock idle), gives up at its bound, and never swallows an error
that is not contention."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from toolkeeper.store import raw
from toolkeeper.store.raw import BUSY_POLL_MAX_S, BUSY_SPIN_S, begin_immediate

HOLD_FOR_TRIES = 12
"""Enough tries for the backoff to reach its cap (20 µs doubling passes 100 µs by the 4th)."""


@pytest.fixture
def conns(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    """Two connections to one WAL database, neither with SQLite's own busy handler."""
    pair = []
    for _ in range(2):
        conn = sqlite3.connect(tmp_path / "w.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA busy_timeout=0")
        pair.append(conn)
    yield pair[0], pair[1]
    for conn in pair:
        conn.close()


TICK_S = 10e-6
"""How far the fake clock moves each time it is read (a try is never free)."""


class FakeClock:
    """Time that moves by :data:`TICK_S` per read and by whatever is slept; counts the tries
    made without sleeping (reads of the clock after a refused try)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.reads = 0

    def monotonic(self) -> float:
        self.reads += 1
        self.now += TICK_S
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def held(conns: tuple[sqlite3.Connection, sqlite3.Connection],
         ) -> tuple[sqlite3.Connection, sqlite3.Connection]:
    """(holder, waiter): the holder has taken the write lock."""
    conns[0].execute("BEGIN IMMEDIATE")
    return conns


def _take(waiter: sqlite3.Connection) -> None:
    """The waiter takes the lock (the test lets the holder go meanwhile), then lets it go."""
    begin_immediate(waiter, timeout_s=60.0)
    assert waiter.in_transaction
    waiter.execute("ROLLBACK")


def _clock(monkeypatch: pytest.MonkeyPatch, sleep: object, monotonic: object = None) -> None:
    """Replace the clock of :mod:`toolkeeper.store.raw` only (not the ``time`` module)."""
    monkeypatch.setattr(raw, "time", SimpleNamespace(sleep=sleep,
                                                     monotonic=monotonic or time.monotonic))


def test_a_waiter_retries_without_sleeping_for_the_spin_then_sleeps(
        held: tuple[sqlite3.Connection, sqlite3.Connection],
        monkeypatch: pytest.MonkeyPatch) -> None:
    holder, waiter = held
    clock = FakeClock()
    spin_reads: list[int] = []

    def sleep(seconds: float) -> None:
        if not clock.sleeps:
            spin_reads.append(clock.reads)
        clock.sleep(seconds)
        if len(clock.sleeps) == 3:
            holder.execute("COMMIT")

    _clock(monkeypatch, sleep, clock.monotonic)
    _take(waiter)
    # one read to start, then one per refused try: the spin ran its length before a sleep
    tries_spun = spin_reads[0] - 1
    assert tries_spun == pytest.approx(BUSY_SPIN_S / TICK_S, abs=2)
    assert len(clock.sleeps) == 3


def test_a_holder_letting_go_during_the_spin_is_followed_without_a_sleep(
        held: tuple[sqlite3.Connection, sqlite3.Connection],
        monkeypatch: pytest.MonkeyPatch) -> None:
    holder, waiter = held
    clock = FakeClock()

    def monotonic() -> float:
        if clock.reads == 5:  # the holder commits after a few refused tries
            holder.execute("COMMIT")
        return clock.monotonic()

    _clock(monkeypatch, clock.sleep, monotonic)
    _take(waiter)
    assert clock.sleeps == []


def test_a_waiter_polls_with_capped_sleeps_until_the_holder_lets_go(
        held: tuple[sqlite3.Connection, sqlite3.Connection],
        monkeypatch: pytest.MonkeyPatch) -> None:
    holder, waiter = held
    clock = FakeClock()
    sleeps = clock.sleeps

    def fake_sleep(seconds: float) -> None:  # the holder commits after a dozen sleeps
        clock.sleep(seconds)
        if len(sleeps) == HOLD_FOR_TRIES:
            holder.execute("COMMIT")

    _clock(monkeypatch, fake_sleep, clock.monotonic)
    _take(waiter)
    assert len(sleeps) == HOLD_FOR_TRIES
    assert sleeps[0] < BUSY_POLL_MAX_S and max(sleeps) == BUSY_POLL_MAX_S
    assert sleeps == sorted(sleeps)  # backs off, never speeds up again


def test_a_waiter_gives_up_at_its_bound(held: tuple[sqlite3.Connection, sqlite3.Connection],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    holder, waiter = held
    clock = FakeClock()
    _clock(monkeypatch, clock.sleep, clock.monotonic)
    with pytest.raises(sqlite3.OperationalError, match=r"locked|busy"):
        begin_immediate(waiter, timeout_s=0.05)
    assert 0.05 <= clock.now < 0.05 + 2 * BUSY_POLL_MAX_S
    assert clock.sleeps  # past the spin, it slept between tries
    assert not waiter.in_transaction
    holder.execute("ROLLBACK")


def test_an_error_that_is_not_contention_is_raised_at_once(
        conns: tuple[sqlite3.Connection, sqlite3.Connection],
        monkeypatch: pytest.MonkeyPatch) -> None:
    conn = conns[0]
    conn.execute("BEGIN")  # "cannot start a transaction within a transaction"
    _clock(monkeypatch, lambda s: pytest.fail("slept on a non-busy error"))
    with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
        begin_immediate(conn, timeout_s=60.0)
