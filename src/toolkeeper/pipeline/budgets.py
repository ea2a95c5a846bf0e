"""Cost and call budgets: refused before execution, charged at the outcome.

A budget (``limits.budgets`` of a tenant, a profile or a profile's activation) counts the
calls it covers (``per``: the tenant, the agent, the tool, the agent on the tool) in a
calendar day or month (UTC). What a call costs is declared on its tool (``costs``: fixed,
and/or a number read from the output). :func:`check` runs just before the idempotency step:
a call that would cross a budget stops with ``budget_exceeded``, ``retry_after`` and
``details.resets_at`` (when the period starts again) — unless it is an exact repeat of a
call with an outcome, which is answered from that outcome as the idempotency step would (a
retry is never refused for money it already spent). :func:`charge` runs once per execution,
in the outcome step: deduplicated and replayed calls never reach it, so nothing is charged
twice. A call is charged when it succeeded. The spend lives in the database
(:mod:`toolkeeper.store.budgets`), shared by every replica; calls already running when a
budget fills may overshoot it by their own cost (the check reads, the charge adds).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.profile import Budget, Limits
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import Cost
from toolkeeper.pipeline.idempotency import recorded_repeat
from toolkeeper.pipeline.limits import all_limits, rate_key
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState

log = logging.getLogger("toolkeeper.budgets")
_SUCCEEDED = CallStatus.SUCCEEDED
"""Read once (see ``supersede._IRREVERSIBLE``): every call is charged or not."""


def period_of(period: str, now: datetime) -> tuple[str, datetime]:
    """The ``day`` or ``month`` period's name (``d:YYYY-MM-DD`` / ``m:YYYY-MM``) at ``now``
    and when the next one starts."""
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return f"d:{day:%Y-%m-%d}", day + timedelta(days=1)
    month = day.replace(day=1)
    nxt = month.replace(year=month.year + 1, month=1) if month.month == 12 else \
        month.replace(month=month.month + 1)
    return f"m:{month:%Y-%m}", nxt


def layer_name(layer: str, profile: str) -> str:
    """A budget's layer as keyed: ``tenant``, ``profile:{name}`` or ``tool:{name}`` (an
    activation's, under its profile's key: ``profile:{p}/tool:{t}``)."""
    if layer == "tenant":
        return layer
    return f"profile:{profile}" if layer == "profile" else f"profile:{profile}/{layer}"


def _budgets(st: CallState) -> list[tuple[str, Budget]]:
    """Each budget that covers the call, with its key (layer, name, what it counts)."""
    assert st.profile is not None and st.tool is not None
    name = st.tool.definition.name
    memo = st.profile.memo
    layers: tuple[tuple[str, Limits], ...] | None = memo.get(("budgets", name))
    if layers is None:  # the profile's snapshot never changes: once per tool
        layers = memo["budgets", name] = tuple(
            (layer_name(layer, st.profile.profile.name), lim)
            for layer, lim in all_limits(st) if lim.budgets)
    out = []
    for named, lim in layers:
        for b in lim.budgets:
            out.append((f"{named}:{b.name}:{rate_key(b.per, st, name)}", b))
    return out


def cost_of(st: CallState) -> Cost | None:
    assert st.tool is not None
    costs = st.tool.definition.costs
    return costs.get(st.action or "") or costs.get("*")


def check(rt: Runtime, st: CallState) -> CallResult | None:
    """Stop a call that would cross a budget (see the module's docstring)."""
    budgets = _budgets(st)
    if not budgets:
        return None
    assert st.tenant_id is not None
    now = datetime.now(UTC)
    periods = {key: period_of(b.period, now) for key, b in budgets}
    spent = rt.store.budgets.spent(st.tenant_id, [(k, p) for k, (p, _) in periods.items()])
    cost = cost_of(st)
    fixed = cost.fixed if cost is not None else 0.0
    variable = cost is not None and cost.from_output is not None
    for key, b in budgets:
        period, resets = periods[key]
        used = spent[(key, period)]
        over_calls = b.max_calls is not None and used.calls + 1 > b.max_calls
        over_cost = b.max_cost is not None and (
            used.cost + fixed > b.max_cost or (variable and used.cost >= b.max_cost))
        if not (over_calls or over_cost):
            continue
        repeat = recorded_repeat(rt, st)
        if repeat is not None:  # its outcome exists: answered from it, charged once already
            return repeat
        what = (f"{b.max_calls} calls" if over_calls else f"a cost of {b.max_cost:g}")
        return st.stop(
            EventType.LIMIT_DENIED, Reason.BUDGET_EXCEEDED,
            f"budget {b.name!r} ({b.per}, per {b.period}) allows {what}; it resets at "
            f"{resets.isoformat()}", status=CallStatus.DENIED,
            retry_after=round((resets - now).total_seconds(), 3),
            details={"budget": b.name, "per": b.per, "period": b.period,
                     "resets_at": resets.isoformat(), "calls": used.calls,
                     "cost": used.cost, "max_calls": b.max_calls, "max_cost": b.max_cost})
    return None


def _output_cost(path: str, output: Any) -> float:
    value = output
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return 0.0
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return 0.0
    return float(value)


def charge(rt: Runtime, st: CallState, res: CallResult) -> None:
    """Count one executed call against every budget that covers it (see the module's
    docstring); a budget reaching its ``warn_at`` audits ``budget.warning`` once a period."""
    if res.status is not _SUCCEEDED or st.tenant_id is None:
        return
    budgets = _budgets(st)
    if not budgets:
        return
    cost = cost_of(st)
    amount = 0.0
    if cost is not None:
        amount = cost.fixed + (_output_cost(cost.from_output, res.output)
                               if cost.from_output else 0.0)
    now = datetime.now(UTC)
    for key, b in budgets:
        period, resets = period_of(b.period, now)
        done = rt.store.budgets.charge(
            st.tenant_id, key, period, amount,
            warn_calls=b.max_calls * b.warn_at if b.max_calls is not None else None,
            warn_cost=b.max_cost * b.warn_at if b.max_cost is not None else None)
        if done.warned_now:
            warning: dict[str, Any] = {
                "budget": b.name, "per": b.per, "period": b.period, "calls": done.calls,
                "cost": done.cost, "max_calls": b.max_calls, "max_cost": b.max_cost,
                "resets_at": resets.isoformat()}
            st.emit(EventType.BUDGET_WARNING, **warning)
            rt.listeners.budget(st.tenant_id, {**warning, "key": key, "call_id": st.call_id})
            rt.metrics.budget_warning(st.tenant_id, b.name)
            log.warning("budget %r of tenant %s reached %g%% (key %s)", b.name,
                        st.tenant_id, b.warn_at * 100, key)
