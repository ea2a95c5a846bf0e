"""The ``mcp`` provider: a tool of an upstream MCP server, called over the gateway's reused
connection (:mod:`toolkeeper.upstream.pool`).

Implementation config: ``{"server": name, "tool": upstream name, "upstream_hash": pin}``.

Outcome mapping: a result → :class:`~toolkeeper.model.call.McpContent`, the upstream's own
content blocks and ``structuredContent`` (the outcome step redacts and caps them, and the MCP
face passes them on as sent); an ``isError`` result → ``tool_error`` with the upstream's
text (SPEC §7: a failed call is ``isError`` with toolkeeper's one line); a result that is not
a ``CallToolResult`` → ``invalid_output``; the server's protocol error →
``upstream_error`` (it answered: nothing ran); no connection → ``upstream_error``,
retryable, nothing sent; a timeout or a connection lost mid-call → ``upstream_error`` that
may have executed (the pipeline records ``unknown`` for irreversible tools). An OAuth
server (``oauth:``) that refuses the renewed token, or whose authorization server refuses one
→ ``upstream_unauthorized``; one that cannot be asked → ``upstream_token_unavailable``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from toolkeeper.errors import ToolError, UpstreamError
from toolkeeper.model.call import McpContent
from toolkeeper.model.reasons import Reason
from toolkeeper.providers.base import NoPreview, ToolContext, ToolPolicy


class McpProvider(NoPreview):
    policy_model: type[ToolPolicy] = ToolPolicy

    def __init__(self, implementation: dict[str, Any]) -> None:
        self.server = str(implementation.get("server", ""))
        self.tool = str(implementation.get("tool", ""))
        self.param_headers = {tuple(p): str(t) for p, t in implementation.get(
            "param_headers", ()) if isinstance(p, list)}
        if not self.server or not self.tool:
            raise ToolError("config_invalid", "an mcp tool names its `server` and `tool`")

    async def execute(self, action: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        if not self.param_headers:
            return await call_upstream(ctx, self.server, self.tool, arguments)
        from mcp.shared.inbound import mcp_param_headers

        return await call_upstream(ctx, self.server, self.tool, arguments,
                                   mcp_param_headers(self.param_headers, arguments))


async def call_upstream(ctx: ToolContext, server: str, tool: str, arguments: dict[str, Any],
                        param_headers: dict[str, str] | None = None) -> McpContent:
    """One upstream ``tools/call`` with the pipeline's error semantics."""
    from mcp.shared.exceptions import MCPError

    from toolkeeper.upstream.downstream import current
    from toolkeeper.upstream.errors import TokenRejected, UpstreamUnavailable
    from toolkeeper.upstream.notes import refused

    pool = ctx.upstreams
    if pool is None:
        raise UpstreamError("no upstream MCP connections in this gateway", retryable=False)
    try:
        bearer = await _bearer(ctx, pool, server)
        try:
            auth = {"bearer": bearer} if bearer is not None else {}
            if param_headers:  # the tool's x-mcp-header arguments, as Mcp-Param-*
                auth = {**auth, "param_headers": param_headers}

            async def send(extra: dict[str, Any] | None) -> Any:
                return await pool.call(server, tool, arguments, timeout_s=ctx.timeout_s,
                                       **auth, **({"extra": extra} if extra else {}))
            result = await rounds(server, send)
        finally:
            _mark_held(ctx, pool, server)
    except TokenRejected as exc:
        raise ToolError(Reason.UPSTREAM_UNAUTHORIZED, str(exc)) from None
    except UpstreamUnavailable as exc:
        raise UpstreamError(str(exc), retryable=True) from None
    except MCPError as exc:
        refused(current(), exc.code, exc.data)  # -32021: the MCP face answers it as such
        # -32001 timed out, -32000 connection lost: the call may have run upstream
        lost = exc.code in (-32000, -32001)
        raise UpstreamError(f"{server}: {exc.message}", retryable=lost,
                            may_have_executed=lost, code=exc.code) from None
    except (ConnectionError, OSError, EOFError) as exc:
        raise UpstreamError(f"{server}: connection lost: {exc}", retryable=True,
                            may_have_executed=True) from None
    return output_of(server, result)


