"""Driver-level statements for the hot path: outcome claim/finish, audit append and the
recent-calls writer's batch.

SQLAlchemy's execution path costs several times a SQLite transaction, so the statements
every recorded call runs are prepared once as SQL text and sent straight to the driver
(sqlite3 or psycopg), inside the same transaction SQLAlchemy would use. Values are stored
exactly as SQLAlchemy stores them (JSON text; SQLite datetimes as naive UTC text), so the
repositories read them back unchanged.
"""

from __future__ import annotations

import contextlib
import operator
import os
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import Connection

_PARAM = re.compile(r":(\w+)(\{json\})?")


def _to_pg(sql: str) -> str:
    return _PARAM.sub(lambda m: f"%({m.group(1)})s" + ("::json" if m.group(2) else ""), sql)


def _to_sqlite(sql: str) -> tuple[str, tuple[str, ...]]:
    """Positional (``?``) SQL and the parameter names in order: sqlite3 binds a tuple
    faster than it looks up ~20 names in a dict."""
    return _PARAM.sub("?", sql), tuple(m.group(1) for m in _PARAM.finditer(sql))


STATEMENTS = {
    "claim": (
        "INSERT INTO outcomes (call_id, tenant_id, agent, key, tool, action, tool_version, "
        "args_digest, side_effect, state, status, reason, result, turn_group_id, resolved_by, "
        "created_at, updated_at, expires_at, stale_after) VALUES (:call_id, :tenant_id, :agent, "
        ":key, :tool, :action, :tool_version, :args_digest, :side_effect, :state, :status, "
        ":reason, :result{json}, :turn_group_id, :resolved_by, :created_at, :updated_at, "
        ":expires_at, :stale_after) ON CONFLICT (tenant_id, agent, key) DO NOTHING"),
    "finish": (
        "UPDATE outcomes SET state = :state, status = :status, reason = :reason, "
        "result = :result{json}, updated_at = :updated_at "
        "WHERE call_id = :call_id AND state = 'in_progress'"),
    "effect": (
        "INSERT INTO side_effects (id, tenant_id, agent, call_id, tool, action, tool_version, "
        "policy, arguments, result, status, turn_group_id, compensation_call_id, created_at) "
        "VALUES (:id, :tenant_id, :agent, :call_id, :tool, :action, :tool_version, :policy, "
        ":arguments{json}, :result{json}, :status, :turn_group_id, :compensation_call_id, "
        ":created_at)"),
    "superseded": ("SELECT 1 FROM superseded_turns WHERE tenant_id = :t AND "
                   "turn_group_id = :g"),
    "head": ("SELECT seq, hash, mac, base_seq, base_hash FROM audit_heads "
             "WHERE tenant_key = :k"),
    "head_new": ("INSERT INTO audit_heads (tenant_key, seq, hash) VALUES (:k, 0, :h) "
                 "ON CONFLICT (tenant_key) DO NOTHING"),
    "head_set": ("UPDATE audit_heads SET seq = :seq, hash = :hash, mac = :mac "
                 "WHERE tenant_key = :k"),
    # moves a head only if it is still where this process left it (``audit_chain.append_chained``;
    # the MAC covers the base retention moves, so a re-sealed head does not match either)
    "head_move": ("UPDATE audit_heads SET seq = :seq, hash = :hash, mac = :mac "
                  "WHERE tenant_key = :k AND seq = :seq0 AND hash = :hash0 AND mac IS :mac0"),
    "event": (
        "INSERT INTO audit_events (tenant_key, seq, event_id, ts, type, agent_id, call_id, "
        "trace_id, task_id, step_id, turn_group_id, tool, action, tool_version, risk, gate, "
        "reason, duration_ms, data, prev_hash, hash) VALUES (:tenant_key, :seq, :event_id, :ts, "
        ":type, :agent_id, :call_id, :trace_id, :task_id, :step_id, :turn_group_id, :tool, "
        ":action, :tool_version, :risk, :gate, :reason, :duration_ms, :data{json}, :prev_hash, "
        ":hash)"),
    # the recent-calls writer's batch (``store/recent_calls.py``): ~74 rows a batch under
    # load, where SQLAlchemy's executemany cost 0.9 ms
    "recent_call": (
        "INSERT INTO recent_calls (tenant_id, call_id, ts, agent, tool, action, tool_version, "
        "status, reason, duration_ms, trace_id) VALUES (:tenant_id, :call_id, :ts, :agent, "
        ":tool, :action, :tool_version, :status, :reason, :duration_ms, :trace_id)"),
    "recent_edge": ("SELECT id FROM recent_calls WHERE tenant_id = :t "
                    "ORDER BY id DESC LIMIT 1 OFFSET :o"),
    "recent_trim": "DELETE FROM recent_calls WHERE tenant_id = :t AND id < :i",
}
SQLITE_POSITIONAL = {k: _to_sqlite(v) for k, v in STATEMENTS.items()}
POSTGRES = {k: _to_pg(v) for k, v in STATEMENTS.items()}
POSTGRES["head"] += " FOR UPDATE"

