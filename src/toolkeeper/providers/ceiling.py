"""The operator's ceiling (``toolkeeper.bounds``) applied to whole tool definitions: the
policy model comes from the tool's provider and the implementation block's model from the
factory, so these checks sit above both."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from toolkeeper.bounds import Excess, TenantBounds, activation_excess, excess, refuse
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.providers.factory import ProviderFactory, implementation_model


def definition_excess(tool: ToolDefinition, policy_model: type[BaseModel],
                      bounds: TenantBounds) -> list[Excess]:
    """What a tenant's own tool (origin ``api``) sets beyond the ceiling: tool-level policy
    and implementation config. An operator's tool is its own ceiling: nothing."""
    if tool.origin != "api":
        return []
    found = excess(policy_model, tool.policy, bounds, at="/policy")
    config_model = implementation_model(tool.implementation_type)
    if config_model is not None:
        # pointed at as REST names the field (the entry-point checks do the same)
        found += excess(config_model, tool.implementation, bounds,
                        at="/implementation_config")
    return found


def call_excess(tool: ToolDefinition, policy_model: type[BaseModel],
                activation_policy: Mapping[str, Any] | None, tenant_profile: bool,
                bounds: TenantBounds) -> list[Excess]:
    """At call time: what the tenant wrote into the tool or the profile's activation that
    lies beyond the ceiling (a value stored by any path is checked, not only REST's)."""
    found = definition_excess(tool, policy_model, bounds)
    if tenant_profile and activation_policy:
        found += activation_excess(activation_policy, tool, policy_model, bounds)
    return found


def check_tool(tool: ToolDefinition, factory: ProviderFactory, bounds: TenantBounds) -> None:
    """Refuse a tenant's tool definition that reaches beyond the ceiling (REST writes)."""
    refuse(definition_excess(tool, factory.policy_model(tool), bounds), f"tool {tool.name!r}")
