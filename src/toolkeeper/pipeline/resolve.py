"""Step 2: the tool is visible, active, in an allowed status, activated, action allowed,
and what a tenant wrote into its policy stays within the operator's ceiling."""

from __future__ import annotations

from dataclasses import dataclass

from toolkeeper.bounds import TenantBounds
from toolkeeper.errors import UserError
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import Mode, SideEffect, ToolStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.profile import Activation
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.pipeline.catalog import Catalog, CompiledTool
from toolkeeper.pipeline.profiles import CompiledProfile
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState
from toolkeeper.providers.base import ToolPolicy
from toolkeeper.providers.ceiling import call_excess
from toolkeeper.providers.factory import EntryPointNotAllowed, server_problem

RUNNABLE = {
    Mode.PRODUCTION: frozenset({ToolStatus.PUBLISHED, ToolStatus.DEPRECATED}),
    Mode.DEBUG: frozenset({ToolStatus.PUBLISHED, ToolStatus.DEPRECATED, ToolStatus.DRAFT}),
}
"""The statuses a tool runs in, per mode (SPEC §2 step 2)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why resolve stops: a stable reason and the message for the caller."""

    reason: Reason
    message: str


# The predicates below are the resolve rules; the step and every listing
# (services.discovery) call them, so what is listed is what resolves.

def resolve_tool(catalog: Catalog, profile: CompiledProfile, tenant_id: str,
                 name: str) -> tuple[CompiledTool, Activation] | Refusal:
    """The version of ``name`` that runs for ``profile``, and its activation."""
    record = catalog.record(tenant_id, name)
    if record is None:
        return Refusal(Reason.TOOL_NOT_FOUND, f"no tool {name!r}")
    working = record[1]
    if not working.is_active or working.status is ToolStatus.DISABLED:
        return Refusal(Reason.TOOL_DISABLED, f"{name} is disabled")
    if working.status is ToolStatus.QUARANTINED:
        return Refusal(Reason.TOOL_QUARANTINED,
                       f"{name}: the code or upstream definition it pinned changed; an admin "
                       "must re-publish it")
    if working.status not in RUNNABLE[catalog.mode]:
        return Refusal(Reason.TOOL_NOT_PUBLISHED, f"{name} is {working.status.value}")
    activation = profile.activations.get(name)
    if activation is None:
        return Refusal(Reason.TOOL_NOT_ENABLED,
                       f"{name} is not enabled for profile {profile.profile.name!r}")
    try:
        tool = catalog.runnable(tenant_id, name, activation.version)
    except EntryPointNotAllowed as exc:
        return Refusal(exc.reason, str(exc))
    except UserError as exc:  # the factory's ProviderUnavailable
        return Refusal(Reason.PROVIDER_UNAVAILABLE, str(exc))
    if tool is None:
        pin = f" {activation.version}" if activation.version else ""
        return Refusal(Reason.TOOL_NOT_PUBLISHED, f"{name}: no published version{pin}")
    unreachable = server_problem(tool.definition, catalog.mcp_servers)
    if unreachable is not None:
        return Refusal(Reason.PROVIDER_UNAVAILABLE, unreachable)
    return tool, activation


def pick_action(definition: ToolDefinition, requested: object) -> str | Refusal:
    """The action called: the one named, or the tool's only one."""
    actions = definition.actions
    if requested is None:
        if len(actions) != 1:
            return Refusal(Reason.ACTION_NOT_FOUND, f"{definition.name} has several actions; "
                           f"name one of {sorted(actions)}")
        return next(iter(actions))
    if not isinstance(requested, str) or requested not in actions:
        return Refusal(Reason.ACTION_NOT_FOUND, f"{definition.name} has no action {requested!r}")
    return requested


def activation_allows(activation: Activation, action: str) -> bool:
    return activation.actions is None or action in activation.actions


def tool_policy(profile: CompiledProfile, tool: CompiledTool, activation: Activation,
                bounds: TenantBounds) -> ToolPolicy | Refusal:
    """The tool's policy for ``profile``, unless a tenant wrote it beyond the operator's
    ceiling. Raises ``ConfigError`` when the values do not fit the policy model."""
    exceeded = call_excess(tool.definition, tool.provider.policy_model, activation.policy,
                           profile.profile.origin == "api", bounds)
    if exceeded:
        return Refusal(Reason.POLICY_EXCEEDS_BOUNDS,
                       f"{tool.definition.name}: {exceeded[0].message}")
    return profile.policy_for(tool.definition, tool.provider)


def policy_allows(policy: ToolPolicy, action: str) -> bool:
    """Whether ``policy`` can ever run ``action`` (``ToolPolicy.refusal``)."""
    return policy.refusal(action) is None


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a tool name and requested action resolved to for a tenant's profile,
    remembered in the profile's memo: every input of the rules is part of the catalog's
    snapshot (checked by its serial: a call that read its profile just before a reload
    resolves against the new one afresh) or of the gateway's settings (the operator's
    bounds, fixed for its life), so the same request resolves the same way until the next
    snapshot. Refusals are not remembered: a provider that could not be built is tried
    again, and names that resolve to nothing never grow the memo."""

    catalog: int
    """The snapshot's :attr:`Catalog.serial` (not the catalog: the profile it is kept in
    belongs to one, and a reference back would keep a replaced snapshot until a full
    garbage collection)."""
    tool: CompiledTool
    action: str
    policy: ToolPolicy
    side_effect: SideEffect


def resolve(rt: Runtime, st: CallState) -> CallResult | None:
    assert st.profile is not None and st.tenant_id is not None
    req = st.request
    asked = req.action
    key = (st.tenant_id, req.tool, asked) if type(req.tool) is str and (
        asked is None or type(asked) is str) else None
    memo = st.profile.memo
    hit = memo.get(key) if key is not None else None
    if hit is None or hit.catalog != rt.catalog.serial:
        res = _resolve(rt, st)
        if res is not None:
            return res
        assert st.tool is not None and st.action is not None and st.policy is not None
        assert st.side_effect is not None
        if key is not None:
            memo[key] = Resolved(rt.catalog.serial, st.tool, st.action, st.policy,
                                 st.side_effect)
    else:
        st.tool, st.action, st.policy, st.side_effect = (hit.tool, hit.action, hit.policy,
                                                         hit.side_effect)
    if rt.settings.audit_level == "steps":
        st.emit(EventType.CALL_RESOLVED)
    return None


def _resolve(rt: Runtime, st: CallState) -> CallResult | None:
    assert st.profile is not None and st.tenant_id is not None
    req = st.request
    name = req.tool if isinstance(req.tool, str) else ""
    found = resolve_tool(rt.catalog, st.profile, st.tenant_id, name)
    if isinstance(found, Refusal):
        return _stop(st, found)
    tool, activation = found
    st.tool = tool
    action = pick_action(tool.definition, req.action)
    if isinstance(action, Refusal):
        return _stop(st, action)
    st.action = action
    if not activation_allows(activation, action):
        return _stop(st, Refusal(Reason.ACTION_NOT_ALLOWED,
                                 f"{name}.{action} is not allowed for this profile"))
    policy = tool_policy(st.profile, tool, activation, rt.settings.tenant_bounds)
    if isinstance(policy, Refusal):
        return _stop(st, policy)
    refused = policy.refusal(action)
    if refused is not None:
        return _stop(st, Refusal(refused[0], f"{name}: {refused[1]}"))
    st.policy = policy
    st.side_effect = tool.definition.action_side_effect(action)
    return None


def _stop(st: CallState, refusal: Refusal) -> CallResult:
    return st.stop(EventType.POLICY_DENIED, refusal.reason, refusal.message)
