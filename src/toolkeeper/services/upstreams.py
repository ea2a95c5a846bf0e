"""A gateway's upstream MCP servers: the pool (secrets resolved at connect time), listing
each server and syncing its tools into the registry — new ones imported and published (their
hash pinned), drifted ones quarantined (SPEC §7 MCP, §8) — now and every ``mcp_resync_s``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from toolkeeper.identity.upstream import UpstreamTokens
from toolkeeper.model.enums import ToolStatus
from toolkeeper.model.events import EventType
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.secrets.base import SecretsStore
from toolkeeper.secrets.credentials import TenantCredentials
from toolkeeper.services.events import system_event
from toolkeeper.services.periodic import Periodic
from toolkeeper.services.registry import RegistryService, content_hash
from toolkeeper.store import Store
from toolkeeper.upstream.imports import definition
from toolkeeper.upstream.lazy import LazyPool
from toolkeeper.upstream.link import resolve_refs
from toolkeeper.upstream.pool import UpstreamPool
from toolkeeper.upstream.servers import ServerConfig

log = logging.getLogger("toolkeeper.upstream")


@dataclass(slots=True)
class SyncReport:
    """What one listing did to the registry, by local tool name."""

    imported: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)


class UpstreamSync:
    """The pool of a gateway's upstream servers and the syncing of their listings."""

    def __init__(self, registry: RegistryService, store: Store, *,
                 catalog: Callable[[], Catalog], secrets: SecretsStore | None,
                 batch: Callable[[], AbstractContextManager[None]], resync_s: float,
                 closed: Callable[[], bool],
                 credentials: TenantCredentials | None = None,
                 on_fallback: Callable[[str, str], None] | None = None) -> None:
        self._registry = registry
        self._store = store
        self._catalog = catalog
        self._secrets = secrets
        self._batch = batch
        self._closed = closed
        self._on_fallback = on_fallback
        self._resync = Periodic("toolkeeper-mcp-resync", resync_s, self.servers,
                                what="periodic upstream MCP listing")
        self.tokens = UpstreamTokens(
            credentials=credentials, platform=secrets.get_secret if secrets else None)
        self.pool = LazyPool(self._make_pool, tokens=self.tokens)

    def _make_pool(self) -> UpstreamPool:
        def on_listing(cfg: ServerConfig, tools: list[Any]) -> None:
            if not self._closed():
                self.listing(cfg, tools)
                self.extras(cfg)

        async def resolve(values: Mapping[str, str]) -> Mapping[str, str]:
            return await resolve_refs(self._secrets, values)

        return UpstreamPool(lambda: self._catalog().mcp_servers, resolve=resolve,
                            on_listing=on_listing, bearer_for=lambda cfg: self.tokens.
                            server_bearer(cfg.name, cfg.oauth, cfg.tenant),
                            on_fallback=self._on_fallback)

    def servers(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        """Each server's ``SyncReport``, or the error that kept it from being listed (an
        unreachable server keeps its imported tools as they were)."""
        out: dict[str, Any] = {}
        for name, cfg in sorted(self._catalog().mcp_servers.items()):
            if names is not None and name not in names:
                continue
            try:
                tools = _tools_of(self.pool, name, cfg.connect_timeout_s + 15)
            except Exception as exc:
                log.warning("upstream MCP server %s not listed: %s", name, exc)
                out[name] = exc
                continue
            out[name] = self.listing(cfg, tools)
            self.extras(cfg)
        return out

    def extras(self, cfg: ServerConfig) -> SyncReport | None:
        """Sync the server's prompts and resources (``None``: they could not be listed)."""
        from toolkeeper.services.upstream_extras import sync_extras

        try:
            found = self.pool.list_extras(cfg.name, cfg.connect_timeout_s + 15)
        except Exception as exc:
            log.warning("upstream MCP server %s: prompts and resources not listed: %s",
                        cfg.name, str(exc)[:300])
            return None
        report = SyncReport()
        if found.get("prompts"):  # two prompts landing on one gateway name: as for tools
            found["prompts"] = unambiguous(cfg, found["prompts"])
        sync_extras(self, cfg, found, report)
        return report

    def tick(self) -> None:
        """List the servers again every ``mcp_resync_s``, on a thread of its own (the
        caller is the audit writer's housekeeping; a listing can take seconds)."""
        if self._catalog().mcp_servers:
            self._resync.tick()

    def listing(self, cfg: ServerConfig, tools: list[Any]) -> SyncReport:
        """Import new tools (published: their hash is pinned now), quarantine drifted ones."""
        report = SyncReport()
        wanted = unambiguous(cfg, [t for t in tools if cfg.include is None
                                   or t.name in cfg.include])
        with self._batch():
            for tool in wanted:
                self._sync_one(cfg, tool, report)
        if report.quarantined:
            log.warning("upstream %s changed tools %s: quarantined until re-published",
                        cfg.name, ", ".join(report.quarantined))
        return report

    def _sync_one(self, cfg: ServerConfig, tool: Any, report: SyncReport) -> None:
        self.sync_definition(cfg, definition(cfg, tool), report, upstream_tool=tool.name)

    def sync_definition(self, cfg: ServerConfig, new: ToolDefinition, report: SyncReport, *,
                        drifted: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
                        **about: Any) -> None:
        """Import ``new``, keep it, update it or quarantine it; ``drifted(pinned, fresh)``
        (implementations) decides what a changed ``upstream_hash`` means (default: drift)."""
        found = self._store.registry.tool(new.name, cfg.tenant)
        current = found[1] if found and found[1].tenant_id == cfg.tenant else None
        if current is not None and current.implementation_type != new.implementation_type:
            log.warning("upstream %s: %s is taken by another tool; not imported", cfg.name,
                        new.name)
            return
        if current is None:
            self._registry.save(new)
            self._registry.publish(new.name, cfg.tenant)
            report.imported.append(new.name)
            return
        pinned = current.implementation.get("upstream_hash")
        fresh = new.implementation["upstream_hash"]
        if current.status is ToolStatus.QUARANTINED:
            if content_hash(_as(new, current)) != content_hash(current):
                self._registry.save(_as(new, current))  # keep the newest for the admin to review
            report.quarantined.append(new.name)
            return
        if pinned == fresh or (drifted is not None and not drifted(current.implementation,
                                                                    new.implementation)):
            if pinned == fresh and _operator_unchanged(new, current):
                report.unchanged.append(new.name)
                return
            # the operator changed side effect, risk…: a new version, published as configured
            self._registry.save(_as(new, current, version=_next_patch(current.version),
                                 status=ToolStatus.DRAFT))
            self._registry.publish(new.name, cfg.tenant)
            report.updated.append(new.name)
            return
        self._registry.save(_as(new, current, version=_next_patch(current.version),
                             status=ToolStatus.QUARANTINED))
        self._store.audit.append([system_event(
            EventType.TOOL_QUARANTINED, cfg.tenant, tool=new.name, version=current.version,
            server=cfg.name, pinned_hash=pinned, upstream_hash=fresh, **about)])
        report.quarantined.append(new.name)


def unambiguous(cfg: ServerConfig, tools: list[Any]) -> list[Any]:
    """The tools whose gateway name is theirs alone: an upstream name the gateway's name
    rule changes (a dot, past 64 characters) may land on another's; the tool already named
    so keeps the name, the others are not imported (else each listing would read as drift
    of the one imported first)."""
    prefix = cfg.name if cfg.prefix is None else cfg.prefix
    by_name: dict[str, list[Any]] = {}
    for tool in tools:
        by_name.setdefault(cfg.local(tool.name), []).append(tool)
    kept = []
    for local, claims in by_name.items():
        exact = [t for t in claims if local == (f"{prefix}_{t.name}" if prefix else t.name)]
        if len(claims) > 1:
            log.warning("upstream %s: tools %s all map to %s; %s", cfg.name,
                        ", ".join(sorted(t.name for t in claims)), local,
                        f"kept {exact[0].name}" if len(exact) == 1 else "none imported")
        kept += claims if len(claims) == 1 else exact[:1] if len(exact) == 1 else []
    return kept


def _tools_of(pool: LazyPool, name: str, timeout_s: float) -> list[Any]:
    """The server's tools (none when it offers only prompts or resources)."""
    from mcp.shared.exceptions import MCPError

    try:
        return pool.list_tools(name, timeout_s)
    except MCPError as exc:
        if exc.code == -32601:  # method not found
            return []
        raise


def _operator_unchanged(new: ToolDefinition, current: ToolDefinition) -> bool:
    """Whether the operator's configuration of ``current`` is what ``new`` has: the same
    ``config_hash`` (a tenant's governance edit since is kept), or, for a tool imported
    before that hash was recorded, the same content."""
    recorded = current.implementation.get("config_hash")
    if recorded is not None:
        return bool(recorded == new.implementation["config_hash"])
    legacy = {k: v for k, v in new.implementation.items() if k != "config_hash"}
    return content_hash(_as(new.model_copy(update={"implementation": legacy}), current)) \
        == content_hash(current)


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
