"""Audit export's persisted state: one cursor per (sink, tenant chain), one lease per sink.

The cursor is the ``seq`` of the last event of that tenant's chain the sink acknowledged;
it only moves forward, after the sink accepted the batch (at-least-once: a crash between
the two re-sends the batch, never skips it). The lease lets one process at a time ship a
sink, so replicas and ``serve --workers`` never interleave a chain out of order; a holder
that dies loses it after ``ttl_s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import BigInteger, Column, DateTime, Float, String, Table, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from toolkeeper.store.db import Database, as_utc, utcnow
from toolkeeper.store.schema import GLOBAL_TENANT, ID, NAME, audit_heads, metadata

audit_export_cursors = Table(
    "audit_export_cursors", metadata,
    Column("sink", String(NAME), primary_key=True),
    Column("tenant_key", String(ID), primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)
"""The last ``seq`` of ``tenant_key``'s chain that ``sink`` accepted."""

audit_export_leases = Table(
    "audit_export_leases", metadata,
    Column("sink", String(NAME), primary_key=True),
    Column("holder", String(ID), nullable=False),
    Column("until", Float, nullable=False),
)
"""Which process ships ``sink`` (``holder``) until ``until`` (epoch seconds)."""


ACTIVE_S = 86_400.0
"""A sink whose lease was renewed within this long holds back audit retention."""


@dataclass(frozen=True, slots=True)
class Head:
    """A chain's newest ``seq`` and the first one still stored (``base_seq`` + 1)."""

    tenant_id: str | None
    seq: int
    base_seq: int


def _tenant_key(tenant_id: str | None) -> str:
    return tenant_id or GLOBAL_TENANT


class ExportCursors:
    """The cursors and leases of the audit export (``toolkeeper.services.audit_export``)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def heads(self) -> list[Head]:
        """Every chain's head (the export reads each one up to it)."""
        h = audit_heads.c
        with self._db.read() as conn:
            rows = conn.execute(select(h.tenant_key, h.seq, h.base_seq)
                                .order_by(h.tenant_key)).all()
        return [Head(None if k == GLOBAL_TENANT else k, int(seq), int(base))
                for k, seq, base in rows]

    def cursors(self, sink: str) -> dict[str | None, int]:
        """Tenant -> last exported ``seq`` for ``sink`` (absent: nothing exported yet)."""
        c = audit_export_cursors.c
        with self._db.read() as conn:
            rows = conn.execute(select(c.tenant_key, c.seq).where(c.sink == sink)).all()
        return {None if k == GLOBAL_TENANT else k: int(seq) for k, seq in rows}

    def advance(self, sink: str, tenant_id: str | None, seq: int) -> None:
        """Record that ``sink`` accepted ``tenant_id``'s chain up to ``seq`` (never back)."""
        row = {"sink": sink, "tenant_key": _tenant_key(tenant_id), "seq": seq,
               "updated_at": utcnow()}
        with self._db.write() as conn:
            pg = conn.dialect.name == "postgresql"
            ins = (pg_insert if pg else sqlite_insert)(audit_export_cursors).values(row)
            conn.execute(ins.on_conflict_do_update(
                index_elements=["sink", "tenant_key"],
                set_={"seq": ins.excluded.seq, "updated_at": ins.excluded.updated_at},
                where=audit_export_cursors.c.seq < ins.excluded.seq))

    def updated(self, sink: str) -> datetime | None:
        """When ``sink``'s cursors last moved (``None``: never)."""
        c = audit_export_cursors.c
        with self._db.read() as conn:
            rows = conn.execute(select(c.updated_at).where(c.sink == sink)
                                .order_by(c.updated_at.desc()).limit(1)).scalars().all()
        return as_utc(rows[0]) if rows else None

    def lease(self, sink: str, holder: str, now: float, ttl_s: float) -> bool:
        """Take or renew ``sink``'s lease for ``holder``; ``False`` while another holds it."""
        lt = audit_export_leases.c
        with self._db.write() as conn:
            row = conn.execute(select(lt.holder, lt.until).where(lt.sink == sink)
                               .with_for_update()).first()
            if row is None:
                pg = conn.dialect.name == "postgresql"
                ins = (pg_insert if pg else sqlite_insert)(audit_export_leases).values(
                    sink=sink, holder=holder, until=now + ttl_s)
                return bool(conn.execute(ins.on_conflict_do_nothing()).rowcount)
            if row.holder != holder and row.until > now:
                return False
            conn.execute(update(audit_export_leases).where(lt.sink == sink)
                         .values(holder=holder, until=now + ttl_s))
            return True

    def release(self, sink: str, holder: str) -> None:
        """Give ``sink``'s lease up (at close), if ``holder`` still has it."""
        lt = audit_export_leases.c
        with self._db.write() as conn:
            conn.execute(update(audit_export_leases).where(
                lt.sink == sink, lt.holder == holder).values(until=0.0))

    def floors(self, now: float, active_s: float = ACTIVE_S) -> dict[str, int]:
        """Tenant key -> the last ``seq`` every active sink accepted, for the chains an
        active sink (its lease renewed within ``active_s``) still lacks events of: audit
        retention deletes nothing past it (a sink that is down keeps its events; a sink
        taken out of the config stops holding them ``active_s`` after its last pass)."""
        c, lt = audit_export_cursors.c, audit_export_leases.c
        with self._db.read() as conn:
            active = conn.execute(select(lt.sink).where(lt.until > now - active_s)
                                  ).scalars().all()
            if not active:
                return {}
            keys = conn.execute(select(audit_heads.c.tenant_key)).scalars().all()
            rows = conn.execute(select(c.sink, c.tenant_key, c.seq)
                                .where(c.sink.in_(active))).all()
        got = {(sink, key): int(seq) for sink, key, seq in rows}
        return {key: min(got.get((sink, key), 0) for sink in active) for key in keys}

    def backlog(self, sink: str, heads: list[Head] | None = None,
                cursors: Mapping[str | None, int] | None = None) -> int:
        """Events stored and not yet accepted by ``sink``, over every chain."""
        heads = self.heads() if heads is None else heads
        cursors = self.cursors(sink) if cursors is None else cursors
        return sum(max(0, h.seq - max(cursors.get(h.tenant_id, 0), h.base_seq))
                   for h in heads)


__all__ = ["ExportCursors", "Head", "audit_export_cursors", "audit_export_leases"]