JSON_PARAMS = frozenset({"result", "arguments", "data"})
TIME_PARAMS = frozenset({"created_at", "updated_at", "expires_at", "stale_after", "ts"})
# which parameters of each statement need converting (computed once, not per value)
_CONVERT = {
    name: (tuple(k for k in JSON_PARAMS if f":{k}" in sql),
           tuple(k for k in TIME_PARAMS if f":{k}," in sql or f":{k})" in sql
                 or f":{k} " in sql))
    for name, sql in STATEMENTS.items()
}


def _positional_plan(name: str) -> tuple[Any, tuple[int, ...], tuple[int, ...]]:
    """For one statement on SQLite: a getter of its parameters in order (one C call), and
    the positions of the JSON and the time values among them."""
    names = SQLITE_POSITIONAL[name][1]
    json_keys, time_keys = _CONVERT[name]
    getter = operator.itemgetter(*names) if len(names) > 1 else (
        lambda params, only=names[0]: (params[only],))
    return (getter, tuple(i for i, n in enumerate(names) if n in json_keys),
            tuple(i for i, n in enumerate(names) if n in time_keys))


_SQLITE_PLAN = {name: _positional_plan(name) for name in STATEMENTS}


def dump_json(value: Any) -> str | None:
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def sqlite_time(value: datetime) -> str:
    """SQLAlchemy's SQLite DATETIME text (naive UTC, microseconds)."""
    if value.tzinfo is UTC:  # the usual case: drop the "+00:00" rather than convert
        return value.isoformat(" ", "microseconds")[:-6]
    utc = value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    return utc.isoformat(" ", "microseconds")


BUSY_POLL_MAX_S = 1e-4
"""The longest sleep between tries for SQLite's write lock (see :func:`begin_immediate`)."""
BUSY_SPIN_S = 2e-3
"""How long a waiter for SQLite's write lock retries without sleeping (yielding the CPU
between tries) before it falls back to capped sleeps (see :func:`begin_immediate`)."""


def begin_immediate(driver: Any, timeout_s: float) -> None:
    """Take SQLite's write lock: retry at once for :data:`BUSY_SPIN_S`, then poll with a
    short backoff, bounded by ``timeout_s``.

    SQLite's own busy handler sleeps 1, 2, 5, 10… ms between tries, which turns every
    cross-process handoff of the write lock into milliseconds, so the dedicated writer
    connection has ``busy_timeout=0`` and waits here instead. A recorded call holds the lock
    ~100 µs per transaction, so a waiter usually gets it within a few hundred µs: it first
    retries without sleeping (``sched_yield`` between tries lets the holder's threads run),
    since even a 20 µs sleep lasts ~90 µs here (Linux's timer slack) and a waiter
    asleep when the holder lets go leaves the lock idle for the rest of its sleep. After
    the spin it sleeps 20 µs doubling up to 100 µs per try (a lock held long, e.g. by an
    operator's VACUUM, costs no CPU beyond the spin). Measured with 2 processes on one
    file, 2 cores, alternating: sequential callers 2,998/3,113 recorded calls/s sleeping
    from the first try, 3,288/3,291 spinning 1 ms, 3,307/3,417 spinning 5 ms; 8 callers per
    process 4,451/4,574 sleeping, 5,949/6,162 spinning 1 ms, 6,114/6,160 spinning 5 ms.
    Then 4 runs each of the 2 ms chosen against sleeping: 3,436-3,668 and 3,006-3,180.
    """
    now = time.monotonic()
    deadline = now + timeout_s
    spin_until = now + min(BUSY_SPIN_S, timeout_s)
    delay = 20e-6
    while True:
        try:
            driver.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            now = time.monotonic()
            if now >= deadline:
                raise
        if now < spin_until:
            os.sched_yield()
            continue
        time.sleep(delay)
        delay = min(delay * 2, BUSY_POLL_MAX_S)


