"""Fixed-window rate counters shared by every process on the database."""

from __future__ import annotations

import time

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from toolkeeper.store.db import Database
from toolkeeper.store.schema import rate_counters


class RateRepo:
    """Fixed-window counters shared by every process on the database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def hit(self, key: str, limit: int, window_s: float) -> float | None:
        """Count one call; ``None`` if allowed, else seconds until the window resets."""
        now = time.time()
        with self._db.write() as conn:
            # make sure the row exists before locking it: FOR UPDATE locks nothing that is
            # not there, and two first hits would both insert
            ins = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(
                rate_counters)
            conn.execute(ins.values(key=key, window_start=now, count=0)
                         .on_conflict_do_nothing(index_elements=["key"]))
            row = conn.execute(select(rate_counters).where(rate_counters.c.key == key)
                               .with_for_update()).one()._mapping
            # (not ``row.count``: on a Row that is the tuple's count() method)
            if now - row["window_start"] >= window_s:
                conn.execute(update(rate_counters).where(rate_counters.c.key == key).values(
                    window_start=now, count=1))
                return None
            if row["count"] >= limit:
                return max(0.001, float(row["window_start"]) + window_s - now)
            conn.execute(update(rate_counters).where(rate_counters.c.key == key).values(
                count=row["count"] + 1))
            return None
