"""Step 5: health, rate limits, per-turn call caps, concurrency group capacity."""

from __future__ import annotations

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.profile import Limits
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ExecutionMeta
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState


def rate_key(per: str, st: CallState, tool: str) -> str:
    return {
        "agent": f"a:{st.tenant_id}:{st.agent}",
        "tool": f"t:{st.tenant_id}:{tool}",
        "tenant": f"n:{st.tenant_id}",
        "agent_tool": f"at:{st.tenant_id}:{st.agent}:{tool}",
    }[per]


def all_limits(st: CallState) -> tuple[tuple[str, Limits], ...]:
    """Each layer's limits with a name that is the same in every process (turn keys)."""
    assert st.profile is not None
    name = st.tool_name
    memo = st.profile.memo
    found: tuple[tuple[str, Limits], ...] | None = memo.get(("limits", name))
    if found is None:  # the profile's snapshot never changes: once per tool
        tenant, profile = st.profile.limits
        out = [("tenant", tenant), ("profile", profile)]
        act = st.profile.activations.get(name)
        if act is not None and act.limits is not None:
            out.append((f"tool:{name}", act.limits))
        found = memo["limits", name] = tuple(out)
    return found


def _counted(st: CallState) -> tuple[tuple[str, Limits], ...]:
    """The layers of :func:`all_limits` that count calls (rates, per-turn caps)."""
    assert st.profile is not None and st.tool is not None
    memo = st.profile.memo
    name = st.tool.definition.name
    found: tuple[tuple[str, Limits], ...] | None = memo.get(("counted", name))
    if found is None:
        found = memo["counted", name] = tuple(
            (layer, lim) for layer, lim in all_limits(st)
            if lim.rate or lim.max_calls_per_turn is not None)
    return found


def _lease_s(rt: Runtime, execution: ExecutionMeta) -> float:
    """How long a shared concurrency slot is held at most: every attempt at its timeout,
    the back-offs between them, and the grace after which a holder is presumed dead."""
    return (execution.timeout_s * (1 + execution.max_retries)
            + rt.settings.retry_max_s * execution.max_retries
            + rt.settings.stale_grace.total_seconds())


def limits(rt: Runtime, st: CallState) -> CallResult | None:
    """Health, rates and per-turn caps; then :func:`slot`, awaited only when the tool has a
    concurrency group to wait for (:func:`needs_slot`)."""
    assert st.tool is not None
    tool = st.tool.definition
    health_key = f"{st.tenant_id}:{tool.name}"
    wait, probe = rt.health.admit_call(health_key)
    if probe:  # the half-open probe is this call's until it ends, however it ends
        st.release.append(lambda: rt.health.end_probe(health_key))
    if wait is not None:
        return st.stop(EventType.LIMIT_DENIED, Reason.TOOL_UNAVAILABLE,
                       f"{tool.name} is unavailable", status=CallStatus.FAILED,
                       retry_after=round(wait, 3))
    for layer, lim in _counted(st):
        for rate in lim.rate:
            key = rate_key(rate.per, st, tool.name) + f":{rate.limit}/{rate.window_s}"
            retry = rt.rates.hit(key, rate.limit, rate.window_s)
            if retry is not None:
                return st.stop(EventType.LIMIT_DENIED, Reason.RATE_LIMITED,
                               f"more than {rate.limit} calls per {rate.window_s:g}s "
                               f"({rate.per})", retry_after=round(retry, 3))
        turn = st.request.turn_group_id
        if lim.max_calls_per_turn is not None and turn:
            key = f"{st.tenant_id}:{st.agent}:{turn}:{layer}"
            if not rt.turns.hit(key, lim.max_calls_per_turn):
                return st.stop(EventType.LIMIT_DENIED, Reason.CALL_LIMIT_EXCEEDED,
                               f"at most {lim.max_calls_per_turn} calls per turn group")
    return None


def needs_slot(st: CallState) -> bool:
    """Whether the call must hold a concurrency group's slot (:func:`slot`)."""
    assert st.tool is not None
    execution = st.tool.definition.execution
    return execution.concurrency_group != "default" or execution.max_concurrency > 1


async def slot(rt: Runtime, st: CallState) -> CallResult | None:
    """A slot of the tool's concurrency group, released when the call ends."""
    assert st.tool is not None
    tool = st.tool.definition
    group = tool.execution.concurrency_group
    release = await rt.concurrency.acquire(
        f"{st.tenant_id}:{group}", tool.execution.max_concurrency, tool.execution.timeout_s,
        _lease_s(rt, tool.execution))
    if release is None:
        return st.stop(EventType.LIMIT_DENIED, Reason.CONCURRENCY_LIMITED,
                       f"concurrency group {group!r} stayed full for "
                       f"{tool.execution.timeout_s:g}s")
    st.release.append(release)
    return None
