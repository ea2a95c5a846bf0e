"""The ``agent_call``s running now, in every process on this store (the chain guard's
record, ``toolkeeper.providers.agent_chains``).

One row per call while it runs: written when it starts sending, deleted when it ends. A
process that dies mid-call leaves its row, which stops counting at ``expires_at`` (epoch
seconds of the writer's clock: start + the call's timeout + a margin far above any sane
clock skew between replicas) and is deleted by a later start. SQLAlchemy Core, not the
driver-level statements of ``store.raw``: an agent call waits on another agent over the
network, and only ``agent_call`` pays for these three statements, no other call.
"""

from __future__ import annotations

import os
import socket
import time
import uuid

from sqlalchemy import delete, insert, select

from toolkeeper.store.db import Database
from toolkeeper.store.schema import agent_calls_in_flight as calls

PURGE_EVERY_S = 60.0
"""How often a process deletes every tenant's expired rows (on its next start)."""

class AgentCallRepo:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._next_purge = 0.0
        self.owner = f"{socket.gethostname()[:120]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """This process, as the rows it writes name it (each worker opens its own store)."""

    def start(self, tenant_id: str, agent: str, chain: tuple[str, ...], ttl_s: float) -> str:
        """Record a call of ``agent`` reached along ``chain``, counting for ``ttl_s`` at
        most; returns the row's id (for :meth:`end`)."""
        now, row = time.time(), uuid.uuid4().hex
        with self._db.write() as conn:
            conn.execute(insert(calls).values(
                id=row, tenant_id=tenant_id, agent=agent, chain=list(chain), owner=self.owner,
                started_at=now, expires_at=now + ttl_s))
            if now >= self._next_purge:
                self._next_purge = now + PURGE_EVERY_S
                conn.execute(delete(calls).where(calls.c.expires_at <= now))
        return row

    def end(self, row: str) -> None:
        with self._db.write() as conn:
            conn.execute(delete(calls).where(calls.c.id == row))

    def chains_into(self, tenant_id: str, agent: str) -> list[tuple[str, ...]]:
        """The chains of the unexpired calls now running ``agent`` of ``tenant_id``, in any
        process; empty when none is."""
        q = select(calls.c.chain).where(calls.c.tenant_id == tenant_id,
                                        calls.c.agent == agent, calls.c.expires_at > time.time())
        with self._db.read() as conn:
            return [tuple(str(a) for a in chain) for chain in conn.execute(q).scalars()]