async def rounds(server: str, send: Callable[[dict[str, Any] | None], Awaitable[Any]]
                 ) -> Any:
    """The upstream's answer to ``send`` (a request, with ``extra``: a retry's
    ``inputResponses``/``requestState``), its questions answered in-band on the way when
    the agent can be asked (:mod:`toolkeeper.upstream.asking`); an ``InputRequiredResult``
    the agent must answer itself stops the call with ``input_required`` (the MCP face
    relays it)."""
    from toolkeeper.upstream import asking

    ds = asking.downstream()
    extra = ds.resume if ds is not None else None
    for _ in range(asking.MAX_ROUNDS):
        result = await send(extra)
        if not asking.input_required(result):
            return result
        try:
            requests, state = asking.questions(result)
        except ValueError as exc:
            raise ToolError(Reason.INVALID_OUTPUT, f"{server}: {exc}") from None
        answers = await ds.ask(requests, state, False) if ds is not None and ds.ask else None
        if answers is None:
            raise ToolError(Reason.INPUT_REQUIRED, f"{server}: the upstream asks the agent "
                            "for input", retryable=False)
        extra = {"inputResponses": answers, **({"requestState": state} if state else {})}
    raise ToolError(Reason.UPSTREAM_ERROR, f"{server}: still asking for input after "
                    f"{asking.MAX_ROUNDS} rounds", retryable=False)


async def _bearer(ctx: ToolContext, pool: Any, server: str) -> Any:
    """This call's own token source for an OAuth server with token exchange (``None``: the
    connection's token serves). Either way the tokens it uses are redacted from the call's
    output; the calling agent's own token goes only to the authorization server."""
    from toolkeeper.identity.upstream import CALL_SHARE
    from toolkeeper.identity.upstream_subject import subject_for

    tokens: Any = getattr(pool, "tokens", None)
    config: Any = getattr(pool, "config", None)
    if tokens is None or config is None:
        return None
    cfg = config(server)
    oauth = cfg.oauth
    if oauth is None:
        return None
    if oauth.grant == "token_exchange":
        bearer = tokens.bearer(oauth, tenant_id=ctx.tenant_id, upstream=server,
                               subject=subject_for(ctx.tenant_id, ctx.agent),
                               on_token=ctx.mark_secret,
                               within_s=ctx.timeout_s * CALL_SHARE)
        await bearer.current()  # a refused exchange stops the call here, nothing sent
        return bearer
    connection = tokens.server_bearer(server, oauth, cfg.tenant)
    ctx.mark_secret(await connection.within(ctx.timeout_s * CALL_SHARE).current())
    return None


def _mark_held(ctx: ToolContext, pool: Any, server: str) -> None:
    """The connection's token after the call: one it renewed during the call (a 401) is
    this call's secret too, like the one the call started with."""
    from toolkeeper.upstream.errors import UpstreamUnavailable

    tokens: Any = getattr(pool, "tokens", None)
    config: Any = getattr(pool, "config", None)
    if tokens is None or config is None:
        return
    try:
        cfg = config(server)
    except UpstreamUnavailable:
        return
    if cfg.oauth is not None:
        held = tokens.server_bearer(server, cfg.oauth, cfg.tenant).held()
        if held is not None:
            ctx.mark_secret(held)


_PLAIN_KEYS = frozenset({"content", "isError", "structuredContent", "_meta", "resultType"})
_TEXT_BLOCK = frozenset({"type", "text"})


def text_block(block: Any) -> bool:
    """Whether ``block`` is a content block of text and nothing else."""
    return (block.__class__ is dict and block.keys() == _TEXT_BLOCK
            and block["type"] == "text" and block["text"].__class__ is str)


def plain_result(result: dict[str, Any]) -> bool:
    """Whether ``result`` has the plainest ``CallToolResult`` shape — text blocks only,
    ``isError`` a bool, ``structuredContent``/``_meta`` objects, nothing else — which the
    SDK's model accepts; anything else is checked by the model itself."""
    content = result.get("content")
    if content.__class__ is not list or not result.keys() <= _PLAIN_KEYS:
        return False
    return all(text_block(b) for b in content) and (result.get("isError", False).__class__ is bool
            and result.get("structuredContent").__class__ in (dict, type(None))
            and result.get("_meta", {}).__class__ is dict
            and result.get("resultType", "").__class__ is str)


def output_of(server: str, result: Any) -> McpContent:
    """The upstream's blocks and structured content from a ``CallToolResult`` (the SDK's
    model, or the lean client's wire dict, checked here against the SDK's types)."""
    import mcp_types as types
    from pydantic import ValidationError

    if not isinstance(result, dict):
        result = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    elif not plain_result(result):  # the plainest shape needs no model (~1 µs, not ~25)
        try:
            types.CallToolResult.model_validate(result)
        except ValidationError as exc:
            raise ToolError(Reason.INVALID_OUTPUT, f"{server}: the answer is not a tool result "
                            f"({exc.error_count()} errors)") from None
    blocks: list[dict[str, Any]] = result.get("content") or []
    if result.get("isError"):
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
        raise ToolError(Reason.TOOL_ERROR, f"{server}: " + (" ".join(texts)[:1000] or "failed"))
    return McpContent(content=blocks, structured=result.get("structuredContent"))
