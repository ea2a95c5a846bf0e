"""Upstream MCP tools as governed ``mcp`` tools, pinned by hash (SPEC §7 MCP, §8).

Each upstream tool becomes ``{server}_{tool}`` with the server's (or the operator's
per-tool) side effect and risk — the upstream's own annotations are untrusted and never
lower either. The upstream definition (name, description, schemas, annotations) is hashed
into the tool's implementation, so publishing pins it. When a later listing differs from
the pinned hash the tool is put in ``quarantined`` (calls stop with ``tool_quarantined``)
with a ``tool.quarantined`` audit event, its working copy carrying the new definition
under the next patch version, until an admin re-publishes it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolkeeper.canonical import digest
from toolkeeper.model.enums import Risk, SideEffect, ToolStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.tool import ActionSpec, ExecutionMeta, ToolDefinition
from toolkeeper.services.events import system_event
from toolkeeper.services.registry import content_hash
from toolkeeper.upstream.servers import ServerConfig

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway

log = logging.getLogger("toolkeeper.upstream")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def upstream_hash(tool: Any) -> str:
    """The pinned identity of an upstream tool: what a client (and a model) is shown."""
    wire = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return digest({k: wire.get(k) for k in ("name", "title", "description", "inputSchema",
                                             "outputSchema", "annotations")})


def local_name(server: str, tool: str) -> str:
    """``{server}_{tool}``, made a valid tool/MCP name (unsafe characters → ``_``)."""
    return _UNSAFE.sub("_", f"{server}_{tool}")[:64]


def definition(cfg: ServerConfig, tool: Any) -> ToolDefinition:
    """The governed definition of one upstream tool."""
    override = cfg.tools.get(tool.name)
    side = (override.side_effect if override and override.side_effect else cfg.side_effect)
    risk = (override.risk if override and override.risk else cfg.risk)
    schema = dict(tool.input_schema or {"type": "object"})
    output = dict(tool.output_schema) if tool.output_schema else None
    return ToolDefinition(
        name=local_name(cfg.name, tool.name), description=(tool.description or "")[:4000],
        tenant_id=cfg.tenant, implementation_type="mcp",
        implementation={"server": cfg.name, "tool": tool.name,
                        "upstream_hash": upstream_hash(tool)},
        execution=ExecutionMeta(timeout_s=cfg.timeout_s),  # retried only if retry-safe
        actions={"run": ActionSpec()}, input_schema=schema, output_schema=output,
        side_effect=SideEffect(side), risk_default=Risk(risk),
        requires_confirmation=bool(override and override.requires_confirmation),
        scopes_required=tuple(override.scopes_required or ()) if override else (),
        categories=("mcp", cfg.name), origin="config")


@dataclass(slots=True)
class SyncReport:
    """What one listing did to the registry, by local tool name."""

    imported: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)


def sync_listing(gw: Gateway, cfg: ServerConfig, tools: list[Any]) -> SyncReport:
    """Import new tools (published: their hash is pinned now), quarantine drifted ones."""
    report = SyncReport()
    wanted = [t for t in tools if cfg.include is None or t.name in cfg.include]
    with gw.changes_batch():
        for tool in wanted:
            _sync_one(gw, cfg, tool, report)
    if report.quarantined:
        log.warning("upstream %s changed tools %s: quarantined until re-published",
                    cfg.name, ", ".join(report.quarantined))
    return report


def _sync_one(gw: Gateway, cfg: ServerConfig, tool: Any, report: SyncReport) -> None:
    new = definition(cfg, tool)
    found = gw.store.registry.tool(new.name, cfg.tenant)
    current = found[1] if found and found[1].tenant_id == cfg.tenant else None
    if current is None:
        gw.registry.save(new)
        gw.registry.publish(new.name, cfg.tenant)
        report.imported.append(new.name)
        return
    pinned = current.implementation.get("upstream_hash")
    fresh = new.implementation["upstream_hash"]
    if current.status is ToolStatus.QUARANTINED:
        if content_hash(_as(new, current)) != content_hash(current):
            gw.registry.save(_as(new, current))  # keep the newest for the admin to review
        report.quarantined.append(new.name)
        return
    if pinned == fresh:
        if content_hash(_as(new, current)) == content_hash(current):
            report.unchanged.append(new.name)
            return
        # the operator changed side effect, risk…: a new version, published as configured
        gw.registry.save(_as(new, current, version=_next_patch(current.version),
                             status=ToolStatus.DRAFT))
        gw.registry.publish(new.name, cfg.tenant)
        report.updated.append(new.name)
        return
    gw.registry.save(_as(new, current, version=_next_patch(current.version),
                         status=ToolStatus.QUARANTINED))
    gw.store.audit.append([system_event(
        EventType.TOOL_QUARANTINED, cfg.tenant, tool=new.name, version=current.version,
        server=cfg.name, upstream_tool=tool.name, pinned_hash=pinned, upstream_hash=fresh)])
    report.quarantined.append(new.name)


def _as(new: ToolDefinition, current: ToolDefinition, **update: Any) -> ToolDefinition:
    """``new``'s content with ``current``'s lifecycle fields (and ``update``)."""
    return new.model_copy(update={"version": current.version, "status": current.status,
                                  "published_at": current.published_at,
                                  "definition_hash": current.definition_hash,
                                  "is_active": current.is_active, **update})


def _next_patch(version: str) -> str:
    core = version.split("-")[0].split("+")[0]
    major, minor, patch = (int(p) for p in core.split("."))
    return f"{major}.{minor}.{patch + 1}"
