"""A real ``/mcp`` over a real gateway: the REST app served by uvicorn on a loopback port
in a thread, tools covering every gate, and a token per agent. Driven by the official SDK
client in both protocol eras (helpers here open one per era)."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio
import httpx2
import mcp_types as types
import uvicorn
from mcp.client.streamable_http import streamable_http_client

from mcp import Client
from tests.support.waiting import wait_until
from toolkeeper import (
    ActionSpec,
    Activation,
    Agent,
    BaseTool,
    ExecutionMeta,
    Gateway,
    Profile,
    Risk,
    SideEffect,
    ToolContext,
    ToolError,
    tool,
)
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.server import mcp_hosts

ERAS = ("legacy", "2026-07-28")
"""``mode`` of the SDK client: 2025-11-25 with ``initialize``, or the stateless era."""
_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["invoice", "amount"],
           "properties": {"invoice": {"type": "string"}, "amount": {"type": "integer"}}}


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.HIGH)
def pay(invoice: str, amount: int) -> dict[str, Any]:
    """Pay an invoice (high risk: confirm at autonomy 1, approve at autonomy 0)."""
    return {"paid": invoice, "amount": amount}


class Bank(BaseTool):
    """Three actions: one MCP tool each (``bank_refund``…); ``wire`` needs scope ``wire``."""

    tool_name = "bank"
    actions: ClassVar[dict[str, ActionSpec]] = {
        "refund": ActionSpec(input_schema=_SCHEMA, side_effect=SideEffect.IDEMPOTENT,
                             output_schema={"type": "object", "properties": {
                                 "done": {"type": "string"}}}),
        "hold": ActionSpec(input_schema=_SCHEMA, side_effect=SideEffect.COMPENSATABLE),
        "wire": ActionSpec(input_schema=_SCHEMA, side_effect=SideEffect.IRREVERSIBLE,
                           scopes_required=("wire",)),
    }
    risk_default = Risk.LOW

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        return {"done": action, "invoice": request["invoice"]}


@dataclass(kw_only=True)
class McpServer:
    gw: Gateway
    url: str
    """``http://127.0.0.1:<port>/mcp``."""
    base: str
    tokens: dict[str, str]


def build_gateway(url: str, config: Any = None) -> tuple[Gateway, dict[str, str]]:
    """Agents: ``bot`` (autonomy 3, every tool), ``sup`` (1: pay asks to confirm),
    ``intern`` (0: pay needs an approver), ``reader`` (add only), ``acme-bot`` (tenant acme);
    tokens for each and for an admin."""
    gw = Gateway.open(url, config=config)
    for t in (add, pay, Bank):
        gw.registry.register(t)
    everything = tuple(Activation(tool=n) for n in ("add", "pay", "bank"))
    for name, autonomy in (("auto", 3), ("supervised", 1), ("manual", 0)):
        gw.registry.put_profile(Profile(name=name, autonomy=autonomy, activations=everything),
                                replace=True)
    gw.registry.put_profile(Profile(name="reading", autonomy=3,
                                    activations=(Activation(tool="add"),)), replace=True)
    gw.registry.put_profile(Profile(name="acme", tenant_id="acme", autonomy=3,
                                    activations=everything), replace=True)
    agents = {"bot": "auto", "sup": "supervised", "intern": "manual", "reader": "reading"}
    for agent, profile in agents.items():
        gw.registry.put_agent(Agent(name=agent, profile=profile), replace=True)
    gw.registry.put_agent(Agent(name="acme-bot", profile="acme", tenant_id="acme"), replace=True)
    tokens = {a: gw.store.tokens.create(tenant_id="default", role="agent", agent=a)[1]
              for a in agents}
    tokens["acme-bot"] = gw.store.tokens.create(tenant_id="acme", role="agent",
                                                agent="acme-bot")[1]
    tokens["admin"] = gw.store.tokens.create(tenant_id="default", role="admin")[1]
    return gw, tokens


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as(app: Any, token: str) -> Any:
    """``app`` with every request carrying ``token`` (for peers that cannot send headers)."""
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k != b"authorization"]
            scope = {**scope, "headers": [*headers, (b"authorization",
                                                     f"Bearer {token}".encode())]}
        await app(scope, receive, send)
    return wrapped


