"""The call-stats rollup: counts and duration histograms of finished calls, per tenant,
minute and hour, so the console's overview never aggregates the calls themselves.

Written by the recent-calls writer (``toolkeeper.pipeline.recent_calls``): each batch is
summed in memory and added with one upsert per key (tenant, resolution, bucket, tool,
status, reason), in one transaction. Durations go into fixed, log-spaced buckets
(:data:`EDGES_MS`); a percentile is read from the summed bucket counts, interpolated
within its bucket (like Prometheus' ``histogram_quantile``) and never above the slowest
call seen. Minute rows are kept :data:`KEEP_MINUTES`, hour rows :data:`KEEP_HOURS` (or
the audit retention when longer); the retention sweep deletes older ones.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    PrimaryKeyConstraint,
    String,
    Table,
    delete,
    func,
    select,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from toolkeeper.store.db import Database
from toolkeeper.store.schema import ID, NAME, metadata

EDGES_MS = (1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
            10000.0, 30000.0)
"""Upper bounds (inclusive) of the duration buckets; one more bucket holds the rest."""
BUCKETS = len(EDGES_MS) + 1
HIST = tuple(f"h{i}" for i in range(BUCKETS))
RESOLUTIONS = {"m": 60, "h": 3600}
"""Resolution -> bucket width in seconds."""
KEEP_MINUTES = timedelta(days=2)
KEEP_HOURS = timedelta(days=35)

call_stats = Table(
    "call_stats", metadata,
    Column("tenant_id", String(ID), nullable=False),
    Column("resolution", String(1), nullable=False),
    Column("bucket_start", BigInteger, nullable=False),
    Column("tool", String(NAME), nullable=False),
    Column("status", String(32), nullable=False),
    Column("reason", String(NAME), nullable=False),
    Column("count", BigInteger, nullable=False),
    Column("duration_sum", Float, nullable=False),
    Column("duration_max", Float, nullable=False),
    *(Column(h, BigInteger, nullable=False) for h in HIST),
    PrimaryKeyConstraint("tenant_id", "resolution", "bucket_start", "tool", "status",
                         "reason", name="pk_call_stats"),
    Index("ix_call_stats_age", "resolution", "bucket_start"),
)
"""One row per (tenant, resolution ``m``/``h``, bucket start in epoch seconds, tool,
status, reason or ``''``): ``count`` calls, the sum and the largest of their durations
(ms), and ``h0``…``h14`` how many fell in each duration bucket (:data:`EDGES_MS`)."""

_Key = tuple[str, str, int, str, str, str]


@dataclass(slots=True)
class _Sums:
    count: int = 0
    duration_sum: float = 0.0
    duration_max: float = 0.0
    hist: list[int] = field(default_factory=lambda: [0] * BUCKETS)


@dataclass(slots=True, frozen=True, kw_only=True)
class FinishedCall:
    """What the rollup needs of one finished call (``ts``: epoch seconds)."""

    tenant_id: str
    tool: str
    status: str
    reason: str | None
    duration_ms: float
    ts: float


def bucket_of(duration_ms: float) -> int:
    """The index of the duration bucket ``duration_ms`` falls in."""
    for i, edge in enumerate(EDGES_MS):
        if duration_ms <= edge:
            return i
    return len(EDGES_MS)


def percentile(hist: Sequence[int], q: float, max_ms: float) -> float | None:
    """The ``q`` quantile (0..1) of the calls counted in ``hist``, interpolated linearly
    within its bucket (the last, open bucket ends at ``max_ms``); ``None`` with no calls."""
    total = sum(hist)
    if total <= 0:
        return None
    rank, seen = q * total, 0
    for i, n in enumerate(hist):
        if n and seen + n >= rank:
            low = 0.0 if i == 0 else EDGES_MS[i - 1]
            high = EDGES_MS[i] if i < len(EDGES_MS) else max(max_ms, low)
            value = low + (high - low) * max(rank - seen, 0.0) / n
            return round(min(value, max_ms), 3)
        seen += n
    return round(max_ms, 3)


def rollup(calls: Iterable[FinishedCall]) -> dict[_Key, _Sums]:
    """Sum ``calls`` per key, at both resolutions."""
    out: dict[_Key, _Sums] = {}
    for c in calls:
        reason = "" if c.reason is None else c.reason[:NAME]
        slot = bucket_of(c.duration_ms)
        for res, width in RESOLUTIONS.items():
            key = (c.tenant_id, res, int(c.ts // width) * width, c.tool[:NAME],
                   c.status[:32], reason)
            s = out.get(key)
            if s is None:
                s = out[key] = _Sums()
            s.count += 1
            s.duration_sum += c.duration_ms
            s.duration_max = max(s.duration_max, c.duration_ms)
            s.hist[slot] += 1
    return out


@functools.cache
def _upsert(pg: bool) -> Any:
    """The rollup's upsert, built once per dialect (the writer adds a batch every 0.2 s
    under load): building it cost three times executing it, 0.87 against 0.21 ms a batch."""
    ins = (pg_insert if pg else sqlite_insert)(call_stats)
    ex, cur = ins.excluded, call_stats.c
    bigger = func.greatest if pg else func.max  # SQLite's two-argument max()
    added: dict[str, Any] = {c: cur[c] + ex[c] for c in ("count", "duration_sum", *HIST)}
    added["duration_max"] = bigger(cur.duration_max, ex.duration_max)
    return ins.on_conflict_do_update(index_elements=[
        "tenant_id", "resolution", "bucket_start", "tool", "status", "reason"], set_=added)


class CallStatsRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

    def add(self, calls: Iterable[FinishedCall]) -> int:
        """Add ``calls`` to the rollup (one upsert per key, one transaction); returns how
        many rows were written."""
        sums = rollup(calls)
        if not sums:
            return 0
        rows = [{"tenant_id": k[0], "resolution": k[1], "bucket_start": k[2], "tool": k[3],
                 "status": k[4], "reason": k[5], "count": s.count,
                 "duration_sum": s.duration_sum, "duration_max": s.duration_max,
                 **dict(zip(HIST, s.hist, strict=True))} for k, s in sorted(sums.items())]
        with self._db.write() as conn:
            conn.execute(_upsert(conn.dialect.name == "postgresql"), rows)
        return len(rows)

    def purge(self, minutes_before: float, hours_before: float) -> int:
        """Delete minute rows that start before ``minutes_before`` and hour rows before
        ``hours_before`` (epoch seconds); returns how many went."""
        c = call_stats.c
        with self._db.write() as conn:
            n = conn.execute(delete(call_stats).where(
                c.resolution == "m", c.bucket_start < minutes_before)).rowcount
            n += conn.execute(delete(call_stats).where(
                c.resolution == "h", c.bucket_start < hours_before)).rowcount
        return int(n)

    def by_status(self, tenant_id: str, resolution: str, since: int,
                  until: int) -> list[tuple[int, str, int]]:
        """(bucket start, status, calls) of one tenant's rows in [since, until)."""
        c = call_stats.c
        q = (select(c.bucket_start, c.status, func.sum(c.count))
             .where(*self._window(tenant_id, resolution, since, until))
             .group_by(c.bucket_start, c.status))
        with self._db.read() as conn:
            return [(int(b), str(s), int(n)) for b, s, n in conn.execute(q)]

    def reasons(self, tenant_id: str, resolution: str, since: int, until: int, *,
                status: str, limit: int) -> list[tuple[str, int]]:
        """The ``limit`` most frequent reasons of calls with ``status``, most first."""
        c = call_stats.c
        n = func.sum(c.count)
        q = (select(c.reason, n).where(*self._window(tenant_id, resolution, since, until),
                                       c.status == status)
             .group_by(c.reason).order_by(n.desc(), c.reason).limit(limit))
        with self._db.read() as conn:
            return [(str(r), int(k)) for r, k in conn.execute(q)]

    def durations(self, tenant_id: str, resolution: str, since: int, until: int, *,
                  statuses: Sequence[str]) -> list[ToolDurations]:
        """Each tool's summed duration histogram over the calls with ``statuses``."""
        c = call_stats.c
        q = (select(c.tool, func.sum(c.count), func.max(c.duration_max),
                    *(func.sum(c[h]) for h in HIST))
             .where(*self._window(tenant_id, resolution, since, until),
                    c.status.in_(list(statuses)))
             .group_by(c.tool))
        with self._db.read() as conn:
            return [ToolDurations(tool=str(r[0]), calls=int(r[1]), max_ms=float(r[2]),
                                  hist=[int(n) for n in r[3:]]) for r in conn.execute(q)]

    @staticmethod
    def _window(tenant_id: str, resolution: str, since: int, until: int) -> list[Any]:
        c = call_stats.c
        return [c.tenant_id == tenant_id, c.resolution == resolution,
                c.bucket_start >= since, c.bucket_start < until]


@dataclass(slots=True, frozen=True, kw_only=True)
class ToolDurations:
    """One tool's calls in a window: how many, the slowest, the summed histogram."""

    tool: str
    calls: int
    max_ms: float
    hist: list[int]

    def quantile(self, q: float) -> float | None:
        return percentile(self.hist, q, self.max_ms)
