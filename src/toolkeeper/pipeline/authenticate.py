"""Step 1: the caller is a known agent (token, or an operator acting for one)."""

from __future__ import annotations

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState


def authenticate(rt: Runtime, st: CallState) -> CallResult | None:
    p = st.principal
    if p is None or p.agent is None:
        return st.stop(EventType.POLICY_DENIED, Reason.UNAUTHENTICATED,
                       "no agent identity for this call")
    st.tenant_id = p.tenant_id
    agent = rt.catalog.agents.get((p.tenant_id, p.agent))
    if agent is None:
        return st.stop(EventType.POLICY_DENIED, Reason.UNAUTHENTICATED,
                       f"unknown agent {p.agent!r}")
    st.agent = agent.name
    st.profile = rt.catalog.profiles.get((agent.tenant_id, agent.profile))
    if st.profile is None:  # an agent without its profile can do nothing: default deny
        return st.stop(EventType.POLICY_DENIED, Reason.TOOL_NOT_ENABLED,
                       f"agent {agent.name!r} has no profile {agent.profile!r}",
                       status=CallStatus.DENIED)
    if rt.settings.audit_level == "steps":
        st.emit(EventType.CALL_REQUESTED)
    return None
