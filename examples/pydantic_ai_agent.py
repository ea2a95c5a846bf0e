"""A Pydantic AI agent whose tools are governed by toolkeeper — runs offline.

    pip install 'toolkeeper[pydantic-ai]'
    python examples/pydantic_ai_agent.py [DATABASE_URL]

The model is scripted (Pydantic AI's ``FunctionModel``) so the example needs no API key: it
looks up an invoice (a pure tool, allowed), then pays it (irreversible, high risk: the
profile's gate says ``approve``). The run pauses with ``DeferredToolRequests``; a human
approver — the application's credential, never the agent's — approves it through
``resolve_deferred``, and the resumed run pays the invoice exactly once. Replace
``FunctionModel(scripted)`` with a real model (``"openai:gpt-5"``…) and nothing else changes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from invoices import ALICE, open_gateway
from pydantic_ai import Agent as PaiAgent
from pydantic_ai import DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolkeeper.adapters.pydantic_ai import resolve_deferred
from toolkeeper.toolbox import InProcessBackend, Toolbox, build_tools


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: find the invoice, pay it, then say what happened."""
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] \
        if isinstance(last, ModelRequest) else []
    if not returns:
        return ModelResponse(parts=[ToolCallPart("find_invoice", {"number": "INV-7"})])
    if returns[0].tool_name == "find_invoice":
        found = returns[0].content
        return ModelResponse(parts=[ToolCallPart(
            "pay_invoice", {"number": found["number"], "amount": found["amount"]})])
    return ModelResponse(parts=[TextPart(f"Done: {json.dumps(returns[0].content)}")])


async def main(url: str) -> None:
    with open_gateway(url) as gw:
        toolbox = Toolbox(InProcessBackend(gw), agent="accounts-bot")
        agent = PaiAgent(FunctionModel(scripted),
                         toolsets=[build_tools(toolbox, framework="pydantic_ai")],
                         output_type=[str, DeferredToolRequests])
        run = await agent.run("Pay invoice INV-7.")
        while isinstance(run.output, DeferredToolRequests):
            decisions = {}
            for call in run.output.approvals:
                meta = run.output.metadata[call.tool_call_id]
                print(f"waiting for a human: {meta['tool']} {json.dumps(meta['arguments'])} "
                      f"({meta['kind']}, approval {meta.get('approval_id')})")
                decisions[call.tool_call_id] = True  # your approval UI decides here
            # the human's decision reaches toolkeeper with the approver's credential
            alice = ALICE
            results = await resolve_deferred(toolbox, run.output, decisions, approver=alice)
            run = await agent.run(message_history=run.all_messages(),
                                  deferred_tool_results=results)
        print(f"agent: {run.output}")
        paid = [o.call_id for o in gw.calls.list("default")
                if o.tool == "pay_invoice" and o.status == "succeeded"]
        print(f"pay_invoice executions: {len(paid)}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(f"sqlite:///{Path(tmp) / 'toolkeeper.db'}"))
