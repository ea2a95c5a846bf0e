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
    """Counted from the call-stats rollup (minute buckets for ``hour``, hour buckets for
    ``day`` and ``week``) and the approvals and outcomes tables, for the caller's tenant
    only; the calls this process has queued are written first. Without the ``call_stats``
    setting the call series stay empty."""
    require(caller, Role.OPERATOR, Role.APPROVER)

    def read() -> dict[str, Any]:
        gw.recent_calls.flush()
        return overview(gw.store, gw.catalog, gw.runtime.health, caller.tenant_id, window,
                        approval_ttl=gw.settings.approval_ttl)

    return await anyio.to_thread.run_sync(read)
