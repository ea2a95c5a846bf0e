"""Connections to upstream MCP servers (SPEC §7 MCP, §8): one reused client per server.

Calls come from whatever loop or thread runs the pipeline; the SDK's clients are bound to
the task that opened them. So every client lives on the pool's own event loop (one daemon
thread), each owned by a task that holds it open, and callers hand their work to that loop.

A server is connected on first use (bounded by ``connect_timeout_s``), reconnected after a
failure, and listed again on every connect and on its ``tools/list_changed``: the listing
goes to ``on_listing``, which compares it with what was pinned (drift quarantines).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from toolkeeper.upstream.downstream import current
from toolkeeper.upstream.errors import Bearer, TokenRejected, UpstreamUnavailable
from toolkeeper.upstream.fallback import Fallbacks
from toolkeeper.upstream.link import base_env
from toolkeeper.upstream.relayed import tools_of
from toolkeeper.upstream.servers import ServerConfig

log = logging.getLogger("toolkeeper.upstream")
CONNECTION_CLOSED = -32000
"""The SDK's error code for a transport that went away under a request."""
T = TypeVar("T")


@dataclass(slots=True)
class _Conn:
    client: Any = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


Resolver = Callable[[Mapping[str, str]], Awaitable[Mapping[str, str]]]
"""Replaces ``${secret:…}`` references in header/env values, at connect time."""


async def _verbatim(values: Mapping[str, str]) -> Mapping[str, str]:
    return values


