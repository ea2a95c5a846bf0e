"""The ``mcp`` provider: a tool of an upstream MCP server, called over the gateway's reused
connection (:mod:`toolkeeper.upstream.pool`).

Implementation config: ``{"server": name, "tool": upstream name, "upstream_hash": pin}``.

Outcome mapping: structured content (else the text, else the content blocks) → output; an
``isError`` result → ``tool_error`` with the upstream's text; the server's protocol error →
``upstream_error`` (it answered: nothing ran); no connection → ``upstream_error``,
retryable, nothing sent; a timeout or a connection lost mid-call → ``upstream_error`` that
may have executed (the pipeline records ``unknown`` for irreversible tools).
"""

from __future__ import annotations

from typing import Any

from toolkeeper.errors import ToolError, UpstreamError
from toolkeeper.providers.base import NoPreview, ToolContext, ToolPolicy


class McpProvider(NoPreview):
    policy_model: type[ToolPolicy] = ToolPolicy

    def __init__(self, implementation: dict[str, Any]) -> None:
        self.server = str(implementation.get("server", ""))
        self.tool = str(implementation.get("tool", ""))
        if not self.server or not self.tool:
            raise ToolError("config_invalid", "an mcp tool names its `server` and `tool`")

    async def execute(self, action: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        return await call_upstream(ctx, self.server, self.tool, arguments)


async def call_upstream(ctx: ToolContext, server: str, tool: str,
                        arguments: dict[str, Any]) -> Any:
    """One upstream ``tools/call`` with the pipeline's error semantics."""
    from mcp.shared.exceptions import MCPError

    from toolkeeper.upstream.errors import UpstreamUnavailable

    pool = ctx.upstreams
    if pool is None:
        raise UpstreamError("no upstream MCP connections in this gateway", retryable=False)
    try:
        result = await pool.call(server, tool, arguments, timeout_s=ctx.timeout_s)
    except UpstreamUnavailable as exc:
        raise UpstreamError(str(exc), retryable=True) from None
    except MCPError as exc:
        # -32001 timed out, -32000 connection lost: the call may have run upstream
        lost = exc.code in (-32000, -32001)
        raise UpstreamError(f"{server}: {exc.message}", retryable=lost,
                            may_have_executed=lost, code=exc.code) from None
    except (ConnectionError, OSError, EOFError) as exc:
        raise UpstreamError(f"{server}: connection lost: {exc}", retryable=True,
                            may_have_executed=True) from None
    return output_of(server, result)


def output_of(server: str, result: Any) -> Any:
    """The tool's output from a ``CallToolResult`` (the SDK's model or the wire dict)."""
    if not isinstance(result, dict):
        result = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    blocks = result.get("content") or []
    texts = [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    if result.get("isError"):
        raise ToolError("tool_error", f"{server}: " + (" ".join(texts)[:1000] or "failed"))
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    if len(texts) == len(blocks):
        return texts[0] if len(texts) == 1 else texts
    return blocks
