"""A REST app over a real SQLite gateway for the execution-side API tests: tools covering
every gate and outcome, three profiles (autonomy 3, 1, 0), a second tenant, and tokens
for every role, spoken to through :class:`tests.support.rest.RestClient`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from fastapi.testclient import TestClient

from tests.support.rest import RestClient
from toolkeeper import (
    ActionSpec,
    Activation,
    Agent,
    BaseTool,
    Compensation,
    Gateway,
    Limits,
    PreviewResult,
    Profile,
    RateLimit,
    Risk,
    SideEffect,
    ToolContext,
    ToolError,
    tool,
)
from toolkeeper.api import ApiSettings, create_app

_INVOICE = {"type": "object", "additionalProperties": False, "required": ["invoice", "amount"],
            "properties": {"invoice": {"type": "string"}, "amount": {"type": "integer"}}}


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def ping() -> str:
    """Answer pong (rate limited to one call a minute per agent)."""
    return "pong"


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def charge(invoice: str, amount: int) -> dict[str, Any]:
    """Charge an invoice (irreversible)."""
    return {"charged": invoice, "amount": amount}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def lost(x: int) -> int:
    """Fails after it may have acted: the outcome is unknown."""
    raise ToolError("upstream_error", "connection reset after send", may_have_executed=True)


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def declined(x: int) -> int:
    """Fails cleanly: the outcome is failed."""
    raise ToolError("tool_error", "card declined")


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def unreachable(x: int) -> int:
    """Its upstream never answers: a retryable failure (counted by the tool's health)."""
    raise ToolError("upstream_error", "upstream timed out", retryable=True)


class Bank(BaseTool):
    """pay (high, compensatable by refund), refund (low, idempotent), wire (critical)."""

    tool_name = "bank"
    actions: ClassVar[dict[str, ActionSpec]] = {
        "pay": ActionSpec(input_schema=_INVOICE, side_effect=SideEffect.COMPENSATABLE),
        "refund": ActionSpec(input_schema=_INVOICE, side_effect=SideEffect.IDEMPOTENT),
        "wire": ActionSpec(input_schema=_INVOICE, side_effect=SideEffect.IRREVERSIBLE),
    }
    risk_default = Risk.LOW
    risk_map: ClassVar[dict[str, Risk]] = {"pay": Risk.HIGH, "wire": Risk.CRITICAL}
    compensation: ClassVar[dict[str, Compensation]] = {"pay": Compensation(
        action="refund", arguments={"invoice": "arguments.invoice", "amount": "result.amount"})}
    scopes_required = ("bank",)

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        return {"done": action, "invoice": request["invoice"], "amount": request["amount"]}


class Email(BaseTool):
    """Send an email (irreversible, medium) with a side-effect-free preview."""

    tool_name = "email"
    actions: ClassVar[dict[str, ActionSpec]] = {"send": ActionSpec(input_schema={
        "type": "object", "additionalProperties": False, "required": ["to"],
        "properties": {"to": {"type": "string"}}})}
    risk_default = Risk.MEDIUM

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        return {"sent": request["to"]}

    async def preview(self, action: str, request: dict[str, Any],
                      context: ToolContext) -> PreviewResult:
        return PreviewResult(summary=f"email to {request['to']}", data=dict(request))


@dataclass(kw_only=True)
class Gate:
    """Holds a tool inside its execution until the test releases it (bounded waits)."""

    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    runs: int = 0

    def tool(self) -> Any:
        @tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
        def hold(job: str) -> str:
            """Irreversible; blocks until released (at most 10 s)."""
            self.runs += 1
            self.started.set()
            self.release.wait(10)
            return job

        return hold


TOOLS: tuple[Any, ...] = (add, ping, charge, lost, declined, Bank, Email)
_RATE = Limits(rate=(RateLimit(limit=1, window_s=60, per="agent_tool"),))
_TOKENS = {"admin": ("default", "admin", None), "operator": ("default", "operator", None),
           "approver": ("default", "approver", None), "bot": ("default", "agent", "bot"),
           "other-bot": ("default", "agent", "other-bot"), "sup": ("default", "agent", "sup"),
           "intern": ("default", "agent", "intern"), "acme_admin": ("acme", "admin", None),
           "acme_bot": ("acme", "agent", "acme-bot")}


def add_config(directory: Path, settings: str) -> Path:
    """``toolkeeper.yaml`` in ``directory``: agent ``bot`` may call :func:`add`, under the
    ``settings`` given as a YAML flow mapping (e.g. ``{recent_calls_max: 2}``)."""
    config = directory / "toolkeeper.yaml"
    config.write_text(f"version: 1\nsettings: {settings}\n"
                      "tools:\n  - native: tests.api.exec_fixtures:add\nprofiles:\n"
                      "  - {name: p, autonomy: 3, activations: [{tool: add}]}\n"
                      "agents:\n  - {name: bot, profile: p}\n", encoding="utf-8")
    return config


def _profiles(names: list[str]) -> list[Profile]:
    acts = tuple(Activation(tool=n, limits=_RATE if n == "ping" else None) for n in names)
    return [Profile(name="auto", autonomy=3, scopes=("bank",), activations=acts),
            Profile(name="supervised", autonomy=1, scopes=("bank",), activations=acts),
            Profile(name="manual", autonomy=0, scopes=("bank",), activations=acts),
            Profile(name="acme", tenant_id="acme", autonomy=3, scopes=("bank",),
                    activations=tuple(Activation(tool=n) for n in names))]


def build_gateway(url: str, hold: Gate, **settings: Any) -> Gateway:
    """Tools registered per tenant and published; agents bot/other-bot (autonomy 3),
    sup (1), intern (0) in ``default``, acme-bot (3) in ``acme``; ``settings`` as
    :meth:`Gateway.open` takes them."""
    gw = Gateway.open(url, **settings)
    tools = [*TOOLS, hold.tool()]
    names = [t.tool_name for t in tools]
    for t in tools:
        gw.registry.register(t)
    for profile in _profiles(names):
        gw.registry.put_profile(profile)
    for name, profile in (("bot", "auto"), ("other-bot", "auto"), ("sup", "supervised"),
                          ("intern", "manual")):
        gw.registry.put_agent(Agent(name=name, profile=profile))
    gw.registry.put_agent(Agent(name="acme-bot", profile="acme", tenant_id="acme"))
    return gw


@contextmanager
def api_for(where: Path | str, settings: ApiSettings | None = None, *,
            hold: Gate | None = None, **gateway_settings: Any) -> Iterator[RestClient]:
    """The app over a fresh gateway: ``where`` is a database URL, or a directory for
    ``sqlite:///{where}/tk.db``; ``hold`` is the gate of the ``hold`` tool, for a test
    that holds a call inside its execution. Closed on exit."""
    hold = hold or Gate()
    gw = build_gateway((where if isinstance(where, str) else f"sqlite:///{where}/tk.db"), hold,
                       **gateway_settings)
    try:
        tokens = {who: gw.store.tokens.create(tenant_id=t, role=r, agent=a)[1]
                  for who, (t, r, a) in _TOKENS.items()}
        with TestClient(create_app(gw, settings), raise_server_exceptions=False) as client:
            yield RestClient(gw=gw, client=client, tokens=tokens)
    finally:
        hold.release.set()
        gw.close()
