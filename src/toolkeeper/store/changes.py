"""Change counters shared by every process on the database (``changes`` table)."""

from __future__ import annotations

from sqlalchemy import Connection, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from toolkeeper.store.db import Database
from toolkeeper.store.schema import changes


def bump(conn: Connection, name: str) -> None:
    """Move counter ``name`` inside ``conn``'s transaction."""
    ins = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(changes)
    conn.execute(ins.values(name=name, version=1).on_conflict_do_update(
        index_elements=["name"], set_={"version": changes.c.version + 1}))


def version(db: Database, name: str) -> int:
    """The counter's value (0 before its first change)."""
    with db.read() as conn:
        value = conn.execute(select(changes.c.version).where(changes.c.name == name)).scalar()
    return int(value or 0)
