"""``notifications/tools/list_changed`` to connected agents, in both protocol eras.

Whenever the gateway loads a new catalog snapshot (a local write, another replica's write
seen through Redis or the change counter), each connected agent's listing is rebuilt and
compared with the one it was last shown; only agents whose effective tool set changed are
told. 2025-11-25 sessions get the notification on their standalone stream; 2026-07-28
clients get it on their ``subscriptions/listen`` stream.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolkeeper.mcp.views import Key, Listings

if TYPE_CHECKING:
    from mcp.server.session import ServerSession

    from toolkeeper.gateway import Gateway

log = logging.getLogger("toolkeeper.mcp")
_LISTENING: contextvars.ContextVar[Key | None] = contextvars.ContextVar(
    "toolkeeper_mcp_listening", default=None)
DEBOUNCE_S = 0.05
"""Changes arriving together (a config apply) make one notification."""


class AgentBus:
    """A ``SubscriptionBus`` whose listen streams belong to agents: events go to the
    streams of the agents they concern, not to every connected client."""

    def __init__(self) -> None:
        self._listeners: dict[object, tuple[Key | None, Callable[[ServerEvent], None]]] = {}

    async def publish(self, event: ServerEvent) -> None:
        self._deliver(None, event)
        await anyio.lowlevel.checkpoint()

    async def publish_to(self, key: Key, event: ServerEvent) -> None:
        self._deliver(key, event)
        await anyio.lowlevel.checkpoint()

    def _deliver(self, key: Key | None, event: ServerEvent) -> None:
        for owner, listener in list(self._listeners.values()):
            if key is None or owner == key:
                try:
                    listener(event)
                except Exception:
                    log.exception("listen stream delivery failed")

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = (_LISTENING.get(), listener)

        def unsubscribe() -> None:
            self._listeners.pop(token, None)
        return unsubscribe

    def keys(self) -> set[Key]:
        return {k for k, _ in self._listeners.values() if k is not None}


class ChangeNotifier:
    """Tracks who is connected and what each was shown; tells those whose listing changed."""

    def __init__(self, listings: Listings) -> None:
        self.listings = listings
        self.bus = AgentBus()
        self._sessions: dict[int, tuple[ServerSession, Key]] = {}
        self._by_id: dict[str, tuple[Any, Key]] = {}
        """Tracked sessions by ``Mcp-Session-Id``: their connection and agent (lean path)."""
        self._shown: dict[Key, str] = {}
        self.extras: Callable[[Key], tuple[str, str]] | None = None
        """Fingerprints of an agent's relayed prompts and resources (``mcp/relay.py``)."""
        self._shown_extras: dict[Key, tuple[str, str]] = {}
        self._changed: anyio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def shown(self, key: Key, fingerprint: str | None) -> None:
        """Remember what ``key``'s agent was shown (its current listing when ``None``)."""
        if fingerprint is not None:
            self._shown[key] = fingerprint
        elif key not in self._shown:
            self._shown[key] = self.listings.get(key).fingerprint
        if self.extras is not None and key not in self._shown_extras:
            self._shown_extras[key] = self.extras(key)

    def track(self, ctx: Any, key: Key, fingerprint: str | None) -> None:
        """Remember a 2025-11-25 session (until it closes) and what its agent was shown."""
        self.shown(key, fingerprint)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        # the SDK has no public registry of sessions: the connection's exit stack is the
        # one hook that runs when a session ends (DELETE, idle timeout, stdio EOF)
        conn = getattr(ctx.session, "_connection", None)
        if conn is None or id(conn) in self._sessions:
            return
        self._sessions[id(conn)] = (ctx.session, key)
        conn.exit_stack.callback(self._sessions.pop, id(conn), None)
        request = getattr(ctx, "request", None)
        sid = request.headers.get("mcp-session-id") if request is not None else None
        if sid:
            self._by_id[sid] = (conn, key)
            conn.exit_stack.callback(self._by_id.pop, sid, None)

    def session(self, sid: str) -> tuple[Any, Key] | None:
        """The connection and agent of the live 2025-11-25 session ``sid`` once a request
        on it was served here (``None`` before: that request sets up its delivery)."""
        return self._by_id.get(sid)

    @contextmanager
    def listening_as(self, key: Key) -> Iterator[None]:
        """Within: a listen stream opened on the bus belongs to ``key``."""
        self.shown(key, None)
        token = _LISTENING.set(key)
        try:
            yield
        finally:
            _LISTENING.reset(token)

    def connected(self) -> set[Key]:
        return {key for _s, key in self._sessions.values()} | self.bus.keys()

    def _wake(self) -> None:
        loop, event = self._loop, self._changed
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    async def run(self, gw: Gateway, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Until cancelled: after each reload, notify the agents whose listing changed."""
        self._loop = asyncio.get_running_loop()
        self._changed = anyio.Event()
        remove = gw.on_reload(self._wake)
        task_status.started()
        try:
            while True:
                await self._changed.wait()
                await anyio.sleep(DEBOUNCE_S)
                self._changed = anyio.Event()
                await self.refresh()
        finally:
            remove()

    async def refresh(self) -> None:
        for key in sorted(self.connected()):
            await self._refresh_extras(key)
            now = self.listings.get(key).fingerprint
            if self._shown.get(key) == now:
                continue
            self._shown[key] = now
            log.info("tools of %s/%s changed: notifying", *key)
            for session, owner in list(self._sessions.values()):
                if owner == key:
                    await session.send_tool_list_changed()  # a closed stream drops it
            await self.bus.publish_to(key, ToolsListChanged())

    async def _refresh_extras(self, key: Key) -> None:
        """``prompts/list_changed`` and ``resources/list_changed`` to ``key``'s agent when
        its relayed prompts or resources changed."""
        if self.extras is None:
            return
        now = self.extras(key)
        before = self._shown_extras.get(key, now)
        self._shown_extras[key] = now
        kinds: tuple[tuple[str, ServerEvent], ...] = (
            ("send_prompt_list_changed", PromptsListChanged()),
            ("send_resource_list_changed", ResourcesListChanged()))
        for i, (send, event) in enumerate(kinds):
            if before[i] == now[i]:
                continue
            for session, owner in list(self._sessions.values()):
                if owner == key:
                    await getattr(session, send)()
            await self.bus.publish_to(key, event)
