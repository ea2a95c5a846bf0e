"""The agent's side of a relayed call: progress, log level, client capabilities, trace
context (issue 28; SPEC §7 MCP).

:func:`downstream_for` makes the :class:`~toolkeeper.upstream.downstream.Downstream` the MCP
face sets around its pipeline call, from the agent's request:

- **progress**: only when the request carried a ``progressToken``; the upstream's
  ``notifications/progress`` (for the token of the gateway's own it sent upstream) are
  reported against the agent's token, on the agent's request stream.
- **log level**: 2026-07-28 — the request's ``_meta`` ``io.modelcontextprotocol/logLevel``;
  2025-11-25 — what ``logging/setLevel`` set on this session (:class:`LogLevels`). No level,
  no messages, in both eras: an upstream's ``notifications/message`` is relayed at or above
  the level only.
- **client capabilities**: as the agent declared them (2026 ``_meta``, 2025 ``initialize``),
  forwarded upstream in 2026-07-28 requests; an upstream's ``-32021`` is answered to the agent
  as ``-32021`` with the upstream's ``data.requiredCapabilities`` (:func:`refuse_missing`).
- **trace context**: ``traceparent``/``tracestate`` from ``_meta``, continued in the call's
  ``execute_tool`` span and forwarded upstream.

Callbacks may be called from another event loop (the upstream pool's, for servers that need
the SDK's client): they hop to the agent's loop.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolkeeper.upstream.downstream import Downstream
from toolkeeper.upstream.notes import LEVELS, LOG_LEVEL_KEY, at_least

Ctx = ServerRequestContext[Any, Any]
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
"""W3C trace context ``traceparent`` (version-traceid-parentid-flags)."""
MAX_TRACESTATE = 512


class LogLevels:
    """``logging/setLevel`` (2025-11-25): the level of each session, for its lifetime."""

    def __init__(self) -> None:
        self._by_conn: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    def of(self, conn: Any) -> str | None:
        return self._by_conn.get(conn) if conn is not None else None

    async def set_level(self, ctx: Ctx, params: types.SetLevelRequestParams
                        ) -> types.EmptyResult:
        conn = getattr(ctx.session, "_connection", None)  # the session's, as notify.py
        if conn is not None:
            self._by_conn[conn] = params.level
        return types.EmptyResult()


def _meta(ctx: Ctx) -> dict[str, Any]:
    meta = ctx.meta
    return dict(meta) if isinstance(meta, dict) else {}


def _on_home(home: asyncio.AbstractEventLoop, send: Callable[..., Coroutine[Any, Any, None]]
             ) -> Callable[..., Awaitable[None]]:
    async def hop(*args: Any) -> None:
        if asyncio.get_running_loop() is home:
            await send(*args)
        else:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(send(*args), home))
    return hop


def trace_context(meta: dict[str, Any]) -> tuple[str | None, str | None]:
    """A well-formed ``traceparent`` (else ``None``) and its ``tracestate``, from ``_meta``."""
    parent = meta.get("traceparent")
    if not isinstance(parent, str) or not TRACEPARENT.match(parent) \
            or parent.startswith("ff") or set(parent[3:35]) == {"0"}:
        return None, None
    state = meta.get("tracestate")
    return parent, state if isinstance(state, str) and len(state) <= MAX_TRACESTATE else None


def downstream_for(ctx: Ctx, levels: LogLevels) -> Downstream:
    """The agent's side of this ``tools/call`` (or prompt/resource request)."""
    meta = _meta(ctx)
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    try:
        have = ctx.session.client_capabilities
    except Exception:  # none known
        have = None
    caps = have.model_dump(mode="json", by_alias=True, exclude_none=True) if have else {}
    if modern:
        level = meta.get(LOG_LEVEL_KEY)
    else:
        level = levels.of(getattr(ctx.session, "_connection", None))
    level = level if level in LEVELS else None
    home = asyncio.get_running_loop()
    session = ctx.session
    token = meta.get("progress_token", meta.get("progressToken"))
    progress = None
    if token is not None:
        async def report(value: float, total: float | None, message: str | None) -> None:
            await session.report_progress(value, total, message)
        progress = _on_home(home, report)
    log = None
    if level is not None:
        async def message(at: str, data: Any, logger: str | None) -> None:
            if at_least(at, level):
                await session.send_log_message(at, data, logger,  # type: ignore[arg-type]
                                               related_request_id=ctx.request_id)
        log = _on_home(home, message)
    parent, state = trace_context(meta)
    return Downstream(client_capabilities=caps, log_level=level, progress=progress, log=log,
                      traceparent=parent, tracestate=state)


@contextmanager
def continued(ds: Downstream) -> Iterator[None]:
    """Within: the agent's trace context is OpenTelemetry's current one, so the call's
    ``execute_tool`` span (recorded by the gateway as the call ends) is its child."""
    if ds.traceparent is None:
        yield
        return
    from opentelemetry import context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"traceparent": ds.traceparent, **(
        {"tracestate": ds.tracestate} if ds.tracestate else {})}
    token = context.attach(TraceContextTextMapPropagator().extract(carrier))
    try:
        yield
    finally:
        context.detach(token)


def caller(gw: Any) -> Any:
    """The principal of the HTTP request the SDK is handling (its auth context, which the
    ``/mcp`` endpoint set from the verified bearer token), or ``None``."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    return gw.cached_principal(token.token) if token is not None else None


def refuse_missing(ds: Downstream) -> None:
    """The upstream answered ``-32021``: so does the gateway (HTTP 400 in 2026-07-28)."""
    if "requiredCapabilities" in ds.refused:
        wanted = ds.refused["requiredCapabilities"]
        raise MCPError(code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                       message="the tool needs a client capability this client did not "
                               f"declare: {', '.join(sorted(wanted)) or 'unnamed'}",
                       data={"requiredCapabilities": wanted})


__all__ = ["LogLevels", "caller", "continued", "downstream_for", "refuse_missing", "trace_context"]
