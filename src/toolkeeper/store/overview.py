"""What the console's overview reads besides the call-stats rollup: approvals requested and
decided over a window, how long they waited, outcomes a person must resolve.

Every query is aggregated in SQL over an index (approvals by tenant and creation time,
outcomes in state ``unknown`` per tenant): the work grows with the approvals of the
window, never with the calls. Bucketing a timestamp needs its epoch seconds, which the two
dialects spell differently (:func:`_epoch_s`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, Float, case, cast, func, select, text
from sqlalchemy.engine import Connection

from toolkeeper.model.enums import ApprovalStatus
from toolkeeper.store.db import Database, as_utc
from toolkeeper.store.schema import approvals, outcomes

_UNKNOWN = text("outcomes.state = 'unknown'")
"""A literal, so that the planner sees the partial index ``ix_outcomes_unknown`` applies."""


@dataclass(slots=True, kw_only=True)
class ApprovalWindow:
    """The approvals of one tenant over a window of ``n`` buckets of ``step_s`` seconds."""

    requested: list[int]
    decided: list[int]
    approved: int = 0
    denied: int = 0
    expired: int = 0
    pending: int = 0
    wait_ms: dict[str, float | None] = field(default_factory=dict)

    @property
    def requested_total(self) -> int:
        return sum(self.requested)


def _epoch_s(conn: Connection, column: Any) -> Any:
    """Whole epoch seconds of a stored timestamp (UTC)."""
    if conn.dialect.name == "postgresql":
        return cast(func.floor(func.extract("epoch", column)), BigInteger)
    return cast(func.strftime("%s", column), BigInteger)


def _wait_ms(conn: Connection) -> Any:
    a = approvals.c
    if conn.dialect.name == "postgresql":
        return cast(func.extract("epoch", a.decided_at - a.created_at), Float) * 1000.0
    # julianday() keeps whole milliseconds: rounded, the float error of the day fraction goes
    return func.round((func.julianday(a.decided_at) - func.julianday(a.created_at))
                      * 86_400_000.0)


def _at(epoch_s: int) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC)


class OverviewRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

    def approvals(self, tenant_id: str, since: int, step_s: int, n: int, *, now: datetime,
                  ttl: timedelta) -> ApprovalWindow:
        """Approvals (not previews) of ``tenant_id``: requested per bucket of
        [since, since + n·step_s) and what became of those; decided per bucket, and how
        long the decided ones waited (``ttl``: none is decided later than that after it
        was asked, which bounds the rows read)."""
        until = since + n * step_s
        out = ApprovalWindow(requested=[0] * n, decided=[0] * n)
        a = approvals.c
        mine = (a.tenant_id == tenant_id, a.kind != "preview")
        with self._db.read() as conn:
            # grouped by label: PostgreSQL would not see two renderings of an expression
            # with bound parameters as the same one
            slot = ((_epoch_s(conn, a.created_at) - since) // step_s).label("slot")
            expired = case((a.expires_at <= now, 1), else_=0).label("gone")
            q = (select(slot, a.status, expired, func.count())
                 .where(*mine, a.created_at >= _at(since), a.created_at < _at(until))
                 .group_by("slot", a.status, "gone"))
            for i, status, gone, k in conn.execute(q):
                out.requested[min(max(int(i), 0), n - 1)] += int(k)
                self._tally(out, str(status), bool(gone), int(k))
            decided = (*mine, a.created_at >= _at(since) - ttl, a.decided_at.is_not(None),
                       a.decided_at >= _at(since), a.decided_at < _at(until))
            slot = ((_epoch_s(conn, a.decided_at) - since) // step_s).label("slot")
            for i, k in conn.execute(select(slot, func.count()).where(*decided)
                                     .group_by("slot")):
                out.decided[min(max(int(i), 0), n - 1)] += int(k)
            out.wait_ms = self._waits(conn, decided, sum(out.decided))
        return out

    @staticmethod
    def _tally(out: ApprovalWindow, status: str, gone: bool, k: int) -> None:
        if status in (ApprovalStatus.APPROVED, ApprovalStatus.CONSUMED):
            out.approved += k
        elif status == ApprovalStatus.DENIED:
            out.denied += k
        elif status == ApprovalStatus.EXPIRED or gone:
            out.expired += k
        else:
            out.pending += k

    @staticmethod
    def _waits(conn: Connection, where: tuple[Any, ...], n: int) -> dict[str, float | None]:
        """p50/p95 (nearest rank) and max of the waits: one sorted read of the ``n``
        approvals decided in the window (one float each)."""
        if n == 0:
            return {"p50": None, "p95": None, "max": None}
        wait = _wait_ms(conn)
        waits = [max(float(w), 0.0) for w in
                 conn.execute(select(wait).where(*where).order_by(wait)).scalars()]
        if not waits:  # decided between the two reads, then purged: nothing to say
            return {"p50": None, "p95": None, "max": None}
        return {name: round(waits[max(math.ceil(q * len(waits)) - 1, 0)], 3)
                for name, q in (("p50", 0.5), ("p95", 0.95), ("max", 1.0))}

    def unknown_outcomes(self, tenant_id: str) -> tuple[int, datetime | None]:
        """How many of the tenant's outcomes are in state ``unknown`` now, and the oldest's
        creation time."""
        o = outcomes.c
        q = select(func.count(), func.min(o.created_at)).where(o.tenant_id == tenant_id,
                                                               _UNKNOWN)
        with self._db.read() as conn:
            count, oldest = conn.execute(q).one()
        return int(count), as_utc(oldest)
