"""The gateway every adapter's in-process tests use (``open_gateway``), and the scripted
model of the Pydantic AI tests.

``lookup`` is pure and allowed; ``transfer`` is irreversible and high risk, which profile
``p`` gates with ``approve`` — and with ``deny`` once an adjuster raises an amount over 1000
to critical; ``post_note`` is irreversible and allowed; ``send_email`` is previewed first
(its activation gates it with ``preview``); ``deploy`` requires confirmation. Executions
are counted. ``refund`` is activated but needs a scope the profile lacks (unavailable).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent as PaiAgent
from pydantic_ai import DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from toolkeeper import (
    Activation,
    Adjuster,
    Agent,
    Autonomy,
    Condition,
    Gate,
    Gateway,
    Profile,
    Risk,
    SideEffect,
    tool,
)
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.store import Store


def open_gateway(url: str, counts: dict[str, int]) -> Gateway:
    """The three tools registered, profile ``p``, agents ``bot`` and ``other-bot``."""

    @tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
    def lookup(city: str) -> dict[str, Any]:
        """Look up the weather of a city."""
        return {"city": city, "sky": "clear"}

    @tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.HIGH)
    def transfer(account: str, amount: int) -> dict[str, Any]:
        """Transfer money to an account."""
        counts["transfer"] = counts.get("transfer", 0) + 1
        return {"transferred": amount, "to": account}

    @tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
    def post_note(text: str) -> dict[str, Any]:
        """Post a note to the team channel."""
        counts["post_note"] = counts.get("post_note", 0) + 1
        return {"posted": text}

    def email_preview(to: str, body: str) -> str:
        return f"email {to}: {body[:40]}"

    @tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW, preview=email_preview)
    def send_email(to: str, body: str) -> dict[str, Any]:
        """Send an email."""
        counts["send_email"] = counts.get("send_email", 0) + 1
        return {"sent_to": to}

    @tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW, requires_confirmation=True)
    def deploy(service: str) -> dict[str, Any]:
        """Deploy a service."""
        counts["deploy"] = counts.get("deploy", 0) + 1
        return {"deployed": service}

    @tool(side_effect=SideEffect.COMPENSATABLE, risk=Risk.LOW, scopes=("refunds",))
    def refund(invoice: str) -> dict[str, Any]:
        """Refund an invoice (needs a scope profile p does not grant)."""
        return {"refunded": invoice}

    gw = Gateway(Store.open(url), settings=Settings(), factory=ProviderFactory())
    for fn in (lookup, transfer, post_note, send_email, deploy, refund):
        gw.registry.register(fn)
    gw.registry.put_profile(Profile(
        name="p", autonomy=Autonomy.GUARDED,
        activations=(*(Activation(tool=n) for n in ("lookup", "transfer", "post_note", "deploy",
                                                    "refund")),
                     Activation(tool="send_email", gates={"run": Gate.PREVIEW})),
        gates={Risk.HIGH: {Autonomy.GUARDED: Gate.APPROVE},
               Risk.CRITICAL: {Autonomy.GUARDED: Gate.DENY}},
        adjusters=(Adjuster(name="big", tools=("transfer",), raise_to=Risk.CRITICAL,
                            when=(Condition(arg="amount", op="gt", value=1000),)),)))
    gw.registry.put_agent(Agent(name="bot", profile="p"))
    gw.registry.put_agent(Agent(name="other-bot", profile="p"))
    return gw


@dataclass
class Script:
    """A model that makes ``calls`` (name, arguments, tool call id) on its first turn, then
    answers with what each call returned, as JSON ``{tool_call_id: content}``."""

    calls: Sequence[tuple[str, Any, str]]
    seen_tools: list[ToolDefinition] = field(default_factory=list)
    instructions: list[str | None] = field(default_factory=list)
    retries: list[RetryPromptPart] = field(default_factory=list)

    def respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen_tools[:] = info.function_tools
        self.instructions.append(info.instructions)
        last = messages[-1]
        parts = last.parts if isinstance(last, ModelRequest) else []
        self.retries += [p for p in parts if isinstance(p, RetryPromptPart)]
        returns = {p.tool_call_id: p.content for p in parts if isinstance(p, ToolReturnPart)}
        if returns or self.retries:
            return ModelResponse(parts=[TextPart(json.dumps(returns, default=str))])
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=cid)
                                    for name, args, cid in self.calls])

    def agent(self, toolset: Any) -> PaiAgent[None, str | DeferredToolRequests]:
        return PaiAgent(FunctionModel(self.respond), toolsets=[toolset],
                        output_type=[str, DeferredToolRequests])


def said(output: str) -> dict[str, Any]:
    """What the scripted model was told, by tool call id (ToolDenied text parsed too)."""
    told: dict[str, Any] = json.loads(output)
    return {k: json.loads(v) if isinstance(v, str) and v.startswith("{") else v
            for k, v in told.items()}
