"""Tools as every face shows them: the REST registry and discovery, and MCP's discovery
resources — with SPEC §6 field names and their config redacted. No face's machinery is
imported here, so MCP over stdio never loads the REST face.

Redaction: under ``implementation`` and ``policy``, at any depth, a key naming a credential
(``api_key``, ``token``, ``secret``, ``password``, ``authorization``, ``credential``…,
case-insensitive, in snake, kebab or camel case) shows ``"***"``. A value that is only
secret references (``${secret:connector/key}``, optionally after ``Bearer``/``Basic``/
``Token``) is shown as-is: it names where the credential lives, never the credential,
and operators need it to see how a tool is wired.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from toolkeeper.model.mcp_names import mcp_name
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.secrets.base import only_references, sensitive
from toolkeeper.services.discovery import AgentTools, EnabledTool, UnavailableTool
from toolkeeper.store.registry import definition_hash

REDACTED = "***"


def redact(value: Any) -> Any:
    """``value`` with every credential-named key's value replaced by ``"***"``."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            hide = sensitive(str(k)) and v is not None and not (
                isinstance(v, str) and only_references(v))
            out[k] = REDACTED if hide else redact(v)
        return out
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def tool_out(tool: ToolDefinition, tool_id: str | None, *, created_at: datetime | None = None,
             updated_at: datetime | None = None) -> dict[str, Any]:
    """One tool with the SPEC §6 record fields, config redacted."""
    out = tool.model_dump(mode="json", exclude={"implementation", "execution", "policy"})
    for name, action in out["actions"].items():
        action["side_effect"] = tool.action_side_effect(name).value
        action["risk"] = tool.action_risk(name).value
    out.update({
        "id": tool_id, "slug": tool.slug, "scope": "tenant" if tool.tenant_id else "global",
        "tool_type": tool.tool_type,
        "config_schema": {"implementation": redact(tool.implementation),
                          "execution": tool.execution.model_dump(mode="json")},
        "policy": redact(tool.policy),
        "definition_hash": tool.definition_hash or definition_hash(tool),
        "created_at": _iso(created_at), "updated_at": _iso(updated_at)})
    return out


AGENT_HIDDEN = ("config_schema", "policy", "connector_id", "config_ref", "artifact_id",
                "artifact_version", "builtin_key")
"""How a tool is wired and its policy values: for people, never shown to an agent token."""


def agent_tool_out(tool: ToolDefinition, tool_id: str | None,
                   actions: Sequence[str] | None = None) -> dict[str, Any]:
    """A tool as an agent token sees it: without its wiring (implementation, entry point,
    connector) and policy values, and with only ``actions`` when given (those it may call)."""
    out = tool_out(tool, tool_id)
    for key in AGENT_HIDDEN:
        out.pop(key, None)
    if actions is not None:
        out["actions"] = {k: v for k, v in out["actions"].items() if k in actions}
    return out


def discovery_out(tool: ToolDefinition, tool_id: str | None) -> dict[str, Any]:
    """The short form of a tool for discovery listings (no config), with the JSON Schema
    each action's arguments are validated against (seed: ``parameter_schema``)."""
    return {"id": tool_id, "name": tool.name, "slug": tool.slug, "description": tool.description,
            "scope": "tenant" if tool.tenant_id else "global", "tool_type": tool.tool_type,
            "implementation_type": tool.implementation_type, "status": tool.status.value,
            "version": tool.version, "is_active": tool.is_active,
            "categories": list(tool.categories), "capabilities": list(tool.capabilities),
            "side_effect": tool.side_effect.value, "risk_default": tool.risk_default.value,
            "requires_confirmation": tool.requires_confirmation,
            "scopes_required": list(tool.scopes_required),
            "input_schemas": {a: tool.action_input_schema(a) for a in sorted(tool.actions)}}


def enabled_out(item: EnabledTool, tool_id: str | None) -> dict[str, Any]:
    """An agent-enabled tool: the version that runs, the actions the agent may call and the
    JSON Schema each one's arguments are validated against, the name a model sees and the
    description of each."""
    tool = item.definition
    return {**discovery_out(tool, tool_id), "actions": list(item.actions),
            "input_schemas": item.input_schemas(),
            "names": {a: mcp_name(tool, a) for a in item.actions},
            "action_descriptions": {a: tool.actions[a].description for a in item.actions}}


def unavailable_out(item: UnavailableTool, tool_id: str | None) -> dict[str, Any]:
    """A tenant-available tool the agent may not call, with ``why_unavailable``."""
    return {**discovery_out(item.definition, tool_id), "why_unavailable": item.why.value,
            "message": item.message, "missing_scopes": list(item.missing_scopes)}


def record_id(catalog: Catalog, tenant_id: str, name: str) -> str | None:
    """The registry id of the tool ``name`` as ``tenant_id`` sees it."""
    rec = catalog.record(tenant_id, name)
    return rec[0] if rec else None


def listing_body(catalog: Catalog, tenant_id: str,
                 tools: Sequence[ToolDefinition]) -> dict[str, Any]:
    """Tier 1 or 2 as sent by REST and the MCP discovery resources."""
    return {"tenant_id": tenant_id,
            "tools": [discovery_out(t, record_id(catalog, tenant_id, t.name)) for t in tools]}


def enabled_body(catalog: Catalog, tenant_id: str, agent: str, profile: str,
                 tools: Sequence[EnabledTool]) -> dict[str, Any]:
    """Tier 3 of one agent."""
    return {"agent": agent, "profile": profile, "tools": [
        enabled_out(t, record_id(catalog, tenant_id, t.definition.name)) for t in tools]}


def unavailable_body(catalog: Catalog, tenant_id: str, view: AgentTools) -> dict[str, Any]:
    """Tier 2 minus tier 3 of one agent, each with ``why_unavailable``."""
    return {"agent": view.agent, "profile": view.profile, "tools": [
        unavailable_out(t, record_id(catalog, tenant_id, t.definition.name))
        for t in view.unavailable]}


def policy_template(model: type[BaseModel]) -> dict[str, Any]:
    """A policy model as a template shows it: its JSON Schema and the defaults of the fields
    that have one (a required field, such as a root directory, has none)."""
    defaults = {name: f.get_default(call_default_factory=True)
                for name, f in model.model_fields.items() if not f.is_required()}
    return {"policy_schema": model.model_json_schema(),
            "policy_defaults": to_jsonable_python(defaults)}



LIFECYCLE = frozenset({"id", "status", "version", "published_at", "definition_hash",
                       "is_active", "created_at", "updated_at"})
"""Fields a quarantine diff leaves out: where a tool is in its life, not what it is."""


def quarantine_out(pinned: ToolDefinition | None, current: ToolDefinition,
                   tool_id: str) -> dict[str, Any]:
    """A quarantined tool for review: its last published snapshot (the pinned definition),
    its working copy (the new upstream definition) and the top-level fields that differ,
    each side redacted as :func:`tool_out` shows it."""
    now = tool_out(current, tool_id)
    then = tool_out(pinned, tool_id) if pinned is not None else None
    diff = [] if then is None else [
        {"field": key, "pinned": then.get(key), "current": now.get(key)}
        for key in sorted((set(then) | set(now)) - LIFECYCLE)
        if then.get(key) != now.get(key)]
    return {"pinned": then, "current": now, "diff": diff}
