"""``toolkeeper tools list|show|publish|version``: the tenant's registry (SPEC §6, §7).

Publishing follows the registry's lifecycle rules (``RegistryService``), as
``POST /tools/{id}/publish`` and ``POST /tools/{id}/version`` do: an admin token of the
tenant publishes that tenant's tools; global tools come from configuration."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from toolkeeper.cli._common import (
    JsonFlag,
    TokenOption,
    fail,
    fields_table,
    gateway,
    person,
    print_json,
    state,
    table,
)
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.secrets.redact import MASK

app = typer.Typer(help="List, inspect and publish tools.", no_args_is_help=True)

_SENSITIVE = ("api_key", "apikey", "token", "secret", "password", "authorization")


def redact_config(value: Any) -> Any:
    """Config as shown to people (SPEC §6): values under sensitive keys become ``***``."""
    if isinstance(value, dict):
        return {k: MASK if any(s in str(k).lower() for s in _SENSITIVE) else redact_config(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact_config(v) for v in value]
    return value


def _brief(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "name": tool.name, "version": tool.version, "status": tool.status.value,
        "tool_type": tool.tool_type, "implementation_type": tool.implementation_type,
        "scope": "tenant" if tool.tenant_id else "global", "risk_default": tool.risk_default.value,
        "side_effect": tool.side_effect.value, "actions": sorted(tool.actions),
        "description": tool.description,
    }


@app.command("list")
def list_(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option(
        "--status", help="draft, published, deprecated, disabled or quarantined.")] = None,
    type_: Annotated[str | None, typer.Option(
        "--type", help="Tool type (built_in, mcp, artifact, custom) or implementation type "
        "(native, http, builtin, function…).")] = None,
    json_out: JsonFlag = False,
) -> None:
    """List the tools visible to the tenant (its own and global ones)."""
    with gateway(ctx) as gw:
        tools = gw.catalog.visible(state(ctx).tenant)
    rows = [_brief(t) for t in tools
            if (status is None or t.status.value == status)
            and (type_ is None or type_ in (t.tool_type, t.implementation_type))]
    if json_out:
        print_json(rows)
        return
    table("tools", ["name", "version", "status", "type", "scope", "risk", "side effect",
                    "actions"],
          [[r["name"], r["version"], r["status"],
            f"{r['tool_type']}/{r['implementation_type']}", r["scope"], r["risk_default"],
            r["side_effect"], r["actions"]] for r in rows], empty="no tools")


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Tool name.")],
    json_out: JsonFlag = False,
) -> None:
    """Show one tool: its definition, published versions and actions."""
    with gateway(ctx) as gw:
        rec = gw.catalog.record(state(ctx).tenant, name)
    if rec is None:
        fail(Reason.NOT_FOUND, f"no tool {name!r} visible to tenant {state(ctx).tenant!r}")
    tool_id, tool, versions = rec
    data = tool.model_dump(mode="json")
    data["implementation"] = redact_config(data.get("implementation") or {})
    data["policy"] = redact_config(data.get("policy") or {})
    if json_out:
        print_json({"id": tool_id, "tool_type": tool.tool_type, "definition": data,
                    "versions": [_version(v) for v in versions], "actions": _actions(tool)})
        return
    fields_table(f"tool {tool.name}", [
        ("id", tool_id), ("description", tool.description), ("version", tool.version),
        ("status", tool.status.value), ("tool_type", tool.tool_type),
        ("scope", "tenant " + tool.tenant_id if tool.tenant_id else "global"),
        ("implementation", {"type": tool.implementation_type, **data["implementation"]}),
        ("scopes_required", ", ".join(tool.scopes_required)),
        ("requires_confirmation", tool.requires_confirmation),
        ("idempotency_key_fields", ", ".join(tool.idempotency_key_fields)),
        ("timeout_s", tool.execution.timeout_s), ("policy", data["policy"]),
        ("published_at", tool.published_at), ("definition_hash", tool.definition_hash)])
    table("versions", ["version", "status", "published_at", "definition_hash"],
          [list(_version(v).values()) for v in versions], empty="no published versions")
    acts = _actions(tool)
    table("actions", list(acts[0]), [list(a.values()) for a in acts])


@app.command("publish")
def publish(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Tool name (a tool of your tenant).")],
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Publish the working copy as an immutable version snapshot (admin)."""
    with gateway(ctx) as gw:
        by = person(gw, token, Role.ADMIN)
        _published(gw.registry.publish(name, by.tenant_id), json_out)


@app.command("version")
def version(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Tool name (a tool of your tenant).")],
    new_version: Annotated[str, typer.Argument(help="The new semver, greater than the "
                                               "current one (X.Y.Z).")],
    token: TokenOption = None,
    json_out: JsonFlag = False,
) -> None:
    """Move the tool to a greater version and publish that snapshot (admin)."""
    with gateway(ctx) as gw:
        by = person(gw, token, Role.ADMIN)
        _published(gw.registry.new_version(name, new_version, by.tenant_id), json_out)


def _published(tool: ToolDefinition, json_out: bool) -> None:
    if json_out:
        print_json(_brief(tool) | {"published_at": tool.published_at})
        return
    fields_table(f"tool {tool.name}", [("version", tool.version), ("status", tool.status.value),
                                       ("published_at", tool.published_at)])


def _version(v: ToolDefinition) -> dict[str, Any]:
    return {"version": v.version, "status": v.status.value, "published_at": v.published_at,
            "definition_hash": v.definition_hash}


def _actions(tool: ToolDefinition) -> list[dict[str, Any]]:
    out = []
    for name, spec in tool.actions.items():
        comp = tool.compensation.get(name)
        out.append({
            "action": name, "risk": tool.action_risk(name).value,
            "side_effect": tool.action_side_effect(name).value,
            "scopes": sorted(tool.action_scopes(name)),
            "compensation": f"{comp.tool or tool.name}.{comp.action}" if comp else None,
            "description": spec.description,
        })
    return out
