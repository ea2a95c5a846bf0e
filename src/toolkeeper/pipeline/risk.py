"""Step 6: risk = risk_map.get(action, risk_default), raised (never lowered) by adjusters."""

from __future__ import annotations

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import Risk
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState


def risk(rt: Runtime, st: CallState) -> CallResult | None:
    assert st.tool is not None and st.action is not None and st.profile is not None
    tool = st.tool.definition
    level = tool.action_risk(st.action)
    adjusters = st.profile.adjusters
    if adjusters:
        ctx = {
            "side_effect": st.side_effect.value if st.side_effect else None,
            "tool": tool.name, "action": st.action, "agent": st.agent,
            "tenant": st.tenant_id, "autonomy": int(st.profile.profile.autonomy),
        }
        for adj in adjusters:
            if not adj.applies(tool.name, st.action) or not adj.holds(st.arguments, ctx):
                continue
            a = adj.adjuster
            raised = Risk.from_rank(level.rank + a.raise_by)
            if a.raise_to is not None:
                raised = raised.at_least(a.raise_to)
            level = level.at_least(raised)
    st.risk = level
    return None
