"""The recent-calls log: the last N calls of each tenant, whatever became of them.

Rows are written in batches by the gateway's background writer
(``toolkeeper.pipeline.recent_calls``); each batch trims its tenants back to ``keep`` rows,
oldest first, in the same transaction. No arguments or outputs are stored.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from toolkeeper.store.db import Database, as_utc
from toolkeeper.store.raw import raw_write
from toolkeeper.store.schema import recent_calls


@dataclass(slots=True, frozen=True, kw_only=True)
class RecentCall:
    """One finished call as the log keeps it (``id`` grows: newer calls have larger ids)."""

    tenant_id: str
    call_id: str
    ts: datetime
    agent: str | None
    tool: str
    action: str | None
    tool_version: str | None
    status: str
    reason: str | None
    duration_ms: float
    trace_id: str | None
    id: int = 0


_COLUMNS = ("tenant_id", "call_id", "ts", "agent", "tool", "action", "tool_version",
            "status", "reason", "duration_ms", "trace_id")


class RecentCallRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

    def append(self, rows: Sequence[RecentCall], keep: int) -> None:
        """Insert ``rows`` and drop all but the newest ``keep`` rows of their tenants."""
        if not rows:
            return
        with raw_write(self._db) as txn:  # the writer's every batch: at the driver level
            txn.executemany("recent_call", [{c: getattr(r, c) for c in _COLUMNS}
                                            for r in rows])
            for tenant in sorted({r.tenant_id for r in rows}):
                oldest_kept = txn.fetchone("recent_edge", {"t": tenant, "o": keep - 1})
                if oldest_kept is not None:
                    txn.execute("recent_trim", {"t": tenant, "i": oldest_kept[0]})

    def list(self, tenant_id: str, *, status: str | None = None, agent: str | None = None,
             tool: str | None = None, before: int | None = None,
             limit: int = 100) -> builtins.list[RecentCall]:
        """Newest first; ``before`` (an ``id``) pages on to older rows."""
        c = recent_calls.c
        q = select(recent_calls).where(c.tenant_id == tenant_id)
        for column, value in ((c.status, status), (c.agent, agent), (c.tool, tool)):
            if value is not None:
                q = q.where(column == value)
        if before is not None:
            q = q.where(c.id < before)
        q = q.order_by(c.id.desc()).limit(limit)
        with self._db.read() as conn:
            return [_row(r._mapping) for r in conn.execute(q)]


def _row(m: Any) -> RecentCall:
    data = dict(m)
    data["ts"] = as_utc(data["ts"])
    return RecentCall(**data)