@contextmanager
def serving(url: str, *, max_body_bytes: int = 200_000, extra: tuple[Any, ...] = (),
            acting_as: str | None = None, config: Any = None,
            around: Callable[[Gateway, Any], Any] | None = None,
            mcp_max_sessions: int = 10_000) -> Iterator[McpServer]:
    """The app over a fresh gateway, served on a free loopback port until the block ends.
    ``extra`` tools are registered and enabled for ``bot``; with ``acting_as``, every
    request carries that agent's token; ``around(gw, app)`` wraps the ASGI app; ``config``
    is a toolkeeper.yaml (e.g. ``servers:``) the gateway opens with."""
    gw, tokens = build_gateway(url, config)
    for t in extra:
        gw.registry.register(t)
    if extra:
        names = ("add", "pay", "bank", *(t.tool_name for t in extra))
        gw.registry.put_profile(Profile(name="auto", autonomy=3, activations=tuple(
            Activation(tool=n) for n in names)), replace=True)
    port = _free_port()
    app: Any = create_app(gw, ApiSettings(max_body_bytes=max_body_bytes,
                                          mcp_allowed_hosts=mcp_hosts("127.0.0.1"),
                                          mcp_max_sessions=mcp_max_sessions))
    if acting_as is not None:
        app = _as(app, tokens[acting_as])
    if around is not None:
        app = around(gw, app)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on",
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        def started() -> bool:
            assert thread.is_alive(), "the server thread died"
            return bool(server.started)

        wait_until(started, timeout=20, what="uvicorn started")
        base = f"http://127.0.0.1:{port}"
        yield McpServer(gw=gw, url=f"{base}/mcp", base=base, tokens=tokens)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        gw.close()


MINTED = re.compile(r"\b(ap|pv)_[0-9A-Za-z_-]{6,}|(?<=\"call_id\": \")[0-9a-f]+")
"""Ids minted per call (approvals, previews, call ids), which two answers may differ in."""


@contextmanager
def serving_endpoint(url: str, **kwargs: Any) -> Iterator[tuple[McpServer, Any]]:
    """:func:`serving`, with the app's ``/mcp`` endpoint beside it (to turn its lean path
    on and off: the differential tests)."""
    held: list[Any] = []

    def keep(gw: Gateway, app: Any) -> Any:
        held.append(app.state.mcp)
        return app
    with serving(url, around=keep, **kwargs) as s:
        yield s, held[0]


@asynccontextmanager
async def connect(srv: McpServer, who: str, era: str, **kwargs: Any) -> AsyncIterator[Client]:
    """The official SDK client as ``who`` in ``era`` (``legacy`` or ``2026-07-28``)."""
    mode = "auto" if era != "legacy" else "legacy"  # auto discovers, then picks 2026-07-28
    headers = {"Authorization": f"Bearer {srv.tokens[who]}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(20.0)) as http, \
            Client(streamable_http_client(srv.url, http_client=http), mode=mode,
                   read_timeout_seconds=20, **kwargs) as client:
        expected = "2025-11-25" if era == "legacy" else era
        assert client.protocol_version == expected, client.protocol_version
        yield client


def confirm_with(answer: str | None) -> Any:
    """An elicitation callback that answers every confirmation the same way."""
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action="decline")
    return callback


# -- fixtures the conformance suite's server scenarios call by name --------------------
# An upstream's own behaviour (content, progress, logging, elicitation, prompts, test://
# resources...) is conformance_upstream.py, which the conformance run fronts; here only
# what is the gateway's own.

CONFORMANCE_TOOLS: tuple[Any, ...] = ()


# -- the tasks extension's fixtures (tasks-* scenarios, SEP-2663) --------------------------

def _task_tool(name: str, doc: str, support: str, schema: dict[str, Any],
               run: Callable[[dict[str, Any]], Any]) -> type[BaseTool]:
    async def execute(self: Any, action: str, request: dict[str, Any],
                      context: ToolContext) -> Any:
        return await run(request)
    return type(name, (BaseTool,), {
        "__doc__": doc, "tool_name": name, "description": doc,
        "actions": {"run": ActionSpec(input_schema={"type": "object", **schema})},
        "risk_default": Risk.LOW, "side_effect": SideEffect.PURE,
        "execution": ExecutionMeta(is_pure=True, timeout_s=120.0, task_support=support),
        "execute": execute})


async def _slow(request: dict[str, Any]) -> str:
    await anyio.sleep(min(float(request.get("seconds", 0)), 90.0))
    return f"computed {request.get('label', '')}".strip()


async def _failing(request: dict[str, Any]) -> str:
    await anyio.sleep(0.2)
    raise ToolError("tool_error", "failing_job always fails")


async def _broken(request: dict[str, Any]) -> str:
    raise ToolError("internal_error", "protocol_error_job: the gateway's own failure")


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def greet(name: str) -> str:
    """Conformance fixture (sync only): greets."""
    return f"Hello, {name}!"


@tool(side_effect=SideEffect.IRREVERSIBLE, inline=True, risk=Risk.LOW,
      requires_confirmation=True)
def confirm_delete(filename: str) -> str:
    """Conformance fixture: deletes after the user confirms (a confirm gate)."""
    return f"deleted {filename}"


SlowCompute = _task_tool(
    "slow_compute", "Conformance fixture: sleeps `seconds`, then answers (task-supporting).",
    "optional", {"properties": {"seconds": {"type": "number", "minimum": 0},
                                "label": {"type": "string"}}}, _slow)
FailingJob = _task_tool("failing_job", "Conformance fixture: fails (task required).",
                        "required", {}, _failing)
ProtocolErrorJob = _task_tool(
    "protocol_error_job", "Conformance fixture: fails as the gateway itself (task).",
    "optional", {}, _broken)
CONFORMANCE_TOOLS += (greet, confirm_delete, SlowCompute, FailingJob, ProtocolErrorJob)
