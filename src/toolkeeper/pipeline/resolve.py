"""Step 2: the tool is visible, active, in an allowed status, activated, action allowed,
and what a tenant wrote into its policy stays within the operator's ceiling."""

from __future__ import annotations

from toolkeeper.bounds import call_excess
from toolkeeper.errors import UserError
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import Mode, ToolStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState
from toolkeeper.providers.factory import EntryPointNotAllowed, server_problem

_RUNNABLE = {
    Mode.PRODUCTION: frozenset({ToolStatus.PUBLISHED, ToolStatus.DEPRECATED}),
    Mode.DEBUG: frozenset({ToolStatus.PUBLISHED, ToolStatus.DEPRECATED, ToolStatus.DRAFT}),
}


def resolve(rt: Runtime, st: CallState) -> CallResult | None:
    assert st.profile is not None and st.tenant_id is not None
    req = st.request
    name = req.tool if isinstance(req.tool, str) else ""
    record = rt.catalog.record(st.tenant_id, name)
    if record is None:
        return st.stop(EventType.POLICY_DENIED, Reason.TOOL_NOT_FOUND, f"no tool {name!r}")
    working = record[1]
    if not working.is_active or working.status is ToolStatus.DISABLED:
        return st.stop(EventType.POLICY_DENIED, Reason.TOOL_DISABLED, f"{name} is disabled")
    if working.status is ToolStatus.QUARANTINED:
        return st.stop(EventType.POLICY_DENIED, Reason.TOOL_QUARANTINED,
                       f"{name}: upstream definition changed; an admin must re-publish it")
    if working.status not in _RUNNABLE[rt.settings.mode]:
        return st.stop(EventType.POLICY_DENIED, Reason.TOOL_NOT_PUBLISHED,
                       f"{name} is {working.status.value}")
    activation = st.profile.activations.get(name)
    if activation is None:
        return st.stop(EventType.POLICY_DENIED, Reason.TOOL_NOT_ENABLED,
                       f"{name} is not enabled for profile {st.profile.profile.name!r}")
    try:
        tool = rt.catalog.runnable(st.tenant_id, name, activation.version)
    except EntryPointNotAllowed as exc:
        return st.stop(EventType.POLICY_DENIED, exc.reason, str(exc))
    except UserError as exc:  # the factory's ProviderUnavailable
        return st.stop(EventType.POLICY_DENIED, Reason.PROVIDER_UNAVAILABLE, str(exc))
    if tool is None:
        return st.stop(EventType.POLICY_DENIED, Reason.TOOL_NOT_PUBLISHED,
                       f"{name}: no published version" + (
                           f" {activation.version}" if activation.version else ""))
    unreachable = server_problem(tool.definition, rt.catalog.mcp_servers)
    if unreachable is not None:
        return st.stop(EventType.POLICY_DENIED, Reason.PROVIDER_UNAVAILABLE, unreachable)
    st.tool = tool
    actions = tool.definition.actions
    action = req.action
    if action is None:
        if len(actions) != 1:
            return st.stop(EventType.POLICY_DENIED, Reason.ACTION_NOT_FOUND,
                           f"{name} has several actions; name one of {sorted(actions)}")
        action = next(iter(actions))
    if not isinstance(action, str) or action not in actions:
        return st.stop(EventType.POLICY_DENIED, Reason.ACTION_NOT_FOUND,
                       f"{name} has no action {action!r}")
    st.action = action
    if activation.actions is not None and action not in activation.actions:
        return st.stop(EventType.POLICY_DENIED, Reason.ACTION_NOT_ALLOWED,
                       f"{name}.{action} is not allowed for this profile")
    exceeded = call_excess(tool.definition, tool.provider.policy_model, activation.policy,
                           st.profile.profile.origin == "api", rt.settings.tenant_bounds)
    if exceeded:
        return st.stop(EventType.POLICY_DENIED, Reason.POLICY_EXCEEDS_BOUNDS,
                       f"{name}: {exceeded[0].message}")
    policy = st.profile.policy_for(tool)
    if policy.allowed_actions is not None and action not in policy.allowed_actions:
        return st.stop(EventType.POLICY_DENIED, Reason.ACTION_NOT_ALLOWED,
                       f"{name}.{action} is not in the policy's allowed_actions")
    st.policy = policy
    st.side_effect = tool.definition.action_side_effect(action)
    if rt.settings.audit_level == "steps":
        st.emit(EventType.CALL_RESOLVED)
    return None
