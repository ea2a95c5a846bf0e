"""Per-turn call caps and concurrency slots shared by every process on the database.

A turn counter is one upsert (``INSERT … ON CONFLICT DO UPDATE … WHERE count < cap``): the
database's row lock on the key makes it exact across replicas. A concurrency slot is a
lease row with an expiry: the acquirer locks its group's row (PostgreSQL ``FOR UPDATE``;
SQLite's writers are serialised by ``BEGIN IMMEDIATE``), drops the group's expired leases,
counts the live ones and adds its own when there is room. A released slot is deleted; a
holder that died leaves a lease that stops counting when it expires. Times are epoch
seconds of the writing process's clock; a lease outlives the call's timeout by a grace
far above any sane clock skew between replicas.
"""

from __future__ import annotations

import hashlib
import time
import uuid

from sqlalchemy import case, delete, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from toolkeeper.store.db import Database
from toolkeeper.store.schema import concurrency_groups, concurrency_leases, turn_counts

PURGE_EVERY_S = 60.0
"""How often a process clears expired turn counters (on its next counted call)."""
_KEY_MAX = 512


def _fit(key: str) -> str:
    """``key`` as stored: a digest once it would not fit the column."""
    if len(key) <= _KEY_MAX:
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


class CapRepo:
    """Turn counters and concurrency leases (the ``TurnCounter``'s and the
    ``ConcurrencyGroups``' shared backend)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._next_purge = 0.0

    def count_turn(self, key: str, cap: int, ttl_s: float) -> bool:
        """Count one call of a turn; ``False`` (nothing counted) once ``cap`` were."""
        now = time.time()
        ins = (sqlite_insert if self._db.is_sqlite else pg_insert)(turn_counts).values(
            key=_fit(key), count=1, expires_at=now + ttl_s)
        expired = turn_counts.c.expires_at <= now
        stmt = ins.on_conflict_do_update(
            index_elements=["key"],
            set_={"count": case((expired, 1), else_=turn_counts.c["count"] + 1),
                  "expires_at": case((expired, ins.excluded.expires_at),
                                     else_=turn_counts.c.expires_at)},
            where=(turn_counts.c["count"] < cap) | expired,
        ).returning(turn_counts.c["count"])
        with self._db.write() as conn:
            counted = conn.execute(stmt).first() is not None
            if now >= self._next_purge:
                self._next_purge = now + PURGE_EVERY_S
                conn.execute(delete(turn_counts).where(turn_counts.c.expires_at < now))
        return counted

    def acquire_slot(self, group: str, capacity: int, lease_s: float) -> str | None:
        """A lease id on one of ``group``'s ``capacity`` slots, or ``None`` when all are held."""
        now, key = time.time(), _fit(group)
        with self._db.write() as conn:
            ins = (sqlite_insert if self._db.is_sqlite else pg_insert)(concurrency_groups)
            conn.execute(ins.values(key=key).on_conflict_do_nothing(index_elements=["key"]))
            conn.execute(select(concurrency_groups.c.key).where(
                concurrency_groups.c.key == key).with_for_update())
            conn.execute(delete(concurrency_leases).where(
                concurrency_leases.c.group_key == key, concurrency_leases.c.expires_at <= now))
            held = conn.execute(select(func.count()).select_from(concurrency_leases).where(
                concurrency_leases.c.group_key == key)).scalar_one()
            if held >= capacity:
                return None
            lease = uuid.uuid4().hex
            conn.execute(concurrency_leases.insert().values(
                group_key=key, lease_id=lease, expires_at=now + lease_s))
            return lease

    def release_slot(self, group: str, lease: str) -> None:
        with self._db.write() as conn:
            conn.execute(delete(concurrency_leases).where(
                concurrency_leases.c.group_key == _fit(group),
                concurrency_leases.c.lease_id == lease))