class RawTxn:
    """Runs the prepared statements on the driver connection of an open transaction."""

    __slots__ = ("_cur", "oneshot", "pg")

    def __init__(self, driver_conn: Any, pg: bool, oneshot: bool = False) -> None:
        self.pg = pg
        self.oneshot = oneshot
        """PostgreSQL in autocommit (the group's kept connection): one statement may do the
        batch (:mod:`pg_batch`); else :meth:`begin` opens its transaction first."""
        self._cur = driver_conn.cursor()

    def begin(self) -> None:
        """Open the transaction (``oneshot`` only: in autocommit there is none yet)."""
        if self.oneshot:
            self._cur.execute("BEGIN")
            self.oneshot = False

    def call(self, sql: str, params: Sequence[Any]) -> Any:
        """One statement of SQL text as it is (psycopg placeholders): its first value."""
        self._cur.execute(sql, params)
        row = self._cur.fetchone()
        return None if row is None else row[0]

    def _params(self, name: str, params: dict[str, Any]) -> Any:
        """Converted values: a dict for psycopg, a positional sequence for sqlite3."""
        if self.pg:
            json_keys = _CONVERT[name][0]
            out = dict(params)
            for k in json_keys:
                out[k] = dump_json(out.get(k))
            return out
        getter, json_at, time_at = _SQLITE_PLAN[name]
        try:
            values = list(getter(params))
        except KeyError:  # a parameter left out binds NULL, as with SQLAlchemy
            values = [params.get(n) for n in SQLITE_POSITIONAL[name][1]]
        for i in json_at:
            values[i] = dump_json(values[i])
        for i in time_at:
            v = values[i]
            if v is not None:
                values[i] = sqlite_time(v)
        return values

    def _sql(self, name: str) -> str:
        return POSTGRES[name] if self.pg else SQLITE_POSITIONAL[name][0]

    def execute(self, name: str, params: dict[str, Any]) -> int:
        self._cur.execute(self._sql(name), self._params(name, params))
        return int(self._cur.rowcount)

    def executemany(self, name: str, rows: Sequence[dict[str, Any]]) -> None:
        self._cur.executemany(self._sql(name), [self._params(name, r) for r in rows])

    def close(self) -> None:
        self._cur.close()

    def fetchone(self, name: str, params: dict[str, Any]) -> Any:
        self._cur.execute(self._sql(name), self._params(name, params))
        return self._cur.fetchone()


def raw_of(conn: Connection) -> RawTxn:
    """The raw view of an SQLAlchemy connection's current transaction."""
    return RawTxn(conn.connection.driver_connection, conn.dialect.name == "postgresql")


@contextmanager
def raw_read(db: Any) -> Iterator[RawTxn]:
    """A read at the driver level (SQLite: this thread's reader; PostgreSQL: the pool)."""
    if db.is_sqlite:
        txn = RawTxn(db.sqlite_reader(), False)
        try:
            yield txn
        finally:
            txn.close()  # ends the statement: no read snapshot outlives the read
        return
    pooled = db._reader.raw_connection()
    try:
        driver = pooled.driver_connection
        yield RawTxn(driver, not db.is_sqlite)
        if not db.is_sqlite:
            driver.rollback()
    finally:
        pooled.close()


