"""What the console's tool dialog offers to pick from (``GET /tools/sources``): the
``functions:`` allow-list, the configured upstream MCP servers with the tools imported from
them, the installed artifacts and their versions, the tenant's retrieval pipelines and
agents. Names only: never a server's command, URL or credentials."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from toolkeeper.model.tool import ToolDefinition
from toolkeeper.providers.artifacts import ArtifactLibrary


def tool_sources(*, functions: Iterable[str], servers: Iterable[str],
                 tools: Iterable[ToolDefinition], artifacts: ArtifactLibrary,
                 pipelines: Iterable[str], agents: Iterable[str]) -> dict[str, Any]:
    """The pickers' contents, each list sorted."""
    imported: dict[str, set[str]] = {name: set() for name in servers}
    for tool in tools:
        impl: Mapping[str, Any] = tool.implementation
        server, upstream = impl.get("server"), impl.get("tool")
        if tool.implementation_type == "mcp" and server in imported and isinstance(upstream, str):
            imported[str(server)].add(upstream)
    versions: dict[str, set[str]] = {}
    for manifest in artifacts.manifests():
        versions.setdefault(manifest.id, set()).add(manifest.version)
    return {"functions": sorted(functions),
            "servers": [{"name": n, "tools": sorted(t)} for n, t in sorted(imported.items())],
            "artifacts": [{"id": a, "versions": sorted(v)} for a, v in sorted(versions.items())],
            "pipelines": sorted(pipelines), "agents": sorted(agents)}
