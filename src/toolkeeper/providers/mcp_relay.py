"""The ``mcp_prompt`` and ``mcp_resources`` providers: an upstream prompt's ``get`` and an
upstream server's resource ``read``, called inside the pipeline over the gateway's reused
connection (:mod:`toolkeeper.upstream.pool`), so they are activated, scoped, policy-checked,
rate-limited, audited and tenant-isolated like any tool (SPEC §7 MCP).

Both return :class:`~toolkeeper.model.call.McpContent`, which the outcome step masks and
caps block by block: a prompt's messages as their content blocks (``structured`` keeps the
description and the roles), a resource's contents as embedded-resource blocks (a blob
holding a secret or over the cap is replaced by a note). Errors as the ``mcp`` provider's:
no connection → ``upstream_error`` (retryable), the upstream's error → ``upstream_error``,
an answer of the wrong shape → ``invalid_output``; a URI this server does not list nor
match with a template → ``invalid_arguments`` (nothing is sent), as is one the upstream
answers as not found.
"""

from __future__ import annotations

from typing import Annotated, Any

from toolkeeper.bounds import Subset
from toolkeeper.errors import ToolError, UpstreamError
from toolkeeper.model.call import McpContent
from toolkeeper.model.reasons import Reason
from toolkeeper.providers.base import NoPreview, Provider, ToolContext, ToolPolicy
from toolkeeper.upstream.extras import PROMPT, claims

MAX_MESSAGES = 1000
MAX_CONTENTS = 1000
NOT_FOUND_CODES = (-32002, -32602)
"""An upstream's answers to a URI it does not know (2025-era ``-32002``, SEP-2164)."""


class McpPromptProvider(NoPreview):
    policy_model: type[ToolPolicy] = ToolPolicy

    def __init__(self, implementation: dict[str, Any]) -> None:
        self.server = str(implementation.get("server", ""))
        self.prompt = str(implementation.get("prompt", ""))
        if not self.server or not self.prompt:
            raise ToolError("config_invalid", "an mcp_prompt names its `server` and `prompt`")

    async def execute(self, action: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        import mcp_types as types
        from pydantic import ValidationError

        from toolkeeper.providers.mcp import rounds

        params = {"name": self.prompt, "arguments": {k: str(v) for k, v in arguments.items()}}
        answer = await rounds(self.server, lambda extra: relay(  # it may ask (SEP-2322)
            ctx, self.server, "prompts/get", {**params, **(extra or {})}))
        try:
            result = types.GetPromptResult.model_validate(answer)
        except ValidationError as exc:
            raise ToolError(Reason.INVALID_OUTPUT, f"{self.server}: the answer is not a prompt "
                            f"({exc.error_count()} errors)") from None
        messages = result.messages[:MAX_MESSAGES]
        blocks = [m.content.model_dump(mode="json", by_alias=True, exclude_none=True)
                  for m in messages]
        structured: dict[str, Any] = {"roles": [m.role for m in messages]}
        if result.description is not None:
            structured["description"] = result.description
        return McpContent(content=blocks, structured=structured)


class ResourcesPolicy(ToolPolicy):
    """What a profile lets its agents read of a server's resources."""

    uri_prefixes: Annotated[tuple[str, ...] | None, Subset(open="none")] = None
    """Only URIs starting with one of these may be read (``None``: every URI the server
    lists or matches with a template); others are denied ``path_not_allowed`` — which an
    MCP client reads as ``Resource not found``."""


class McpResourcesProvider(NoPreview):
    policy_model: type[ToolPolicy] = ResourcesPolicy

    def __init__(self, implementation: dict[str, Any]) -> None:
        self.server = str(implementation.get("server", ""))
        self.implementation = implementation
        if not self.server:
            raise ToolError("config_invalid", "an mcp_resources entry names its `server`")

    async def execute(self, action: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        import mcp_types as types
        from pydantic import ValidationError

        uri = str(arguments.get("uri", ""))
        prefixes = getattr(ctx.policy, "uri_prefixes", None)
        if prefixes is not None and not uri.startswith(tuple(prefixes)):
            ctx.deny(Reason.PATH_NOT_ALLOWED, "the policy does not let this URI be read")
        if not claims(self.implementation, uri):
            raise ToolError(Reason.INVALID_ARGUMENTS, f"{self.server} lists no resource and "
                            "no template matching this URI")
        try:
            answer = await relay(ctx, self.server, "resources/read", {"uri": uri})
        except UpstreamError as exc:
            if exc.details.get("code") in NOT_FOUND_CODES:  # the upstream has no such URI
                raise ToolError(Reason.INVALID_ARGUMENTS, f"{self.server}: no resource at "
                                "this URI") from None
            raise
        try:
            result = types.ReadResourceResult.model_validate(answer)
        except ValidationError as exc:
            raise ToolError(Reason.INVALID_OUTPUT, f"{self.server}: the answer is not a "
                            f"resource ({exc.error_count()} errors)") from None
        blocks = [{"type": "resource",
                   "resource": c.model_dump(mode="json", by_alias=True, exclude_none=True)}
                  for c in result.contents[:MAX_CONTENTS]]
        return McpContent(content=blocks, structured=None)


def relayed_provider(kind: str, implementation: dict[str, Any]) -> Provider:
    if kind == PROMPT:
        return McpPromptProvider(implementation)
    return McpResourcesProvider(implementation)


async def relay(ctx: ToolContext, server: str, method: str,
                params: dict[str, Any]) -> dict[str, Any]:
    """One upstream request with the pipeline's error semantics (reads: nothing to undo)."""
    from mcp.shared.exceptions import MCPError

    from toolkeeper.upstream.errors import TokenRejected, UpstreamUnavailable

    pool = ctx.upstreams
    if pool is None:
        raise UpstreamError("no upstream MCP connections in this gateway", retryable=False)
    try:
        answer: dict[str, Any] = await pool.request(server, method, params,
                                                    timeout_s=ctx.timeout_s)
        return answer
    except TokenRejected as exc:
        raise ToolError(Reason.UPSTREAM_UNAUTHORIZED, str(exc)) from None
    except UpstreamUnavailable as exc:
        raise UpstreamError(str(exc), retryable=True) from None
    except MCPError as exc:
        lost = exc.code in (-32000, -32001)
        raise UpstreamError(f"{server}: {exc.message}"[:1000], retryable=lost,
                            code=exc.code) from None
    except (ConnectionError, OSError, EOFError) as exc:
        raise UpstreamError(f"{server}: connection lost: {exc}", retryable=True) from None
