"""Step 6: risk = risk_map.get(action, risk_default), raised (never lowered) by adjusters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import Risk
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState

if TYPE_CHECKING:
    from toolkeeper.pipeline.profiles import CompiledAdjuster


def risk(rt: Runtime, st: CallState) -> CallResult | None:
    assert st.tool is not None and st.action is not None and st.profile is not None
    tool = st.tool.definition
    level = tool.action_risk(st.action)
    adjusters = st.profile.adjusters
    if adjusters:
        ctx = adjuster_context(tool.name, st.action, st.side_effect.value if st.side_effect
                               else None, int(st.profile.profile.autonomy),
                               agent=st.agent, tenant=st.tenant_id)
        level = adjusted(level, adjusters, tool.name, st.action, st.arguments, ctx)
    st.risk = level
    return None


def adjuster_context(tool: str, action: str, side_effect: str | None, autonomy: int,
                     **who: str | None) -> dict[str, Any]:
    """The context fields adjusters read (``context:`` conditions): the one place the call
    and every listing build them. ``who``: ``agent`` and ``tenant`` where known (a listing
    without them leaves them out, so adjusters reading them are not predicted)."""
    return {"side_effect": side_effect, "tool": tool, "action": action,
            "autonomy": autonomy, **who}


def adjusted(level: Risk, adjusters: Sequence[CompiledAdjuster], tool: str, action: str,
             arguments: dict[str, Any] | None, ctx: dict[str, Any]) -> Risk:
    """``level`` raised by every adjuster of ``tool.action`` whose conditions hold. With
    ``arguments`` ``None`` (a listing: no call in hand), only the adjusters that read no
    argument and no context field missing from ``ctx`` are judged: the rest cannot be
    predicted (SPEC §2)."""
    for adj in adjusters:
        if not adj.applies(tool, action):
            continue
        if arguments is None and any(c.arg is not None or (c.context or "tool") not in ctx
                                     for c in adj.adjuster.when):
            continue
        if not adj.holds(arguments or {}, ctx):
            continue
        a = adj.adjuster
        raised = Risk.from_rank(level.rank + a.raise_by)
        if a.raise_to is not None:
            raised = raised.at_least(a.raise_to)
        level = level.at_least(raised)
    return level
