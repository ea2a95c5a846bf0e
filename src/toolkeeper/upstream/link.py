"""How a gateway reaches its upstream MCP servers: the stored server configs, the pool
(with secrets resolved at connect time), and syncing listings into the registry."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolkeeper.upstream.pool import UpstreamPool
from toolkeeper.upstream.servers import ServerConfig

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway

log = logging.getLogger("toolkeeper.upstream")
SERVERS_SETTING = "mcp:servers"
"""Where the configured upstream MCP servers are kept (every replica reads them)."""


def servers_from(value: Any) -> dict[str, ServerConfig]:
    """The stored server configs by name; an invalid one is left out (fail closed)."""
    out: dict[str, ServerConfig] = {}
    for raw in value or ():
        try:
            cfg = ServerConfig.model_validate(raw)
        except Exception:
            log.exception("stored upstream MCP server config is invalid: %r", raw)
            continue
        out[cfg.name] = cfg
    return out


def make_pool(gw: Gateway) -> UpstreamPool:
    from toolkeeper.upstream.imports import sync_listing

    def on_listing(cfg: ServerConfig, tools: list[Any]) -> None:
        if not gw.closed:
            sync_listing(gw, cfg, tools)

    async def resolve(values: Mapping[str, str]) -> Mapping[str, str]:
        return await resolve_refs(gw.runtime.secrets, values)

    return UpstreamPool(lambda: gw.catalog.mcp_servers, resolve=resolve,
                        on_listing=on_listing)


async def resolve_refs(secrets: Any, values: Mapping[str, str]) -> dict[str, str]:
    """``${secret:connector/key}`` references in header/env values, resolved now."""
    from toolkeeper.secrets.base import SECRET_REF_RE, SecretNotFound

    out: dict[str, str] = {}
    for name, value in values.items():
        parts, last = [], 0
        for m in SECRET_REF_RE.finditer(value):
            if secrets is None:
                raise SecretNotFound(m.group(1), m.group(2))
            parts += [value[last:m.start()], await secrets.get_secret(m.group(1), m.group(2))]
            last = m.end()
        out[name] = "".join(parts) + value[last:]
    return out


def sync_servers(gw: Gateway, names: Sequence[str] | None = None) -> dict[str, Any]:
    """Each server's ``SyncReport``, or the error that kept it from being listed (an
    unreachable server keeps its imported tools as they were)."""
    from toolkeeper.upstream.imports import sync_listing

    out: dict[str, Any] = {}
    for name, cfg in sorted(gw.catalog.mcp_servers.items()):
        if names is not None and name not in names:
            continue
        try:
            tools = gw.upstreams.list_tools(name, cfg.connect_timeout_s + 15)
        except Exception as exc:
            log.warning("upstream MCP server %s not listed: %s", name, exc)
            out[name] = exc
            continue
        out[name] = sync_listing(gw, cfg, tools)
    return out


class Resync:
    """Lists a gateway's upstream servers again every ``mcp_resync_s``, on a thread of its
    own (the caller is the audit writer's housekeeping; a listing can take seconds)."""

    def __init__(self, gw: Gateway) -> None:
        self._gw = gw
        self._next = time.monotonic() + gw.settings.mcp_resync_s
        self._running = threading.Lock()

    def tick(self) -> None:
        if not self._gw.catalog.mcp_servers or time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._gw.settings.mcp_resync_s
        if self._running.locked():
            return
        threading.Thread(target=self._run, name="toolkeeper-mcp-resync", daemon=True).start()

    def _run(self) -> None:
        with self._running:
            try:
                sync_servers(self._gw)
            except Exception:
                log.exception("periodic upstream MCP listing failed")
