"""Upstream prompts, resources, completions and resource subscriptions through ``/mcp``,
under the same governance as tools (SPEC §7 MCP; ``toolkeeper.upstream.extras`` says what the
registry entries are).

- ``prompts/list``: the ``mcp_prompt`` entries the agent may call (the rules of
  ``services/discovery``, as ``tools/list``); ``prompts/get`` runs the pipeline (the entry's
  ``get`` action with the prompt's arguments) and answers the upstream's messages, masked
  and capped by the outcome step.
- ``resources/list`` and ``resources/templates/list``: toolkeeper's discovery resources and
  the resources and templates of every server whose ``mcp_resources`` entry the agent may
  call; ``resources/read`` of another URI finds that server (the listed URI, else a
  matching template; a URI two servers claim goes to the first, by entry name, and is
  logged) and runs the pipeline (``read`` with ``{"uri": …}``). A URI no such server claims,
  or one the call is denied, answers ``-32602 Resource not found`` — never "forbidden".
- ``completion/complete``: a prompt reference only if that prompt is listed for the agent, a
  resource reference only if a listed server has that template (or URI) — else ``-32602``
  (``Unknown prompt`` / ``Resource not found``, as for a get or a read); relayed upstream
  with the upstream's names, bounded by the server's timeout and 100 values; not run through
  the pipeline (no arguments are executed, nothing is audited).
- ``resources/subscribe``/``unsubscribe`` (2025-11-25): only for a URI the agent may read;
  toolkeeper subscribes upstream once per URI and forwards ``notifications/resources/
  updated`` to the sessions that subscribed, if their agent may still read it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from toolkeeper.canonical import digest
from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.services.discovery import agent_enabled
from toolkeeper.upstream.extras import PROMPT, RESOURCES, claims, has_template

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway

log = logging.getLogger("toolkeeper.mcp")
NOT_FOUND = "Resource not found"
MAX_COMPLETIONS = 100
MAX_SUBSCRIPTIONS = 10_000
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
_PASSING = frozenset({Reason.RATE_LIMITED, Reason.CALL_LIMIT_EXCEEDED, Reason.BUDGET_EXCEEDED,
                      Reason.CONCURRENCY_LIMITED, Reason.APPROVALS_PENDING_LIMIT,
                      Reason.TOOL_UNAVAILABLE, Reason.STORE_UNAVAILABLE})
"""Denials that say nothing about the URI (limits, availability): answered as they are."""


class Relay:
    """The relayed features of one :class:`~toolkeeper.mcp.server.McpFace`."""

    def __init__(self, gw: Gateway) -> None:
        self.gw = gw
        self._subs: dict[tuple[int, str], tuple[Any, Principal, asyncio.AbstractEventLoop]] = {}
        """(session id, uri) → (session, its agent, its loop)."""
        self._upstream_subs: set[tuple[str, str]] = set()
        self._listening: dict[Any, set[str]] = {}
        """2026-07-28: per agent, the URIs its listen streams asked to hear of."""
        self._listeners: dict[Any, tuple[Principal, asyncio.AbstractEventLoop]] = {}
        self.bus: Any = None
        """The face's ``AgentBus`` (listen streams per agent)."""

    # -- what the agent may use -----------------------------------------------------------

    def entries(self, who: Principal, kind: str) -> list[ToolDefinition]:
        """The agent's callable entries of ``kind``, by name."""
        assert who.agent is not None
        view = agent_enabled(self.gw.catalog, self.gw.runtime.health, who.tenant_id,
                             who.agent, who.scopes)
        action = "get" if kind == PROMPT else "read"
        return [item.definition for item in (view[1] if view else ())
                if item.definition.implementation_type == kind and action in item.actions]

    def readable(self, who: Principal) -> list[tuple[ToolDefinition, tuple[str, ...] | None]]:
        """The agent's resources entries, each with the URI prefixes its policy allows
        (``None``: all)."""
        assert who.agent is not None
        catalog = self.gw.catalog
        agent = catalog.agents.get((who.tenant_id, who.agent))
        profile = catalog.profiles.get((who.tenant_id, agent.profile)) if agent else None
        out = []
        for entry in self.entries(who, RESOURCES):
            act = profile.activations.get(entry.name) if profile is not None else None
            prefixes = {**entry.policy, **(act.policy if act else {})}.get("uri_prefixes")
            out.append((entry, tuple(prefixes) if prefixes is not None else None))
        return out

    def owner(self, who: Principal, uri: str) -> ToolDefinition | None:
        """The resources entry of the server that serves ``uri`` to ``who``."""
        found = [e for e, allowed in self.readable(who) if claims(e.implementation, uri)
                 and (allowed is None or uri.startswith(allowed))]
        if len(found) > 1:
            log.info("resource %s is claimed by %s; %s serves it", uri[:200],
                     ", ".join(e.name for e in found), found[0].name)
        return found[0] if found else None

    def fingerprints(self, key: Any) -> tuple[str, str]:
        """What ``key``'s agent is shown of prompts, and of resources and templates."""
        tenant, agent, scopes = key
        who = Principal(name=agent, tenant_id=tenant, roles=frozenset(), agent=agent,
                        scopes=scopes)
        prompts = [(e.name, e.implementation.get("upstream_hash")) for e in
                   self.entries(who, PROMPT)]
        resources = [(e.name, e.implementation.get("upstream_hash")) for e in
                     self.entries(who, RESOURCES)]
        return digest(prompts), digest(resources)

    # -- prompts --------------------------------------------------------------------------

    def list_prompts(self, who: Principal) -> types.ListPromptsResult:
        prompts = [{**e.implementation.get("definition", {}), "name": e.name}
                   for e in self.entries(who, PROMPT)]
        return types.ListPromptsResult.model_validate({"prompts": prompts})

    async def get_prompt(self, who: Principal, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult:
        entry = next((e for e in self.entries(who, PROMPT) if e.name == params.name), None)
        if entry is None:  # unknown, or another agent's: the same answer
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")
        result = await self.gw.call_served(CallRequest(
            tool=entry.name, action="get", arguments=dict(params.arguments or {})), who)
        if result.status is not CallStatus.SUCCEEDED or result.mcp is None:
            raise _stopped(result)
        blocks = result.mcp.get("content", [])
        shaped = result.mcp.get("structuredContent") or {}
        roles = shaped.get("roles") or []
        messages = [{"role": roles[i] if i < len(roles) else "user", "content": b}
                    for i, b in enumerate(blocks)]
        body: dict[str, Any] = {"messages": messages}
        if isinstance(shaped.get("description"), str):
            body["description"] = shaped["description"]
        return types.GetPromptResult.model_validate(body)

    # -- resources ------------------------------------------------------------------------

    def list_resources(self, who: Principal) -> list[dict[str, Any]]:
        return [r for e, allowed in self.readable(who)
                for r in e.implementation.get("resources", ())
                if allowed is None or str(r.get("uri", "")).startswith(allowed)]

    def list_templates(self, who: Principal) -> list[dict[str, Any]]:
        return [t for e in self.entries(who, RESOURCES)
                for t in e.implementation.get("templates", ())]

    async def read(self, who: Principal, uri: str) -> types.ReadResourceResult:
        entry = self.owner(who, uri)
        if entry is None:
            raise _not_found(uri)
        result = await self.gw.call_served(CallRequest(
            tool=entry.name, action="read", arguments={"uri": uri}), who)
        if result.status is not CallStatus.SUCCEEDED or result.mcp is None:
            if _hidden(result):
                raise _not_found(uri)
            raise _stopped(result)
        contents = []
        for block in result.mcp.get("content", []):
            if block.get("type") == "resource" and isinstance(block.get("resource"), dict):
                contents.append(block["resource"])
            else:  # a note in place of a blob withheld or over the cap
                contents.append({"uri": uri, "mimeType": "text/plain",
                                 "text": str(block.get("text", ""))})
        return types.ReadResourceResult.model_validate({"contents": contents})

    # -- completions ----------------------------------------------------------------------

    async def complete(self, who: Principal, params: types.CompleteRequestParams
                       ) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            entry = next((e for e in self.entries(who, PROMPT) if e.name == ref.name), None)
            upstream_ref: dict[str, Any] = {"type": "ref/prompt", "name": str(
                entry.implementation.get("prompt")) if entry else ""}
        else:
            entry = next((e for e in self.entries(who, RESOURCES)
                          if has_template(e.implementation, ref.uri)
                          or claims(e.implementation, ref.uri)), None)
            upstream_ref = {"type": "ref/resource", "uri": ref.uri}
        if entry is None:  # unknown, or not the agent's: the same answer as prompts/get's
            what = (f"Unknown prompt: {ref.name}" if isinstance(ref, types.PromptReference)
                    else NOT_FOUND)
            raise MCPError(code=types.INVALID_PARAMS, message=what[:300])
        wire = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        wire.pop("_meta", None)
        wire["ref"] = upstream_ref
        server = str(entry.implementation.get("server"))
        try:
            answer = await self.gw.upstreams.request(
                server, "completion/complete", wire,
                timeout_s=min(entry.execution.timeout_s, 30.0))
            done = types.CompleteResult.model_validate(answer).completion
        except Exception as exc:  # an upstream without completions, or a bad answer
            log.info("completion from %s failed: %s", server, str(exc)[:300])
            return types.CompleteResult(completion=types.Completion(values=[]))
        redact = self.gw.runtime.redactor.redact_text
        values = [redact(v)[:1000] for v in done.values[:MAX_COMPLETIONS]]
        return types.CompleteResult(completion=types.Completion(
            values=values, total=done.total, has_more=done.has_more))

    # -- subscriptions (2025-11-25) -------------------------------------------------------

    async def subscribe(self, ctx: Any, who: Principal, uri: str) -> types.EmptyResult:
        entry = self.owner(who, uri)
        if entry is None:
            raise _not_found(uri)
        server = str(entry.implementation.get("server"))
        key = (id(ctx.session), uri)
        if key not in self._subs:
            if len(self._subs) >= MAX_SUBSCRIPTIONS:
                raise MCPError(code=types.INVALID_REQUEST, message="too many subscriptions")
            conn = getattr(ctx.session, "_connection", None)
            if conn is not None:  # forgotten when the session ends (see notify.track)
                conn.exit_stack.callback(self._subs.pop, key, None)
        self._subs[key] = (ctx.session, who, asyncio.get_running_loop())
        await self.watch(server, uri, min(entry.execution.timeout_s, 30.0))
        return types.EmptyResult()

    async def watch(self, server: str, uri: str, timeout_s: float) -> None:
        """Have ``server`` tell the gateway when ``uri`` changes (once per server and URI):
        a 2025-11-25 upstream by ``resources/subscribe``, a 2026-07-28 one on a
        ``subscriptions/listen`` stream of its own."""
        from toolkeeper.upstream.relayed import watch_resource

        if (server, uri) in self._upstream_subs:
            return
        if len(self._upstream_subs) >= MAX_SUBSCRIPTIONS:
            raise MCPError(code=types.INVALID_REQUEST, message="too many subscriptions")
        pool = self.gw.upstreams.get()
        if pool.on_message is None:
            pool.on_message = self._upstream_message
        cfg = pool.config(server)

        def updated(changed: str) -> None:
            self._upstream_message(cfg, types.ResourceUpdatedNotification(
                params=types.ResourceUpdatedNotificationParams(uri=changed)))
        try:
            await pool.with_client(server, lambda c: watch_resource(c, uri, updated,
                                                                    timeout_s))
            self._upstream_subs.add((server, uri))
        except MCPError as exc:  # e.g. an upstream without subscriptions: none come
            log.info("upstream %s: no subscription to %s: %s", server, uri[:200],
                     exc.message[:200])

    async def unsubscribe(self, ctx: Any, who: Principal, uri: str) -> types.EmptyResult:
        self._subs.pop((id(ctx.session), uri), None)
        return types.EmptyResult()

    def _upstream_message(self, cfg: Any, message: Any) -> bool:
        """On the pool's loop: an upstream's ``resources/updated`` goes to the subscribers
        whose agent may read that URI from that server."""
        if not isinstance(message, types.ResourceUpdatedNotification):
            return False
        if (message.params.meta or {}).get(SUBSCRIPTION_ID):
            return True  # a frame of our own listen stream: its iterator delivers it
        uri = str(message.params.uri)
        for (_sid, sub_uri), (session, who, loop) in list(self._subs.items()):
            if sub_uri == uri and self._serves(who, uri, cfg.name):
                asyncio.run_coroutine_threadsafe(_send_updated(session, uri), loop)
        for key, (who, loop) in list(self._listeners.items()):
            if uri in self._listening.get(key, ()) and self._serves(who, uri, cfg.name):
                asyncio.run_coroutine_threadsafe(self._publish(key, uri), loop)
        return True

    def _serves(self, who: Principal, uri: str, server: str) -> bool:
        entry = self.owner(who, uri)
        return entry is not None and entry.implementation.get("server") == server

    async def _publish(self, key: Any, uri: str) -> None:
        from mcp.server.subscriptions import ResourceUpdated

        if self.bus is not None:
            await self.bus.publish_to(key, ResourceUpdated(uri=uri))

    async def listen(self, who: Principal, key: Any, params: Any) -> None:
        """2026-07-28: the resource subscriptions of ``who``'s ``subscriptions/listen``
        stream — those it may read are watched upstream; updates go to its streams."""
        wanted = list(getattr(params.notifications, "resource_subscriptions", None) or ())
        uris = set(self._listening.get(key, ()))
        for uri in wanted[:100]:
            entry = self.owner(who, uri)
            if entry is None:
                continue
            uris.add(uri)
            await self.watch(str(entry.implementation.get("server")), uri,
                             min(entry.execution.timeout_s, 30.0))
        if uris and len(self._listeners) < MAX_SUBSCRIPTIONS:
            self._listening[key] = uris
            self._listeners[key] = (who, asyncio.get_running_loop())


async def _send_updated(session: Any, uri: str) -> None:
    try:
        await session.send_resource_updated(uri)
    except Exception as exc:  # a closed session: it is gone
        log.info("resources/updated not delivered: %s", exc)


def _hidden(result: CallResult) -> bool:
    """Whether a stopped read answers as not found: a denial about this URI (policy, scope,
    gate, quarantine) or a URI the upstream does not know — never told from a missing one."""
    if result.status is CallStatus.DENIED:
        return result.reason not in _PASSING
    return result.status is CallStatus.FAILED and result.reason == Reason.INVALID_ARGUMENTS


def _not_found(uri: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=NOT_FOUND, data={"uri": uri[:2048]})


def _stopped(result: CallResult) -> MCPError:
    """A call that did not succeed, as a JSON-RPC error a model can act on."""
    invalid = result.reason in (Reason.INVALID_ARGUMENTS, Reason.TOOL_NOT_FOUND)
    data = {k: v for k, v in (("status", result.status.value), ("reason", result.reason),
                              ("approval_id", result.approval_id),
                              ("retry_after", result.retry_after)) if v is not None}
    text = f"{result.status.value}: {result.reason}" + (
        f": {result.message}" if result.message else "")
    return MCPError(code=types.INVALID_PARAMS if invalid else types.INVALID_REQUEST,
                    message=text[:1000], data=data)
