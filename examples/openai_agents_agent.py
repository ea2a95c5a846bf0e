"""An OpenAI Agents SDK agent whose tools are governed by toolkeeper — runs offline.

    pip install 'toolkeeper[openai-agents]'
    python examples/openai_agents_agent.py [DATABASE_URL]

The model is scripted (a small ``agents.Model``) so the example needs no API key: it looks
up an invoice (a pure tool, allowed), then pays it (irreversible, high risk: the profile's
gate says ``approve``). The run pauses with an interruption; the paused run is kept as JSON
(``RunState.to_json()``), a human approver — the application's credential, never the
agent's — approves it through ``resolve_interruptions``, and the resumed run pays the
invoice exactly once. Replace ``Scripted()`` with a real model (``model="gpt-5"``…) and
nothing else changes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agents import Agent as SdkAgent
from agents import FunctionTool, Model, ModelResponse, Runner, RunState, Usage, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call
from invoices import ALICE, open_gateway

from toolkeeper import (
    Gateway,
)
from toolkeeper.adapters.openai_agents import pending_approvals, resolve_interruptions
from toolkeeper.toolbox import InProcessBackend, Toolbox, build_tools


class Scripted(Model):
    """The model: find the invoice, pay it, then say what happened."""

    @staticmethod
    def step(input: Any) -> list[Any]:
        outputs = [i for i in input if isinstance(i, dict)
                   and i.get("type") == "function_call_output"] if isinstance(input, list) else []
        if not outputs:
            return [function_call("find_invoice", {"number": "INV-7"}, call_id="call-1")]
        if outputs[-1]["call_id"] == "call-1":
            found = json.loads(outputs[-1]["output"])
            return [function_call("pay_invoice", {"number": found["number"],
                                                  "amount": found["amount"]}, call_id="call-2")]
        return [assistant_message(f"Done: {outputs[-1]['output']}")]

    async def get_response(self, system_instructions: str | None, input: Any,
                           *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=self.step(input), usage=Usage(), response_id=None)

    async def stream_response(self, system_instructions: str | None, input: Any,
                              *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        once = ScriptedModel([self.step(input)])
        async for event in once.stream_response(system_instructions, input, *args, **kwargs):
            yield event


async def main(gw: Gateway, tools: list[FunctionTool]) -> None:
    agent = SdkAgent(name="accounts-bot", model=Scripted(), tools=tools)
    result = await Runner.run(agent, "Pay invoice INV-7.", context={})
    while result.interruptions:
        stored = json.dumps(result.to_state().to_json())  # keep the paused run anywhere
        state = await RunState.from_json(agent, json.loads(stored))
        decisions = {}
        for call_id, ask in pending_approvals(state).items():
            print(f"waiting for a human: {ask['tool']} {json.dumps(ask['arguments'])} "
                  f"({ask['kind']}, approval {ask.get('approval_id')})")
            decisions[call_id] = True  # your approval UI decides here
        # the human's decision reaches toolkeeper with the approver's credential
        alice = ALICE
        result = await Runner.run(
            agent, await resolve_interruptions(state, decisions, approver=alice))
    print(f"agent: {result.final_output}")
    paid = [o.call_id for o in gw.calls.list("default")
            if o.tool == "pay_invoice" and o.status == "succeeded"]
    print(f"pay_invoice executions: {len(paid)}")


def run(url: str) -> None:
    set_tracing_disabled(True)  # offline: no trace upload
    with open_gateway(url) as gw:
        toolbox = Toolbox(InProcessBackend(gw), agent="accounts-bot")
        tools = build_tools(toolbox, framework="openai_agents")  # or: await build_async(…)
        asyncio.run(main(gw, tools))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        run(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            run(f"sqlite:///{Path(tmp) / 'toolkeeper.db'}")
