"""Tenant credentials as rows: (tenant, connector, key) → sealed bytes.

Every write is one statement keyed by the row's primary key (insert-or-update, delete), so
tenants writing at the same time never read-modify-write anything shared, and every query
names the tenant: no answer is built from another tenant's rows. The ``credentials`` change
counter moves with each write so other processes refresh what they redact.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from toolkeeper.store.changes import bump
from toolkeeper.store.changes import version as counter_version
from toolkeeper.store.db import Database, utcnow
from toolkeeper.store.schema import credentials as table

COUNTER = "credentials"


def _where(tenant_id: str, connector: str, key: str) -> ColumnElement[bool]:
    return and_(table.c.tenant_id == tenant_id, table.c.connector == connector,
                table.c.key == key)


class CredentialRepo:
    """The ``credentials`` table; values are opaque here (sealed by the secrets layer)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def put(self, tenant_id: str, connector: str, key: str, data: bytes) -> None:
        """Create or replace the tenant's credential in one transaction."""
        now = utcnow()
        with self._db.write() as conn:
            ins = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(table)
            conn.execute(ins.values(tenant_id=tenant_id, connector=connector, key=key,
                                    data=data, updated_at=now).on_conflict_do_update(
                index_elements=["tenant_id", "connector", "key"],
                set_={"data": data, "updated_at": now}))
            bump(conn, COUNTER)

    def replace(self, tenant_id: str, connector: str, key: str, old: bytes,
                new: bytes) -> bool:
        """Swap ``old`` for ``new`` only if the row still holds ``old`` (no lost update)."""
        with self._db.write() as conn:
            res = conn.execute(update(table).where(
                _where(tenant_id, connector, key), table.c.data == old).values(data=new))
        return res.rowcount == 1

    def get(self, tenant_id: str, connector: str, key: str) -> bytes | None:
        """The tenant's sealed value, or ``None``."""
        with self._db.read() as conn:
            row = conn.execute(select(table.c.data).where(
                _where(tenant_id, connector, key))).first()
        return None if row is None else bytes(row.data)

    def delete(self, tenant_id: str, connector: str, key: str) -> bool:
        """Remove the tenant's credential; ``False`` when it has none by that name."""
        with self._db.write() as conn:
            res = conn.execute(delete(table).where(_where(tenant_id, connector, key)))
            if res.rowcount:
                bump(conn, COUNTER)
        return res.rowcount == 1

    def names(self, tenant_id: str) -> list[tuple[str, str]]:
        """The tenant's ``(connector, key)`` names, sorted."""
        with self._db.read() as conn:
            rows = conn.execute(select(table.c.connector, table.c.key).where(
                table.c.tenant_id == tenant_id).order_by(table.c.connector, table.c.key))
            return [(r.connector, r.key) for r in rows]

    def rows(self) -> list[tuple[str, str, str, bytes]]:
        """Every ``(tenant, connector, key, data)`` (for redaction and re-sealing)."""
        with self._db.read() as conn:
            rows = conn.execute(select(table.c.tenant_id, table.c.connector, table.c.key,
                                       table.c.data)).all()
        return [(r.tenant_id, r.connector, r.key, bytes(r.data)) for r in rows]

    def version(self) -> int:
        """The change counter: moves with every put and delete, in any process."""
        return counter_version(self._db, COUNTER)
