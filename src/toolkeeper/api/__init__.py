"""The REST face: a FastAPI app over one Gateway (SPEC §7 REST)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI

from toolkeeper.api.docs import description
from toolkeeper.api.docs import install as install_docs
from toolkeeper.api.errors import HANDLERS
from toolkeeper.api.limits import BodyGuard, DepthGuard, UnicodeGuard
from toolkeeper.api.routes import (
    approvals,
    audit,
    calls,
    discovery,
    execute,
    graph,
    identities,
    oauth_metadata,
    ops,
    retrieval,
    stats,
    tools,
)
from toolkeeper.gateway import Gateway
from toolkeeper.model.wire import VERSION_HEADER
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.version import __version__


@dataclass(slots=True, kw_only=True)
class ApiSettings:
    """What the REST face needs beyond the gateway."""

    max_body_bytes: int = 2_000_000
    cors_origins: list[str] = field(default_factory=list)
    """Closed by default (SPEC §8)."""
    ui: bool = True
    """Serve the admin web UI at ``/ui/``."""
    mcp: bool = True
    """Serve MCP over streamable HTTP at ``/mcp``."""
    mcp_fast_path: bool = True
    """Answer plain stateless ``tools/list`` / ``tools/call`` without the SDK's server
    (:mod:`toolkeeper.mcp.lean`); ``False`` sends every request through the SDK."""
    mcp_max_sessions: int = 10_000
    """Open MCP sessions per process; past it new ones get 503 + ``Retry-After``."""
    rest_fast_path: bool = True
    """Answer the plainest ``POST /tools/execute`` without FastAPI's routing and
    dependency layers (:mod:`toolkeeper.api.lean_execute`); ``False``: always the route."""
    mcp_allowed_hosts: tuple[str, ...] | None = None
    """``Host`` values ``/mcp`` accepts (``name:*`` for any port), refusing others with 421
    against DNS rebinding; browsers' ``Origin`` must then be one of these hosts or a CORS
    origin (403). ``None``: no check (a server reachable under names it cannot know)."""


def create_app(gw: Gateway, settings: ApiSettings | None = None) -> FastAPI:
    """The REST app over ``gw`` (the caller owns the gateway and closes it)."""
    settings = settings or ApiSettings()
    runtime = gw.settings if gw is not None else Settings()  # the document needs no store
    app = _App(title="toolkeeper", version=__version__, description=description(runtime),
                  docs_url=None, redoc_url=None, swagger_ui_oauth2_redirect_url=None)
    install_docs(app, runtime)
    app.state.gateway = gw
    for exc_type, handler in HANDLERS.items():
        app.add_exception_handler(exc_type, handler)
    # tools first: its fixed paths (/tools/health, /tools/builtins/…) precede /tools/{id};
    # built here, once per app (api/route_table.py)
    for module in (tools, execute, calls, approvals, audit, discovery, identities, ops,
                   retrieval, oauth_metadata, stats, graph):
        module.router.install(app.router)
    from toolkeeper.api.routes import sso

    app.state.sso = sso.sso_for(gw)
    app.include_router(sso.router)
    app.state.ui = settings.ui
    if settings.ui:
        from toolkeeper import ui

        app.include_router(ui.router)
    if settings.mcp:
        _mount_mcp(app, gw, settings)
    if settings.rest_fast_path and gw is not None:
        from toolkeeper.api.lean_execute import ExecuteShortcut

        app.add_middleware(ExecuteShortcut, gw=gw)
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins,
                           allow_methods=["*"], allow_headers=["*"])
    app.add_middleware(UnicodeGuard, skip=("/mcp", "/tools/execute", "/tools/execute-batch"))
    app.add_middleware(DepthGuard, skip=("/mcp",))
    app.add_middleware(BodyGuard, max_bytes=settings.max_body_bytes, skip=("/mcp",))
    app.add_middleware(VersionHeader)  # outermost: every answer, the shortcuts' included
    return app


class VersionHeader:
    """Every HTTP answer names the server's version in ``X-Toolkeeper-Version``
    (``model/wire.py``): the client compares it with the oldest server it speaks with, at
    no extra request (docs/guides/client.md)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def stamped(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), _VERSION]
            await send(message)

        await self.app(scope, receive, stamped)


_VERSION = (VERSION_HEADER.lower().encode(), __version__.encode())


class _App(FastAPI):
    """FastAPI, with one path answered ahead of its whole stack (``front``: the path and
    its app), as :class:`McpShortcut` would inside it. Set only when nothing in that stack
    applies to the path: then FastAPI's per-request telemetry check, Starlette's error
    middleware and the REST guards (which skip it) cost it ~9 ASGI layers for nothing."""

    front: tuple[str, Any] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        front = self.front
        if front is not None and scope["type"] == "http" and scope["path"] == front[0]:
            await front[1](scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


class McpShortcut:
    """``/mcp`` straight to its endpoint: JSON-RPC has its own errors and limits, and the
    REST stack (routing across every endpoint, body guard, exception translation) would
    only add latency to the hottest path of an MCP client. Without CORS (whose middleware
    must see ``/mcp``), ahead of the whole stack instead (:class:`_App`)."""

    def __init__(self, app: Any, *, endpoint: Any, path: str) -> None:
        self.app, self.endpoint, self.path = app, endpoint, path

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == self.path:
            await self.endpoint(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def _mount_mcp(app: _App, gw: Gateway, settings: ApiSettings) -> None:
    """``/mcp`` and the lifespan its machinery runs in (MCP answers its own errors)."""
    from starlette.routing import Route

    from toolkeeper.mcp.http import PATH, McpEndpoint

    origins = None
    if settings.mcp_allowed_hosts is not None:
        origins = [f"{scheme}://{h}" for h in settings.mcp_allowed_hosts
                   for scheme in ("http", "https")] + list(settings.cors_origins)
    endpoint = McpEndpoint(gw, max_body_bytes=settings.max_body_bytes,
                           allowed_hosts=settings.mcp_allowed_hosts, allowed_origins=origins,
                           fast_path=settings.mcp_fast_path,
                           max_sessions=settings.mcp_max_sessions)
    # a route for completeness (mounted apps, tests); requests normally never reach the
    # router: the app's front (or McpShortcut, with CORS) hands them to the endpoint first
    app.router.routes.insert(0, Route(PATH, endpoint=endpoint, include_in_schema=False))
    if settings.cors_origins:
        app.add_middleware(McpShortcut, endpoint=endpoint, path=PATH)
    else:  # an unhandled error still answers 500 (uvicorn's, as Starlette's would)
        app.front = (PATH, VersionHeader(endpoint))
    app.state.mcp = endpoint
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with outer(a) as state, endpoint.lifespan():
            yield state

    app.router.lifespan_context = lifespan


__all__ = ["ApiSettings", "create_app"]
