"""The body of ``GET /stats/overview`` (``toolkeeper.services.overview``); like every
response model (``toolkeeper.api.responses``) it refuses fields nobody declared."""

from __future__ import annotations

from toolkeeper.api.responses import Out
from toolkeeper.model.enums import Health, ToolStatus
from toolkeeper.model.wire import Timestamp


class CallsOut(Out):
    total: int
    """Calls finished in the window, whatever became of them."""
    by_status: dict[str, list[int]]
    """Calls per bucket of each status that has any, in the order of the call statuses."""


class DenialOut(Out):
    reason: str | None
    count: int


class WaitOut(Out):
    """How long the approvals decided in the window waited for their decision (ms)."""

    p50: float | None
    p95: float | None
    max: float | None


class ApprovalsOut(Out):
    requested: list[int]
    """Approvals asked for per bucket (previews are not counted)."""
    decided: list[int]
    """Approvals approved or denied per bucket."""
    requested_total: int
    approved: int
    """Of those asked for in the window: approved (whether used since or not)."""
    denied: int
    expired: int
    pending: int
    wait_ms: WaitOut


class SlowToolOut(Out):
    tool: str
    calls: int
    """Calls that ran (succeeded, failed, unknown) in the window."""
    p50_ms: float | None
    p95_ms: float | None


class UnknownOutcomesOut(Out):
    count: int
    oldest: Timestamp | None


class AttentionOut(Out):
    tool: str
    id: str | None
    status: ToolStatus
    health: Health
    detail: str


class BudgetOut(Out):
    budget: str
    layer: str
    """``tenant``, ``profile:{name}`` or ``profile:{name}/tool:{tool}``."""
    per: str
    period: str
    subject: str | None
    """What the row counts: the agent, the tool, ``agent:tool``; none for the tenant."""
    calls: int
    cost: float
    max_calls: int | None
    max_cost: float | None
    warn_at: float
    resets_at: Timestamp
    state: str
    """``ok``, ``warning`` (past ``warn_at``) or ``exceeded``."""


class OverviewOut(Out):
    window: str
    since: Timestamp
    until: Timestamp
    step_s: int
    generated_at: Timestamp
    buckets: list[Timestamp]
    """Each bucket's start: 60 minutes, 24 or 168 hours; the last one is still filling."""
    calls: CallsOut
    denials: list[DenialOut]
    """Denied calls by reason, most first (at most 10)."""
    approvals: ApprovalsOut
    slowest_tools: list[SlowToolOut]
    """The 10 tools with the highest p95, from histograms (interpolated within a bucket)."""
    unknown_outcomes: UnknownOutcomesOut
    """Outcomes in state unknown now, whatever their age: a person must resolve them."""
    tools_attention: list[AttentionOut]
    pending_approvals: int
    """Approvals waiting for a person now, whatever their age."""
    budgets: list[BudgetOut]
    """Each budget's spend in its current period, exceeded first, then warning, then ok."""