class UpstreamPool:
    """Reused MCP clients, one per configured server, on a private event loop."""

    def __init__(self, configs: Callable[[], Mapping[str, ServerConfig]], *,
                 resolve: Resolver | None = None,
                 on_listing: Callable[[ServerConfig, list[Any]], None] | None = None,
                 bearer_for: Callable[[ServerConfig], Bearer | None] | None = None,
                 on_fallback: Callable[[str, str], None] | None = None) -> None:
        self._configs = configs
        self._resolve = resolve or _verbatim
        self.bearer_for = bearer_for or (lambda cfg: None)
        """An OAuth server's connection token source (``None``: no ``oauth`` block)."""
        self.on_listing = on_listing
        self.on_message: Callable[[ServerConfig, Any], bool] | None = None
        """Sees an upstream's notifications first (``True``: handled, e.g. a resource
        update relayed to subscribers)."""
        self._conns: dict[str, _Conn] = {}
        self._lean: dict[tuple[str, int], Any] = {}
        self._lean_locks: dict[tuple[str, int], asyncio.Lock] = {}
        self.fallbacks = Fallbacks(on_fallback)
        """HTTP servers that refused the lean client's handshake (``on_fallback(server,
        code)`` once each)."""
        self._listed: set[str] = set()
        self._connecting: dict[str, asyncio.Lock] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="toolkeeper-mcp-upstream", daemon=True)
        self._thread.start()
        self._closed = False

    # -- from any thread or loop ----------------------------------------------------------

    def submit(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    async def call(self, server: str, tool: str, arguments: dict[str, Any], *,
                   timeout_s: float, bearer: Bearer | None = None,
                   extra: dict[str, Any] | None = None,
                   param_headers: dict[str, str] | None = None) -> Any:
        """``tools/call`` on ``server``: a ``CallToolResult`` (model or wire dict), or an
        ``InputRequiredResult`` as its wire dict. ``extra``: ``inputResponses`` and
        ``requestState`` of a retry (multi-round-trip requests).

        An HTTP server is called from the caller's own loop over a lean client kept per
        (server, loop): no thread hop on the hot path. Others go through the pool's loop.
        ``bearer``: this call's own OAuth token (token exchange; else the connection's).
        """
        cfg, lean = await self._open(server)
        if lean is not None:
            return await self._lean_call(cfg, lean, tool, arguments, timeout_s, bearer,
                                         extra, param_headers)
        if bearer is not None:
            raise TokenRejected(f"{server}: a per-call token (token exchange) needs a server "
                                "the gateway's own client speaks to (2025-era handshake)")
        return await self.submit(self._call(server, tool, arguments, timeout_s, extra))

    async def request(self, server: str, method: str, params: dict[str, Any], *,
                      timeout_s: float) -> dict[str, Any]:
        """Any other request on ``server`` (prompts, resources, completions): the answer as
        its wire dict (:mod:`toolkeeper.upstream.relayed`)."""
        from toolkeeper.upstream.relayed import relay_request

        _cfg, lean = await self._open(server)
        if lean is not None:
            return await relay_request(lean, method, params, timeout_s)
        return await self.submit(self._request(server, method, params, timeout_s))

    async def _open(self, server: str) -> tuple[ServerConfig, Any]:
        """``server``'s config and this loop's lean client of it (``None``: the pool's own
        client on its loop serves it: stdio, or an HTTP server the lean client cannot
        handshake with)."""
        if self._closed:
            raise UpstreamUnavailable("the gateway is closing")
        cfg = self._config(server)
        if cfg.url is None or server in self.fallbacks:
            return cfg, None
        return cfg, await self._local(cfg)

    async def _request(self, server: str, method: str, params: dict[str, Any],
                       timeout_s: float) -> dict[str, Any]:
        from toolkeeper.upstream.relayed import relay_request

        return await relay_request(await self._client(server), method, params, timeout_s)

    async def with_client(self, server: str,
                          fn: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
        """``fn(client)`` on the pool's loop with ``server``'s connected client."""
        async def run() -> T:
            return await fn(await self._client(server))
        return await self.submit(run())

    def list_extras(self, server: str, timeout_s: float = 30.0) -> Any:
        """Blocking: the server's prompts, resources and templates now
        (:func:`toolkeeper.upstream.relayed.list_extras`)."""
        from toolkeeper.upstream.relayed import list_extras

        async def run() -> Any:
            return await list_extras(await self._client(server, relist=False), timeout_s)
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=timeout_s)

    def config(self, server: str) -> ServerConfig:
        """The configuration of ``server`` (``UpstreamUnavailable`` when there is none)."""
        return self._config(server)

    async def _local(self, cfg: ServerConfig) -> Any:
        """This loop's lean client of ``cfg`` (``None``: the server needs the SDK's)."""
        from toolkeeper.upstream.http_client import HandshakeRefused, LeanHttpClient

        key = (cfg.name, id(asyncio.get_running_loop()))
        found = self._lean.get(key)
        if found is not None:
            return found
        lock = self._lean_locks.setdefault(key, asyncio.Lock())
        async with lock:
            found = self._lean.get(key)
            if found is not None:
                return found
            assert cfg.url is not None
            lean = LeanHttpClient(cfg.url, headers=await self._resolve(cfg.headers),
                                  timeout_s=cfg.timeout_s,
                                  connect_timeout_s=cfg.connect_timeout_s,
                                  auth=self.bearer_for(cfg))
            try:
                await asyncio.wait_for(lean.start(), cfg.connect_timeout_s)
            except HandshakeRefused as exc:
                self.fallbacks.note(cfg.name, exc.code, str(exc))
                await lean.aclose()
                return None
            except TimeoutError:
                await lean.aclose()
                raise UpstreamUnavailable(f"{cfg.name}: no connection within "
                                          f"{cfg.connect_timeout_s:g} s") from None
            except BaseException:
                await lean.aclose()
                raise
            if len(self._lean) >= 256:  # loops come and go (threads): forget the oldest
                self._lean.pop(next(iter(self._lean)), None)
            self._lean[key] = lean
        if cfg.name not in self._listed:  # drift check once per server and pool
            self._listed.add(cfg.name)
            # connecting lists it for the drift check; fire and forget (a failure here is
            # the next call's to report)
            asyncio.run_coroutine_threadsafe(self._quietly(self._client(cfg.name)), self._loop)
        return lean

    @staticmethod
    async def _quietly(coro: Coroutine[Any, Any, Any]) -> None:
        try:
            await coro
        except Exception as exc:
            log.info("upstream background connect failed: %s", _brief(exc))

    async def _lean_call(self, cfg: ServerConfig, lean: Any, tool: str,
                         arguments: dict[str, Any], timeout_s: float,
                         bearer: Bearer | None, extra: dict[str, Any] | None = None,
                         param_headers: dict[str, str] | None = None) -> Any:
        from mcp.shared.exceptions import MCPError

        try:
            return await lean.call_tool(tool, arguments, read_timeout_seconds=timeout_s,
                                        bearer=bearer, **({"extra": extra} if extra else {}),
                                        **({"param_headers": param_headers}
                                           if param_headers else {}))
        except (MCPError, UpstreamUnavailable) as exc:
            if not isinstance(exc, MCPError) or exc.code == CONNECTION_CLOSED:
                key = (cfg.name, id(asyncio.get_running_loop()))
                current = self._lean.get(key)
                if current is lean:
                    del self._lean[key]  # the next call reconnects
                    await current.aclose()
            raise

    def list_tools(self, server: str, timeout_s: float = 30.0) -> list[Any]:
        """Blocking: the server's tools now (connecting if needed)."""
        fut = asyncio.run_coroutine_threadsafe(self._list(server), self._loop)
        return fut.result(timeout=timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._close_all(), self._loop).result(timeout_s)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=timeout_s)
        if not self._thread.is_alive():
            self._loop.close()

    # -- on the pool's loop ---------------------------------------------------------------

    def _config(self, server: str) -> ServerConfig:
        cfg = self._configs().get(server)
        if cfg is None:
            raise UpstreamUnavailable(f"no upstream MCP server {server!r} is configured")
        return cfg

    async def _client(self, server: str, *, relist: bool = True) -> Any:
        """The connected client of ``server``; a new connection's listing goes to
        ``on_listing`` (the drift check) unless the caller lists anyway (``relist``)."""
        conn = self._conns.get(server)
        if conn is not None and conn.client is not None:
            return conn.client
        lock = self._connecting.setdefault(server, asyncio.Lock())
        async with lock:
            conn = self._conns.get(server)
            if conn is not None and conn.client is not None:
                return conn.client
            cfg = self._config(server)
            conn = _Conn()
            ready: asyncio.Future[Any] = self._loop.create_future()
            conn.task = self._loop.create_task(self._own(cfg, conn, ready))
            try:
                client = await asyncio.wait_for(asyncio.shield(ready), cfg.connect_timeout_s)
            except TimeoutError:
                conn.stop.set()
                raise UpstreamUnavailable(f"{server}: no connection within "
                                          f"{cfg.connect_timeout_s:g} s") from None
            except Exception as exc:
                raise UpstreamUnavailable(f"{server}: cannot connect: {_brief(exc)}") from exc
            conn.client = client
            self._conns[server] = conn
        if relist:
            self._loop.create_task(self._relist(cfg, client))
        return client

    async def _own(self, cfg: ServerConfig, conn: _Conn, ready: asyncio.Future[Any]) -> None:
        """Holds one client open until told to stop or it breaks: HTTP's lean one, else SDK's."""
        from mcp import Client
        from toolkeeper.upstream.http_client import HandshakeRefused, LeanHttpClient
        from toolkeeper.upstream.listen import hearing

        try:
            async with contextlib.AsyncExitStack() as stack:
                if cfg.url is not None:
                    lean = LeanHttpClient(cfg.url, headers=await self._resolve(cfg.headers),
                                          timeout_s=cfg.timeout_s,
                                          connect_timeout_s=cfg.connect_timeout_s,
                                          auth=self.bearer_for(cfg))
                    stack.push_async_callback(lean.aclose)
                    try:
                        await lean.start()
                    except HandshakeRefused as exc:
                        self.fallbacks.note(cfg.name, exc.code, str(exc))
                    else:
                        if not ready.done():
                            ready.set_result(lean)
                        with hearing(self._loop, cfg, lean, self._relist):  # its changes
                            await conn.stop.wait()
                        return
                transport = await self._transport(cfg, stack)
                client = await stack.enter_async_context(Client(
                    transport, mode="auto", read_timeout_seconds=cfg.timeout_s, cache=None,
                    message_handler=self._messages(cfg)))
                if not ready.done():
                    ready.set_result(client)
                listener = self._loop.create_task(self._listen(cfg, client))
                try:
                    await conn.stop.wait()
                finally:
                    listener.cancel()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception)
                                    else UpstreamUnavailable("cancelled"))
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("upstream %s disconnected: %s", cfg.name, _brief(exc))
        finally:
            if self._conns.get(cfg.name) is conn:
                del self._conns[cfg.name]

    async def _transport(self, cfg: ServerConfig, stack: contextlib.AsyncExitStack) -> Any:
        if cfg.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            source = self.bearer_for(cfg)
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=dict(await self._resolve(cfg.headers)),
                auth=None if source is None else _bearer_auth(httpx2, source),
                timeout=httpx2.Timeout(cfg.timeout_s, connect=cfg.connect_timeout_s)))
            return streamable_http_client(cfg.url, http_client=http)
        from mcp import StdioServerParameters

        assert cfg.command is not None
        env = {**base_env(), **(await self._resolve(cfg.env))}
        return StdioServerParameters(command=cfg.command[0], args=list(cfg.command[1:]),
                                     env=env, cwd=cfg.cwd)

    def _messages(self, cfg: ServerConfig) -> Any:
        async def handle(message: Any) -> None:
            import mcp_types as types

            if self.on_message is not None and self.on_message(cfg, message):
                return
            if isinstance(message, types.ToolListChangedNotification | types.
                          PromptListChangedNotification | types.ResourceListChangedNotification):
                conn = self._conns.get(cfg.name)
                if conn is not None and conn.client is not None:
                    self._loop.create_task(self._relist(cfg, conn.client))
        return handle

    async def _listen(self, cfg: ServerConfig, client: Any) -> None:
        """2026-07-28 servers announce list changes on a ``subscriptions/listen`` stream
        (2025-11-25 ones as notifications: :meth:`_messages`)."""
        caps = getattr(client, "server_capabilities", None)
        if not any(getattr(getattr(caps, kind, None), "list_changed", False)
                   for kind in ("tools", "prompts", "resources")) or \
                getattr(client, "protocol_version", None) != "2026-07-28":
            return
        try:
            async with client.listen(tools_list_changed=True, prompts_list_changed=True,
                                     resources_list_changed=True) as sub:
                async for _event in sub:
                    await self._relist(cfg, client)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the connection's own failure handling takes over
            log.info("upstream %s: change stream ended: %s", cfg.name, _brief(exc))

    async def _relist(self, cfg: ServerConfig, client: Any) -> None:
        """Hand the server's current tools to ``on_listing`` (off the loop: it writes)."""
        if self.on_listing is None:
            return
        try:
            tools = await tools_of(client)
            await self._loop.run_in_executor(None, self.on_listing, cfg, tools)
        except Exception:
            log.exception("re-listing upstream %s failed", cfg.name)

    async def _list(self, server: str) -> list[Any]:
        client = await self._client(server, relist=False)  # the caller syncs what it gets
        try:
            return await tools_of(client)
        except Exception:
            await self._drop(server)
            raise

    async def _call(self, server: str, tool: str, arguments: dict[str, Any],
                    timeout_s: float, extra: dict[str, Any] | None = None) -> Any:
        client = await self._client(server)
        from mcp.shared.exceptions import MCPError

        extra, ds = extra or {}, current()  # the agent's progress goes back to it
        try:
            if not hasattr(client, "session"):  # the lean client (its own 2025 handshake)
                return await client.call_tool(tool, arguments, read_timeout_seconds=timeout_s,
                                              **({"extra": extra} if extra else {}))
            # the session's call: an InputRequiredResult comes back, the provider relays it
            result = await client.session.call_tool(
                tool, arguments, read_timeout_seconds=timeout_s, allow_input_required=True,
                input_responses=extra.get("inputResponses"),
                request_state=extra.get("requestState"),
                progress_callback=ds.progress if ds is not None else None)
            if getattr(result, "result_type", None) == "input_required":  # as on the wire
                return result.model_dump(mode="json", by_alias=True, exclude_none=True)
            return result
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                await self._drop(server)  # the next call reconnects
            raise  # otherwise the server answered: the connection is fine
        except Exception:
            await self._drop(server)  # the next call reconnects
            raise

    async def _drop(self, server: str) -> None:
        conn = self._conns.pop(server, None)
        if conn is not None:
            conn.stop.set()

    async def _close_all(self) -> None:
        conns = list(self._conns.values())
        for conn in conns:
            conn.stop.set()
        tasks = [c.task for c in conns if c.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=3)


def _bearer_auth(httpx2: Any, source: Bearer) -> Any:
    """The SDK client's auth: the token on every request; a 401 renews it once and sends the
    request again (the upstream refused before doing anything)."""
    class BearerAuth(httpx2.Auth):  # type: ignore[misc]
        async def async_auth_flow(self, request: Any) -> Any:
            token = await source.current()
            request.headers["Authorization"] = f"Bearer {token}"
            response = yield request
            if response.status_code == 401:
                token = await source.renew(token)
                request.headers["Authorization"] = f"Bearer {token}"
                yield request

    return BearerAuth()


def _brief(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"[:300]
