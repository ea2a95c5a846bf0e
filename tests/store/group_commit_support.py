"""What the group-commit tests share: records, events, a held store, counted commits, and
SQL that makes a commit fail (on SQLite and PostgreSQL)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.engine import make_url

from toolkeeper.model.enums import OutcomeState
from toolkeeper.store import Store
from toolkeeper.store.records import AuditDraft, OutcomeRecord

TENANT = "t1"


def warmed_store(db_url: str) -> Iterator[Store]:
    """The store of ``db_url`` with the tenant's chain head already made (closed after)."""
    s = Store.open(db_url)
    s.outcomes.claim(rec("warm-up"), events("warm-up", "call.attempted"))
    yield s
    s.close()


def rec(key: str, call_id: str | None = None) -> OutcomeRecord:
    now = datetime.now(UTC)
    return OutcomeRecord(
        call_id=call_id or f"c-{key}", tenant_id=TENANT, agent="bot", key=key, tool="pay",
        action="", tool_version="1", args_digest="sha256:x", side_effect="irreversible",
        state=OutcomeState.IN_PROGRESS, status="in_progress", created_at=now, updated_at=now,
        expires_at=now + timedelta(hours=1), stale_after=now + timedelta(minutes=5))


def events(call_id: str, *types: str) -> list[AuditDraft]:
    now = datetime.now(UTC)
    return [AuditDraft(type=t, tenant_id=TENANT, call_id=call_id, event_id=f"{call_id}-{t}",
                       ts=now, data={"n": i}) for i, t in enumerate(types)]


@contextmanager
def held(store: Store) -> Iterator[None]:
    """Another connection holds what the next batch needs first: SQLite's write lock (the
    leader waits at ``BEGIN``, before it takes the queue), or on PostgreSQL the tenant's
    audit chain head (the leader waits on the row lock, its batch taken)."""
    if store.db.is_sqlite:
        conn = sqlite3.connect(make_url(store.db.url).database or "", isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    with store.db.engine.connect() as conn:
        conn.execute(text("SELECT seq FROM audit_heads WHERE tenant_key = :k FOR UPDATE"),
                     {"k": TENANT})
        try:
            yield
        finally:
            conn.rollback()


def count_sqlite_commits(store: Store) -> list[str]:
    """The COMMITs SQLite itself executes on the store's writer connection."""
    seen: list[str] = []
    store.db.sqlite_writer().set_trace_callback(
        lambda sql: seen.append(sql) if sql.strip().upper() == "COMMIT" else None)
    return seen


def install(store: Store, sqlite_sql: list[str], pg_sql: list[str]) -> None:
    with store.db.engine.begin() as conn:
        for sql in sqlite_sql if store.db.is_sqlite else pg_sql:
            conn.execute(text(sql))


COMMIT_FAILS_SQLITE = [
    "CREATE TABLE poison_parent (id TEXT PRIMARY KEY)",
    "CREATE TABLE poison_child (id TEXT REFERENCES poison_parent (id) "
    "DEFERRABLE INITIALLY DEFERRED)",
    "CREATE TRIGGER poison AFTER INSERT ON outcomes WHEN NEW.key = 'poison' "
    "BEGIN INSERT INTO poison_child VALUES (NEW.call_id); END",
]
COMMIT_FAILS_PG = [
    "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'poisoned at commit'; END $$",
    "CREATE CONSTRAINT TRIGGER poison AFTER INSERT ON outcomes DEFERRABLE INITIALLY DEFERRED "
    "FOR EACH ROW WHEN (NEW.key = 'poison') EXECUTE FUNCTION poison()",
]
