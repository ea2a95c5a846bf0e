"""Engines for SQLite (WAL) and PostgreSQL, and the transaction discipline both share.

Writers on SQLite take the database lock up front (``BEGIN IMMEDIATE``) so two processes
can never both read-then-write and deadlock on the upgrade; PostgreSQL relies on unique
constraints and row locks (``SELECT … FOR UPDATE``) for the same guarantees.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, Connection, Engine, Table, create_engine, delete, event, select
from sqlalchemy.pool import NullPool

DEFAULT_URL = "sqlite:///./toolkeeper.db"
# The WAL grows while checkpoints cannot catch up (a long read, a burst of writes) and is
# then reused, never shrunk; SQLite truncates it back to this size whenever it restarts it.
SQLITE_WAL_LIMIT_BYTES = 64 * 1024 * 1024
SQLITE_WAL_RESTART_BYTES = 32 * 1024 * 1024
"""A WAL holding this much is restarted by the next checkpoint (``Database.checkpoint``):
below ``SQLITE_WAL_LIMIT_BYTES``, so commits overwrite the file it keeps, never extend it."""
SQLITE_WAL_RESTART_WAIT_MS = 20
"""How long a restarting checkpoint waits for the writer and the readers."""
SQLITE_WAL_RESTART_BACKOFF_S = 1.0
"""After a restart that could not finish (readers held old snapshots, or other processes'
writers the write lock), none for this long, doubled after each further one in a row up to
``SQLITE_WAL_RESTART_BACKOFF_MAX_S`` (a long read holds writers up ~1 % of the time)."""
SQLITE_WAL_RESTART_BACKOFF_MAX_S = 8.0
SQLITE_CHECKPOINT_EVERY_S = 0.1
"""How often the gateway checkpoints (on the audit writer thread): ~300 calls' WAL at the
peak rate, well under ``SQLITE_WAL_RESTART_BYTES``."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Database:
    """Owns the engines. ``write()`` yields a connection inside a locked write transaction."""

    def __init__(self, url: str = DEFAULT_URL, *, busy_timeout_s: float = 30.0,
                 pool_size: int = 10) -> None:
        self.url = url
        self.busy_timeout_s = busy_timeout_s
        self.is_sqlite = url.startswith("sqlite")
        # SQLite has one writer at a time; threads of this process queue on a lock instead
        # of sleeping in SQLite's busy handler (which backs off in milliseconds).
        self._write_lock: threading.Lock | None = threading.Lock() if self.is_sqlite else None
        self._sqlite_writer: Any = None
        self._sqlite_writer_pooled: Any = None
        self.pg_group_writer: Any = None
        """PostgreSQL: the pooled connection the group commit's batches keep (raw.py)."""
        self._sqlite_page_size: int | None = None
        self._wal_restart_after = 0.0
        """No WAL restart is tried before this (``time.monotonic()``; see ``checkpoint``)."""
        self._wal_restart_backoff = SQLITE_WAL_RESTART_BACKOFF_S
        self._readers = threading.local()
        self._reader_lock = threading.Lock()
        self._reader_conns: list[Any] = []
        self.is_memory = self.is_sqlite and (":memory:" in url or url.rstrip("/") == "sqlite:")
        if self.is_memory:
            raise ValueError("use a file for SQLite: in-memory databases are per connection")
        if self.is_sqlite:
            self.engine = self._sqlite_engine(url, busy_timeout_s)
            self._reader = self._sqlite_engine(url, busy_timeout_s, immediate=False)
        else:
            self.engine = create_engine(
                url, pool_size=pool_size, max_overflow=pool_size * 4, pool_pre_ping=True,
                pool_timeout=busy_timeout_s,
            )
            self._reader = self.engine

    @staticmethod
    def _sqlite_engine(url: str, busy_timeout_s: float, immediate: bool = True) -> Engine:
        engine = create_engine(
            url, connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
            pool_size=20, max_overflow=80,
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _rec: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            cur = dbapi_conn.cursor()
            # New databases only (a no-op once the file has pages). Every commit writes each
            # page it dirtied to the WAL; a recorded call dirties ~7 pages per transaction,
            # so 2 KiB pages commit ~20 % faster than 4 KiB ones while large results still
            # fit in few overflow pages.
            cur.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            # SQLite checkpoints inside the commit that crosses 1000 WAL pages; with two
            # writer processes the WAL rarely resets, so nearly every commit paid for a
            # checkpoint (copy + fsync). Checkpoints run in the background instead
            # (Database.checkpoint, called by the audit writer thread).
            cur.execute("PRAGMA wal_autocheckpoint=0")
            cur.execute(f"PRAGMA journal_size_limit={SQLITE_WAL_LIMIT_BYTES}")
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        begin_sql = "BEGIN IMMEDIATE" if immediate else "BEGIN"

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # straight to the driver: SQLAlchemy's execution path costs more than the BEGIN
            conn.connection.driver_connection.execute(begin_sql)  # type: ignore[union-attr]

        return engine

    def sqlite_writer(self) -> Any:
        """The dedicated sqlite3 connection for prepared hot-path writes (under the lock)."""
        if self._sqlite_writer is None:
            self._sqlite_writer_pooled = self.engine.raw_connection()
            self._sqlite_writer = self._sqlite_writer_pooled.driver_connection
            self._sqlite_writer.execute("PRAGMA busy_timeout=0")  # see raw.begin_immediate
        return self._sqlite_writer

    def sqlite_reader(self) -> Any:
        """This thread's own sqlite3 connection for hot-path reads (no pool round trip;
        opened outside the pool so that many threads cannot exhaust it)."""
        conn = getattr(self._readers, "conn", None)
        if conn is None:
            conn = sqlite3.connect(_sqlite_path(self.url), timeout=self.busy_timeout_s,
                                   isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
            self._readers.conn = conn
            with self._reader_lock:
                self._reader_conns.append(conn)
        return conn

    def checkpoint(self) -> None:
        """Fold the WAL back into the database without blocking writers (SQLite only);
        once it holds :data:`SQLITE_WAL_RESTART_BYTES`, restart it as well.

        Under continuous writes a passive checkpoint never catches up with the writers, so
        SQLite never restarts the WAL: it grew by ~57 KB per recorded call, hundreds of MB
        in seconds, and every commit paid for extending the file (~2x the cost of
        overwriting it: a commit's CPU 106-116 us against 64-69 us measured with two
        writer processes). A ``RESTART`` checkpoint takes the write lock to copy what the
        passive one left (a few ms, writers wait) and starts the WAL over, within the file
        ``journal_size_limit`` keeps. If it cannot (a long read holds an old snapshot), it
        is not tried again for a while (:data:`SQLITE_WAL_RESTART_BACKOFF_S`, doubling): each
        try holds the write lock while it waits, up to :data:`SQLITE_WAL_RESTART_WAIT_MS`.
        """
        if not self.is_sqlite:
            return
        pooled = self._reader.raw_connection()
        try:
            driver = pooled.driver_connection
            assert driver is not None
            _busy, frames, _done = driver.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if (frames * self._page_size(driver) >= SQLITE_WAL_RESTART_BYTES
                    and time.monotonic() >= self._wal_restart_after):
                self._restart_wal(driver)
        finally:
            pooled.close()

    def _page_size(self, driver: Any) -> int:
        if self._sqlite_page_size is None:
            self._sqlite_page_size = int(driver.execute("PRAGMA page_size").fetchone()[0])
        return self._sqlite_page_size

    def _restart_wal(self, driver: Any) -> None:
        assert self._write_lock is not None
        # this process's writers queue on the lock meanwhile rather than keep the
        # checkpoint from the write lock (they leave it free for microseconds at a time)
        with self._write_lock:
            driver.execute(f"PRAGMA busy_timeout={SQLITE_WAL_RESTART_WAIT_MS}")
            try:
                busy = driver.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()[0]
            finally:
                driver.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
        if busy:  # held off: not again for a while, longer each time in a row
            self._wal_restart_after = time.monotonic() + self._wal_restart_backoff
            self._wal_restart_backoff = min(2 * self._wal_restart_backoff,
                                            SQLITE_WAL_RESTART_BACKOFF_MAX_S)
        else:
            self._wal_restart_backoff = SQLITE_WAL_RESTART_BACKOFF_S

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction (committed on exit, rolled back on error)."""
        if self._write_lock is None:
            with self.engine.begin() as conn:
                yield conn
            return
        with self._write_lock, self.engine.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self._reader.connect() as conn:
            yield conn

    def dispose(self) -> None:
        with self._reader_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()
        self._readers = threading.local()
        if self._sqlite_writer_pooled is not None:
            self._sqlite_writer_pooled.close()
            self._sqlite_writer = self._sqlite_writer_pooled = None
        if self.pg_group_writer is not None:
            with contextlib.suppress(Exception):  # back to the pool as the pool's others
                self.pg_group_writer.driver_connection.autocommit = False
            self.pg_group_writer.close()
            self.pg_group_writer = None
        self.engine.dispose()
        if self._reader is not self.engine:
            self._reader.dispose()


def delete_chunked(db: Database, table: Table, key: Column[Any], where: Sequence[Any],
                   chunk: int = 200, stop: Callable[[], bool] = lambda: False,
                   pause_s: float = 0.02) -> int:
    """Delete the rows of ``table`` matching ``where``, ``chunk`` per write transaction
    (ids read first, outside it: the writer lock is held only for the delete, which checks
    ``where`` again), ``pause_s`` apart so that the calls' own writes go first, until none
    is left or ``stop()``. Returns how many went."""
    total = 0
    while not stop():
        with db.read() as conn:
            ids = conn.execute(select(key).where(*where).limit(chunk)).scalars().all()
        if ids:
            with db.write() as conn:
                total += conn.execute(delete(table).where(key.in_(ids), *where)).rowcount
        if len(ids) < chunk:
            break
        time.sleep(pause_s)
    return total


def _sqlite_path(url: str) -> str:
    """The database file of a ``sqlite:///path`` URL (query string dropped)."""
    from sqlalchemy.engine import make_url

    return os.path.abspath(make_url(url).database or "toolkeeper.db")


SQLITE_PAGE_SIZE = 2048


def single_connection_engine(url: str) -> Engine:
    """An engine for one-shot admin work (migrations) that keeps no pool around."""
    engine = create_engine(url, poolclass=NullPool)
    if url.startswith("sqlite"):
        @event.listens_for(engine, "connect")
        def _page_size(dbapi_conn: Any, _rec: Any) -> None:
            # must precede the first table: the migration creates the file
            dbapi_conn.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")

    return engine
