"""The console's overview (``GET /stats/overview``): one tenant's calls, denials,
approvals, slow tools and what needs a person, over the last hour, day or week.

Calls come from the call-stats rollup (``toolkeeper.store.stats``: minute rows for the
hour, hour rows for the day and the week), approvals and unknown outcomes from their
tables (``toolkeeper.store.overview``), the tools that need attention from the snapshot
and the health board of this process. Buckets are aligned to whole minutes (hours): the
last one is the current, still filling, minute (hour).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from toolkeeper.model.enums import CallStatus, Health, ToolStatus
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.pipeline.health import HealthBoard
from toolkeeper.services import budget_overview
from toolkeeper.store import Store

TOP = 10
"""Denial reasons and slowest tools listed."""
RAN = (CallStatus.SUCCEEDED.value, CallStatus.FAILED.value, CallStatus.UNKNOWN.value)
"""The calls whose durations are the tool's (a denied call never reached it)."""
_ATTENTION = {ToolStatus.QUARANTINED: "its definition changed upstream: review it and "
              "publish it again", ToolStatus.DISABLED: "disabled: agents cannot call it",
              ToolStatus.DEPRECATED: "deprecated: agents should move to another tool"}


@dataclass(slots=True, frozen=True)
class Window:
    """A window: its rollup resolution, bucket width and number of buckets."""

    resolution: str
    step_s: int
    buckets: int


WINDOWS = {"hour": Window("m", 60, 60), "day": Window("h", 3600, 24),
           "week": Window("h", 3600, 168)}


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat()


def overview(store: Store, catalog: Catalog, health: HealthBoard, tenant_id: str,
             window: str, *, approval_ttl: timedelta, now: float | None = None
             ) -> dict[str, Any]:
    """The overview of ``tenant_id`` over ``window`` (a key of :data:`WINDOWS`)."""
    w = WINDOWS[window]
    now = time.time() if now is None else now
    until = (int(now) // w.step_s + 1) * w.step_s
    since = until - w.step_s * w.buckets
    at = datetime.fromtimestamp(now, UTC)
    count, oldest = store.overview.unknown_outcomes(tenant_id)
    return {
        "window": window, "since": _iso(since), "until": _iso(until), "step_s": w.step_s,
        "generated_at": at.isoformat(),
        "buckets": [_iso(since + i * w.step_s) for i in range(w.buckets)],
        **_calls(store, tenant_id, w, since, until),
        "approvals": _approvals(store, tenant_id, w, since, at, approval_ttl),
        "unknown_outcomes": {"count": count,
                             "oldest": None if oldest is None else oldest.isoformat()},
        "tools_attention": attention(catalog, health, tenant_id),
        "pending_approvals": store.approvals.pending_by_tenant(at, tenant_id).get(tenant_id, 0),
        "budgets": budget_overview.budgets(store, catalog, tenant_id, at),
    }


def _calls(store: Store, tenant_id: str, w: Window, since: int,
           until: int) -> dict[str, Any]:
    stats = store.call_stats
    series: dict[str, list[int]] = {}
    for bucket, status, n in stats.by_status(tenant_id, w.resolution, since, until):
        row = series.setdefault(status, [0] * w.buckets)
        row[(bucket - since) // w.step_s] += n
    order = {s.value: i for i, s in enumerate(CallStatus)}
    by_status = {s: series[s] for s in sorted(series, key=lambda s: (order.get(s, 99), s))
                 if any(series[s])}
    denials = stats.reasons(tenant_id, w.resolution, since, until,
                            status=CallStatus.DENIED.value, limit=TOP)
    tools = stats.durations(tenant_id, w.resolution, since, until, statuses=RAN)
    p95 = {t.tool: t.quantile(0.95) or 0.0 for t in tools}
    slowest = [{"tool": t.tool, "calls": t.calls, "p50_ms": t.quantile(0.5),
                "p95_ms": t.quantile(0.95)}
               for t in sorted(tools, key=lambda t: (-p95[t.tool], t.tool))[:TOP]]
    return {"calls": {"total": sum(sum(v) for v in by_status.values()),
                      "by_status": by_status},
            "denials": [{"reason": r or None, "count": n} for r, n in denials],
            "slowest_tools": slowest}


def _approvals(store: Store, tenant_id: str, w: Window, since: int, at: datetime,
               ttl: timedelta) -> dict[str, Any]:
    a = store.overview.approvals(tenant_id, since, w.step_s, w.buckets, now=at, ttl=ttl)
    return {"requested": a.requested, "decided": a.decided,
            "requested_total": a.requested_total, "approved": a.approved,
            "denied": a.denied, "expired": a.expired, "pending": a.pending,
            "wait_ms": a.wait_ms}


def attention(catalog: Catalog, health: HealthBoard, tenant_id: str) -> list[dict[str, Any]]:
    """The tenant's tools (and the global ones it sees) that are quarantined, disabled or
    deprecated, or not healthy in this process, by name."""
    out = []
    for tool in catalog.visible(tenant_id):
        h = health.get(f"{tenant_id}:{tool.name}")
        why = _ATTENTION.get(tool.status)
        if why is None and h.status is Health.HEALTHY:
            continue
        if h.status is not Health.HEALTHY:
            errors = f"{h.consecutive_errors} failed calls in a row"
            sick = f"{errors}: {h.last_error}" if h.last_error else errors
            why = sick if why is None else f"{why}; {sick}"
        rec = catalog.record(tenant_id, tool.name)
        out.append({"tool": tool.name, "id": rec[0] if rec else None,
                    "status": tool.status.value, "health": h.status.value, "detail": why})
    return out
