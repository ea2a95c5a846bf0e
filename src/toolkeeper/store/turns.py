"""Superseded turn groups: a newer user turn stops the irreversible calls of older ones."""

from __future__ import annotations

from sqlalchemy import insert, select

from toolkeeper.store.db import Database, utcnow
from toolkeeper.store.raw import raw_read
from toolkeeper.store.schema import superseded_turns


class TurnRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

    def supersede(self, tenant_id: str, turn_group_id: str) -> bool:
        with self._db.write() as conn:
            if conn.execute(select(superseded_turns.c.tenant_id).where(
                    superseded_turns.c.tenant_id == tenant_id,
                    superseded_turns.c.turn_group_id == turn_group_id)).first():
                return False
            conn.execute(insert(superseded_turns).values(
                tenant_id=tenant_id, turn_group_id=turn_group_id, created_at=utcnow()))
            return True

    def is_superseded(self, tenant_id: str, turn_group_id: str) -> bool:
        with raw_read(self._db) as txn:  # on every irreversible call: keep it cheap
            return txn.fetchone("superseded", {"t": tenant_id, "g": turn_group_id}) is not None
