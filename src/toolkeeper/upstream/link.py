"""The stored upstream MCP server configs (every replica reads them) and the secret
references of their headers and environment, resolved at connect time (the pool and the
syncing of listings: ``toolkeeper.services.upstreams``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from toolkeeper.secrets.base import SECRET_REF_RE, SecretNotFound
from toolkeeper.upstream.servers import ServerConfig

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


async def resolve_refs(secrets: Any, values: Mapping[str, str]) -> dict[str, str]:
    """``${secret:connector/key}`` references in header/env values, resolved now."""
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


def base_env() -> dict[str, str]:
    """What a stdio server inherits: the SDK's safe defaults, never the gateway's secrets."""
    keep = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TZ",
            "SYSTEMROOT", "TMPDIR")
    return {k: v for k, v in os.environ.items() if k in keep}
