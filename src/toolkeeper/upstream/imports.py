"""Upstream MCP tools as governed ``mcp`` tools, pinned by hash (SPEC §7 MCP, §8); the
registry is synced with them by ``toolkeeper.services.upstreams``.

Each upstream tool becomes ``{server}_{tool}`` with the server's (or the operator's
per-tool) side effect and risk — the upstream's own annotations are untrusted and never
lower either. The upstream definition (name, description, schemas, annotations) is hashed
into the tool's implementation, so publishing pins it. When a later listing differs from
the pinned hash the tool is put in ``quarantined`` (calls stop with ``tool_quarantined``)
with a ``tool.quarantined`` audit event, its working copy carrying the new definition
under the next patch version, until an admin re-publishes it.

What the operator's configuration sets (side effect, risk, confirmation, scopes, timeout) is
hashed too (``config_hash``): a later listing replaces the tool's governance only when the
operator changed it, so a tenant admin's edit of the governance (which keeps the tool the
operator's, ``services/tool_code.py``) stays until then.
"""

from __future__ import annotations

from typing import Any

from toolkeeper.canonical import digest
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.tool import ActionSpec, ExecutionMeta, ToolDefinition
from toolkeeper.upstream.servers import ServerConfig


def upstream_hash(tool: Any) -> str:
    """The pinned identity of an upstream tool: what a client (and a model) is shown."""
    wire = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return digest({k: wire.get(k) for k in ("name", "title", "description", "inputSchema",
                                             "outputSchema", "annotations")})


def _param_headers(schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments a 2026-07-28 call mirrors as ``Mcp-Param-*`` headers (SEP-2243), as
    ``[[path...], token]`` pairs; nothing for a tool without ``x-mcp-header``."""
    from mcp.shared.inbound import x_mcp_header_map

    found = x_mcp_header_map(schema)
    return {"param_headers": [[list(p), t] for p, t in found.items()]} if found else {}


def definition(cfg: ServerConfig, tool: Any) -> ToolDefinition:
    """The governed definition of one upstream tool."""
    override = cfg.tools.get(tool.name)
    side = (override.side_effect if override and override.side_effect else cfg.side_effect)
    risk = (override.risk if override and override.risk else cfg.risk)
    schema = dict(tool.input_schema or {"type": "object"})
    output = dict(tool.output_schema) if tool.output_schema else None
    scopes = tuple(override.scopes_required or ()) if override else ()
    confirm = bool(override and override.requires_confirmation)
    tasks = (override.task_support if override else None) or "forbidden"
    config = digest({"side_effect": side, "risk": risk, "requires_confirmation": confirm,
                     "scopes_required": list(scopes), "timeout_s": cfg.timeout_s,
                     **({"task_support": tasks} if tasks != "forbidden" else {})})
    return ToolDefinition(
        name=cfg.local(tool.name), description=(tool.description or "")[:4000],
        tenant_id=cfg.tenant, implementation_type="mcp",
        implementation={"server": cfg.name, "tool": tool.name,
                        "upstream_hash": upstream_hash(tool), "config_hash": config,
                        **_param_headers(schema)},
        # retried only if retry-safe
        execution=ExecutionMeta(timeout_s=cfg.timeout_s, task_support=tasks),
        actions={"run": ActionSpec()}, input_schema=schema, output_schema=output,
        side_effect=SideEffect(side), risk_default=Risk(risk),
        requires_confirmation=confirm, scopes_required=scopes,
        categories=("mcp", cfg.name), origin="config")
