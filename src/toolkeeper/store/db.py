"""Engines for SQLite (WAL) and PostgreSQL, and the transaction discipline both share.

Writers on SQLite take the database lock up front (``BEGIN IMMEDIATE``) so two processes
can never both read-then-write and deadlock on the upgrade; PostgreSQL relies on unique
constraints and row locks (``SELECT … FOR UPDATE``) for the same guarantees.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.pool import NullPool

DEFAULT_URL = "sqlite:///./toolkeeper.db"


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
        self.is_sqlite = url.startswith("sqlite")
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
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction (committed on exit, rolled back on error)."""
        with self.engine.begin() as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self._reader.connect() as conn:
            yield conn

    def dispose(self) -> None:
        self.engine.dispose()
        if self._reader is not self.engine:
            self._reader.dispose()


def single_connection_engine(url: str) -> Engine:
    """An engine for one-shot admin work (migrations) that keeps no pool around."""
    return create_engine(url, poolclass=NullPool)
