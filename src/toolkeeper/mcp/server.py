"""toolkeeper as an MCP server (SPEC §7 MCP) on the official SDK's low-level ``Server``.

One :class:`McpFace` per gateway serves both protocol eras — 2025-11-25 (``initialize``,
sessions) and 2026-07-28 (stateless, ``server/discover``) — over streamable HTTP
(:mod:`toolkeeper.mcp.http`) or stdio (:func:`serve_stdio`). The caller is an agent: the
bearer token's on HTTP, the one named on the command line on stdio. ``tools/list`` is what
that agent may call; ``tools/call`` runs the same pipeline as every other face.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError

from toolkeeper.identity.upstream_subject import carry
from toolkeeper.mcp.input_required import CONFIRM_SCHEMA, Rounds
from toolkeeper.mcp.notify import ChangeNotifier
from toolkeeper.mcp.protocol import LogLevels, caller, continued, downstream_for
from toolkeeper.mcp.relay import Relay
from toolkeeper.mcp.task_wire import advertise, declared
from toolkeeper.mcp.tasks import Tasks
from toolkeeper.mcp.views import Listings, key_of, read, resources, templates
from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.upstream.downstream import DOWNSTREAM
from toolkeeper.version import __version__

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway

log = logging.getLogger("toolkeeper.mcp")
Ctx = ServerRequestContext[Any, Any]
R = TypeVar("R")

META_PREFIX = "toolkeeper/"
"""``_meta`` keys a client may set on ``tools/call``: ``toolkeeper/idempotency_key``, …"""
CALL_META = ("idempotency_key", "turn_group_id", "task_id", "step_id", "trace_id",
             "approval_id", "preview_token")
ELICIT_CAPABILITY = types.ClientCapabilities(elicitation=types.ElicitationCapability())


class GatewayServer(Server[Any]):
    """Advertises ``listChanged`` in the 2025-11-25 era: the SDK's HTTP manager asks for
    initialization options without notification options, which would say ``false``."""

    def create_initialization_options(
            self, notification_options: NotificationOptions | None = None,
            experimental_capabilities: dict[str, dict[str, Any]] | None = None,
            extensions: Any = None) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(
                tools_changed=True, resources_changed=True, prompts_changed=True),
            experimental_capabilities, extensions)

    def get_capabilities(self, *args: Any, protocol_version: str | None = None,
                         **kwargs: Any) -> types.ServerCapabilities:
        caps = super().get_capabilities(*args, protocol_version=protocol_version, **kwargs)
        return advertise(caps, protocol_version)  # the tasks extension: 2026-07-28


class McpFace:
    """The MCP server of one gateway. ``principal`` fixes the caller (stdio); otherwise each
    HTTP request's bearer token names it."""

    def __init__(self, gw: Gateway, *, principal: Principal | None = None,
                 confirm_timeout_s: float = 300.0) -> None:
        self.gw = gw
        self.fixed = principal
        self.confirm_timeout_s = confirm_timeout_s
        self.listings = Listings(gw)
        self.notifier = ChangeNotifier(self.listings)
        self.relay = Relay(gw)
        self.relay.bus = self.notifier.bus
        self.notifier.extras = self.relay.fingerprints
        self.levels = LogLevels()  # logging/setLevel per 2025-11-25 session (mcp/protocol.py)
        self.server = GatewayServer(
            "toolkeeper", version=__version__,
            instructions="Governed tools: every call is checked, gated, audited and run "
                         "once. A stopped call says why and what to do next.",
            on_list_tools=self._guard(self._list_tools),
            on_call_tool=self._guard(self._call_tool),
            on_list_resources=self._guard(self._list_resources),
            on_list_resource_templates=self._guard(self._list_templates),
            on_read_resource=self._guard(self._read_resource),
            on_subscriptions_listen=self._listen,
            on_list_prompts=self._guard(self._relayed("list_prompts")),
            on_get_prompt=self._guard(self._relayed("get_prompt")),
            on_completion=self._guard(self._relayed("complete")),
            on_subscribe_resource=self._guard(self._relayed("subscribe")),
            on_unsubscribe_resource=self._guard(self._relayed("unsubscribe")),
            get_tool_input_schema=self._input_schema)
        self._listen_handler = ListenHandler(self.notifier.bus)
        self.server.add_request_handler(  # as on_set_logging_level, without its warning
            "logging/setLevel", types.SetLevelRequestParams, self.levels.set_level)
        # the pipeline opens its own ``execute_tool`` span per call (SPEC §9); the SDK's
        # per-message span would double the tracing cost of every request
        self.server.middleware[:] = [m for m in self.server.middleware
                                     if type(m).__name__ != "OpenTelemetryMiddleware"]
        # requestState is toolkeeper's own sealed, bound, single-use envelope
        # (toolkeeper.mcp.request_state): no SDK RequestStateBoundary sealing it again
        self.rounds = Rounds(gw, timeout_s=confirm_timeout_s)
        self.tasks = Tasks(self, CONFIRM_SCHEMA)  # tasks/get|update|cancel, mcp/tasks.py
        self.tasks.register(self.server, self._guard)

    # -- who is calling -------------------------------------------------------------------

    async def principal(self, ctx: Ctx) -> Principal:
        if self.fixed is not None:
            return self.fixed
        request = ctx.request
        header = request.headers.get("authorization", "") if request is not None else ""
        scheme, _, token = header.partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        who = self.gw.cached_principal(token) if token else None
        if who is None and token:
            # the HTTP endpoint verified this token, but the cache may have been dropped
            # since (a token created or revoked anywhere): verify again, never assume
            who = await self.gw.authenticate_async(token)
        if who is None:  # revoked since the endpoint verified it
            raise MCPError(code=types.INVALID_REQUEST, message="unauthenticated")
        carry(who, token)  # token exchange for upstreams (never sent upstream)
        if who.agent is None:
            raise MCPError(code=types.INVALID_REQUEST, message="not an agent's token")
        return who

    def _guard(self, handler: Callable[[Ctx, Any], Awaitable[R]]
               ) -> Callable[[Ctx, Any], Awaitable[R]]:
        """Protocol errors pass; anything else is logged and answered as an internal error
        (the SDK would otherwise send the exception's text to the client)."""
        async def guarded(ctx: Ctx, params: Any) -> R:
            try:
                return await handler(ctx, params)
            except MCPError:
                raise
            except Exception:
                log.exception("MCP %s failed", ctx.method)
                raise MCPError(code=types.INTERNAL_ERROR,
                               message="internal error (logged by the gateway)") from None
        return guarded

    # -- tools ----------------------------------------------------------------------------

    async def _list_tools(self, ctx: Ctx, params: Any) -> types.ListToolsResult:
        who = await self.principal(ctx)
        listing = self.listings.get(key_of(who))
        self.notifier.track(ctx, key_of(who), listing.fingerprint)
        return listing.result

    def list_for(self, who: Principal) -> types.ListToolsResult:
        """``tools/list`` of a stateless (2026-07-28) caller: what ``who`` may call."""
        listing = self.listings.get(key_of(who))
        self.notifier.shown(key_of(who), listing.fingerprint)
        return listing.result

    def request_for(self, who: Principal, name: str, arguments: dict[str, Any] | None,
                    meta: Any) -> tuple[Any, CallRequest]:
        """The tool ``name`` (``Unknown tool`` unless listed, or hidden only while its
        circuit is open: the pipeline answers that) and the pipeline's request."""
        entry = self.listings.get(key_of(who)).callable_names.get(name)
        if entry is None:  # unknown, or another agent's: the same answer
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")
        given: dict[str, Any] = dict(meta or {})
        fields: dict[str, Any] = {f: str(given[META_PREFIX + f]) for f in CALL_META
                                  if given.get(META_PREFIX + f) is not None}
        return entry, CallRequest(tool=entry.tool, action=entry.action,
                                  arguments=arguments if arguments is not None else {},
                                  **fields)

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        # the SDK checks 2026-07-28 Mcp-Param-* headers with this, before any handler: the
        # schema this caller was listed (mcp/protocol.py caller); None: not listed
        who = self.fixed or caller(self.gw)
        if who is None:  # no caller known: permissive, the pipeline checks the arguments
            return {"type": "object"}
        entry = self.listings.get(key_of(who)).callable_names.get(name)
        return entry.input_schema if entry is not None else None

    async def _call_tool(self, ctx: Ctx, params: types.CallToolRequestParams
                         ) -> types.CallToolResult | types.InputRequiredResult:
        who = await self.principal(ctx)
        self.notifier.track(ctx, key_of(who), None)
        entry, request = self.request_for(who, params.name, params.arguments, ctx.meta)
        retry = params.request_state is not None or params.input_responses is not None
        retry_task = retry and declared(ctx)  # a task made by escalate, with the answers
        if not retry_task and (task := await self.tasks.begin(ctx, who, entry, request)):
            return cast(types.CallToolResult, task)  # CreateTaskResult: run in the background

        async def park(result: CallResult) -> Any:  # CreateTaskResult: waits for a human
            return await self.tasks.park(ctx, who, entry, request, result)

        async def escalate(resume: dict[str, Any]) -> Any:  # CreateTaskResult: the answers
            return await self.tasks.asks.escalate(ctx, who, entry, request, resume)
        # confirmations and an upstream's questions (toolkeeper.mcp.input_required); the
        # agent's progress, log level, capabilities, trace context (toolkeeper.mcp.protocol)
        token = DOWNSTREAM.set(ds := downstream_for(ctx, self.levels))
        try:
            with continued(ds):
                return await self.rounds.call(ctx, who, entry.name, request, params,
                                              park=park, escalate=escalate)
        finally:
            DOWNSTREAM.reset(token)

    def _question(self, name: str, result: CallResult, arguments: Any) -> str:
        """The confirmation's question (also a task's, ``toolkeeper.mcp.tasks``)."""
        return self.rounds.question(name, result, arguments)

    # -- resources, prompts, completions (upstream ones: mcp/relay.py) --------------------

    def _relayed(self, name: str) -> Callable[[Ctx, Any], Awaitable[Any]]:
        async def handler(ctx: Ctx, params: Any) -> Any:
            who = await self.principal(ctx)
            self.notifier.track(ctx, key_of(who), None)
            if name == "list_prompts":
                return self.relay.list_prompts(who)
            if name in ("subscribe", "unsubscribe"):
                return await getattr(self.relay, name)(ctx, who, str(params.uri))
            if name == "get_prompt":  # an upstream prompt may ask (mcp/input_required.py)
                return await self.rounds.prompt(ctx, who, params, self.relay.get_prompt)
            return await getattr(self.relay, name)(who, params)
        return handler

    async def _list_resources(self, ctx: Ctx, params: Any) -> types.ListResourcesResult:
        who = await self.principal(ctx)
        self.notifier.track(ctx, key_of(who), None)
        return types.ListResourcesResult.model_validate(
            {"resources": resources(who) + self.relay.list_resources(who)})

    async def _list_templates(self, ctx: Ctx, params: Any
                              ) -> types.ListResourceTemplatesResult:
        who = await self.principal(ctx)
        return types.ListResourceTemplatesResult.model_validate(
            {"resourceTemplates": templates() + self.relay.list_templates(who)})

    async def _read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams
                             ) -> types.ReadResourceResult:
        who = await self.principal(ctx)
        if not str(params.uri).startswith("toolkeeper://"):
            return await self.relay.read(who, str(params.uri))
        text = await anyio.to_thread.run_sync(read, self.gw, who, str(params.uri))
        if text is None:
            raise MCPError(code=types.INVALID_PARAMS, message="Resource not found",
                           data={"uri": str(params.uri)})
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=str(params.uri), mime_type="application/json", text=text)])

    async def _listen(self, ctx: Ctx, params: types.SubscriptionsListenRequestParams
                      ) -> types.SubscriptionsListenResult:
        """2026-07-28 ``subscriptions/listen``: the stream carries this agent's changes."""
        who = await self.principal(ctx)
        await self.relay.listen(who, key_of(who), params)  # resource subscriptions
        with self.notifier.listening_as(key_of(who)):
            return await self._listen_handler(ctx, params)

    # -- lifecycle ------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                  ) -> None:
        """Forward catalog changes to connected agents until cancelled."""
        await self.notifier.run(self.gw, task_status=task_status)

    def close(self) -> None:
        self._listen_handler.close()


async def serve_stdio(gw: Gateway, principal: Principal) -> None:
    """``toolkeeper mcp --agent NAME``: serve one agent over stdin/stdout until EOF."""
    from mcp.server.stdio import stdio_server

    face = McpFace(gw, principal=principal)
    async with anyio.create_task_group() as tg:
        await tg.start(face.run)
        async with stdio_server() as (read_stream, write_stream):
            await face.server.run(read_stream, write_stream,
                                  face.server.create_initialization_options(),
                                  raise_exceptions=False)
        face.close()
        tg.cancel_scope.cancel()


__all__ = ["McpFace", "serve_stdio"]
