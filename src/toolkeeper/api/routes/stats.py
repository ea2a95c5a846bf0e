"""The console's overview: one tenant's calls, approvals and what needs a person."""

from __future__ import annotations

from typing import Any, Literal

import anyio

from toolkeeper.api.auth import Caller, GatewayDep, require
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.stats_responses import OverviewOut
from toolkeeper.model.enums import Role
from toolkeeper.services.overview import overview

router = RouteTable(tags=["stats"])


@router.get("/stats/overview", response_model=OverviewOut, responses=ERRORS,
            summary="Calls, denials, approvals and slow tools over the last hour, day or week")
async def stats_overview(gw: GatewayDep, caller: Caller,
                         window: Literal["hour", "day", "week"] = "day") -> dict[str, Any]:
    """The caller's tenant only; the calls this process has queued are written first.

    Calls come from the call-stats rollup (``settings: call_stats``, on by default): per
    tenant, minute and hour, tool, status and reason, a count and a duration histogram
    (edges 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000 ms; p50/p95
    interpolated within a bucket). ``hour`` reads 60 minute buckets, ``day`` 24 and
    ``week`` 168 hour buckets; the last bucket is the current one. Minute rows are kept 2
    days, hour rows 35 days (or the audit retention when longer). Approvals (previews not
    counted) and unknown outcomes are read from their tables; tools needing attention from
    the catalog and this process's health board."""
    require(caller, Role.OPERATOR, Role.APPROVER)

    def read() -> dict[str, Any]:
        gw.recent_calls.flush()
        return overview(gw.store, gw.catalog, gw.runtime.health, caller.tenant_id, window,
                        approval_ttl=gw.settings.approval_ttl)

    return await anyio.to_thread.run_sync(read)