def raw_write(db: Any) -> AbstractContextManager[RawTxn]:
    """A write transaction driven at the driver level.

    SQLite: this process's writers are serialised by ``db._write_lock`` anyway, so they
    share one dedicated connection (no pool round trip). PostgreSQL: a pooled connection.
    """
    return _SqliteWrite(db) if db.is_sqlite else _pg_write(db)


class _SqliteWrite:
    """The SQLite write transaction (a class: a generator context manager costs ~1 µs more
    per transaction, twice per recorded call)."""

    __slots__ = ("_db", "_driver")

    def __init__(self, db: Any) -> None:
        self._db = db
        self._driver: Any = None

    def __enter__(self) -> RawTxn:
        db = self._db
        db._write_lock.acquire()
        try:
            driver = db.sqlite_writer()
            begin_immediate(driver, db.busy_timeout_s)
        except BaseException:
            db._write_lock.release()
            raise
        self._driver = driver
        return RawTxn(driver, False)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        driver = self._driver
        try:
            if exc_type is None:
                try:
                    driver.execute("COMMIT")
                    return
                except BaseException:
                    self._rollback(driver)
                    raise
            self._rollback(driver)
        finally:
            self._db._write_lock.release()

    @staticmethod
    def _rollback(driver: Any) -> None:
        # SQLITE_FULL / IOERR roll back by themselves; a COMMIT refused (a deferred
        # constraint) leaves the transaction open on the shared writer
        if driver.in_transaction:
            driver.execute("ROLLBACK")


def group_write(db: Any) -> AbstractContextManager[RawTxn]:
    """:func:`raw_write` for the group commit's batches, of which one runs at a time per
    process. PostgreSQL: on a connection the batches keep (:class:`_PgGroupWrite`)."""
    return _SqliteWrite(db) if db.is_sqlite else _PgGroupWrite(db)


PG_IDLE_PING_S = 1.0
"""A kept PostgreSQL connection idle this long is pinged before its next batch (as the
pool's ``pre_ping`` does at every checkout): a server restarted meanwhile costs no batch."""


class _PgGroupWrite:
    """A batch's transaction on the kept connection: no pool checkout, ping or reset per
    transaction (two to four round trips of a recorded call's ~15), a ping only after
    ``PG_IDLE_PING_S`` idle; a connection that failed is dropped, the next batch takes a
    new one. The connection is in autocommit: a batch is one statement when it can be
    (:mod:`pg_batch`), else its transaction begins explicitly (:meth:`RawTxn.begin`)."""

    __slots__ = ("_db", "_pooled")

    def __init__(self, db: Any) -> None:
        self._db = db
        self._pooled: Any = None

    def __enter__(self) -> RawTxn:
        db = self._db
        kept = db.pg_group_writer
        if kept is not None and time.monotonic() - kept.info.get("used", 0.0) > PG_IDLE_PING_S:
            try:
                kept.driver_connection.execute(";")
            except Exception:  # gone while idle: a new one
                _drop(db)
                kept = None
        if kept is None:
            kept = db.engine.raw_connection()
            driver = kept.driver_connection
            driver.rollback()  # idle, so that autocommit may be set
            driver.autocommit = True
            db.pg_group_writer = kept
        self._pooled = kept
        return RawTxn(kept.driver_connection, True, oneshot=True)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        driver = self._pooled.driver_connection
        try:
            if exc_type is None:
                driver.commit()
            else:
                driver.rollback()
        except BaseException:
            _drop(self._db)
            raise
        finally:
            self._pooled.info["used"] = time.monotonic()


def _drop(db: Any) -> None:
    kept, db.pg_group_writer = db.pg_group_writer, None
    if kept is not None:
        with contextlib.suppress(Exception):  # already broken: nothing to hand back
            kept.invalidate()


@contextmanager
def _pg_write(db: Any) -> Iterator[RawTxn]:
    pooled = db.engine.raw_connection()
    try:
        driver = pooled.driver_connection
        try:
            yield RawTxn(driver, True)
        except BaseException:
            driver.rollback()
            raise
        driver.commit()
    finally:
        pooled.close()
