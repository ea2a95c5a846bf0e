"""Budget spend per tenant, budget key and calendar period, shared by every process and
replica on the database (``toolkeeper.pipeline.budgets`` decides what to count).

A row holds the calls charged and their summed cost in one period (``d:2026-11-28`` or
``m:2026-11``); a new period is a new row, so a budget resets without a sweep. Money is
never counted in Redis: it must survive a restart, and one upsert per charged call is
what the database's rate counters already do.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    PrimaryKeyConstraint,
    String,
    Table,
    and_,
    delete,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from toolkeeper.store.db import Database
from toolkeeper.store.schema import ID, metadata

budget_spend = Table(
    "budget_spend", metadata,
    Column("tenant_id", String(ID), nullable=False),
    Column("key", String(400), nullable=False),
    Column("period", String(16), nullable=False),
    Column("calls", BigInteger, nullable=False),
    Column("cost", Float, nullable=False),
    Column("warned", Boolean, nullable=False),
    PrimaryKeyConstraint("tenant_id", "key", "period", name="pk_budget_spend"),
)


class Spend(NamedTuple):
    """What a budget key has spent in one period."""

    calls: int
    cost: float


class Charged(NamedTuple):
    """The spend after a charge, and whether this charge raised the period's warning."""

    calls: int
    cost: float
    warned_now: bool


class BudgetRepo:
    """Budget spend shared by every process on the database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def spent(self, tenant_id: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str],
                                                                            Spend]:
        """Spend of each ``(key, period)``; one absent has spent nothing."""
        out = {k: Spend(0, 0.0) for k in keys}
        if not keys:
            return out
        t = budget_spend.c
        with self._db.read() as conn:
            rows = conn.execute(select(t.key, t.period, t.calls, t.cost).where(
                t.tenant_id == tenant_id, t.key.in_({k for k, _ in keys}))).all()
        for key, period, calls, cost in rows:
            if (key, period) in out:
                out[(key, period)] = Spend(int(calls), float(cost))
        return out

    def charge(self, tenant_id: str, key: str, period: str, cost: float, *,
               warn_calls: float | None, warn_cost: float | None) -> Charged:
        """Add one call of ``cost``; the warning is raised once a period, by the charge that
        first reaches ``warn_calls`` calls or ``warn_cost`` spent (whichever is set)."""
        t = budget_spend.c
        where = (t.tenant_id == tenant_id, t.key == key, t.period == period)
        with self._db.write() as conn:
            ins = (pg_insert if conn.dialect.name == "postgresql" else sqlite_insert)(
                budget_spend)
            conn.execute(ins.values(tenant_id=tenant_id, key=key, period=period, calls=0,
                                    cost=0.0, warned=False)
                         .on_conflict_do_nothing(index_elements=["tenant_id", "key", "period"]))
            # one atomic increment: concurrent charges from any replica all count
            conn.execute(update(budget_spend).where(*where).values(
                calls=t.calls + 1, cost=t.cost + cost))
            calls, spent, warned = conn.execute(
                select(t.calls, t.cost, t.warned).where(*where).with_for_update()).one()
            due = ((warn_calls is not None and calls >= warn_calls)
                   or (warn_cost is not None and spent >= warn_cost))
            warned_now = False
            if due and not warned:
                warned_now = conn.execute(update(budget_spend).where(
                    *where, t.warned.is_(False)).values(warned=True)).rowcount == 1
        return Charged(int(calls), float(spent), warned_now)

    def purge(self, before: datetime) -> int:
        """Delete the periods that ended before ``before`` (the retention sweep)."""
        t = budget_spend.c
        with self._db.write() as conn:
            return int(conn.execute(delete(budget_spend).where(or_(
                and_(t.period.startswith("d:"), t.period < f"d:{before:%Y-%m-%d}"),
                and_(t.period.startswith("m:"), t.period < f"m:{before:%Y-%m}")))).rowcount)

    def period_rows(self, tenant_id: str, periods: Sequence[str]
                    ) -> list[tuple[str, str, int, float]]:
        """``(key, period, calls, cost)`` of a tenant's budgets in these periods."""
        t = budget_spend.c
        with self._db.read() as conn:
            rows = conn.execute(select(t.key, t.period, t.calls, t.cost).where(
                t.tenant_id == tenant_id, t.period.in_(list(periods)))
                .order_by(t.key, t.period)).all()
        return [(str(k), str(p), int(c), float(s)) for k, p, c, s in rows]
