"""A Strands agent whose tools are governed by a toolkeeper server — runs without a model key.

    toolkeeper serve --demo                    # elsewhere: prints the demo tokens once
    pip install 'toolkeeper-client[strands]'   # here: no server packages, Strands' own mcp
    python examples/strands_agent.py http://127.0.0.1:8700 AGENT_TOKEN APPROVER_TOKEN

The model is scripted (a small ``strands.models.Model``) so the example needs no API key:
it looks up invoice INV-1002 (a pure tool, allowed), then pays it (high risk: the demo
profile's gate asks for a confirmation). The run stops with a Strands interrupt; a human
— the approver's token, never the agent's — confirms it through ``resolve_interrupts_sync``,
and the resumed run pays the invoice exactly once. Replace ``Scripted()`` with a real model
(``BedrockModel(...)``, ``OpenAIModel(...)``…) and nothing else changes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator
from typing import Any

from strands import Agent
from strands.models import Model

from toolkeeper.adapters.strands import pending_approvals, resolve_interrupts_sync
from toolkeeper.client import Client
from toolkeeper.toolbox import build_tools


class Scripted(Model):
    """The model: find the invoice, pay what is open, then say what happened."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def step(messages: Any) -> tuple[str, dict[str, Any], str] | str:
        results = [c["toolResult"] for c in messages[-1]["content"] if "toolResult" in c]
        if not results:
            return "lookup_invoice", {"invoice_id": "INV-1002"}, "call-1"
        said = results[-1]["content"][0]["text"]
        if results[-1]["toolUseId"] == "call-1":
            found = json.loads(said)
            return "pay_invoice", {"invoice_id": found["id"],
                                   "amount": found["amount"] - found["paid"]}, "call-2"
        return f"Done: {said}"

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None,
                     **kwargs: Any) -> AsyncGenerator[Any, None]:
        step = self.step(messages)
        yield {"messageStart": {"role": "assistant"}}
        if isinstance(step, str):
            yield {"contentBlockDelta": {"delta": {"text": step}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        name, arguments, use_id = step
        yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": use_id, "name": name}}}}
        yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


def main(url: str, agent_token: str, approver_token: str) -> None:
    with Client(url, agent_token, timeout=10) as tk:
        toolbox = tk.toolbox("billing-bot")
        agent = Agent(model=Scripted(), tools=build_tools(toolbox, framework="strands"),
                      callback_handler=None)
        result = agent("Pay invoice INV-1002.")
        while result.stop_reason == "interrupt":
            decisions = {}
            for interrupt_id, ask in pending_approvals(result).items():
                print(f"waiting for a human: {ask['tool']} {json.dumps(ask['arguments'])} "
                      f"({ask['kind']}, approval {ask.get('approval_id')})")
                decisions[interrupt_id] = True  # your approval UI decides here
            # the human's decision reaches toolkeeper with the approver's credential
            result = agent(resolve_interrupts_sync(toolbox, result, decisions,
                                                   approver=approver_token))
        print(f"agent: {str(result).strip()}")
    with Client(url, approver_token, timeout=10) as person:
        paid = [c for c in person.calls.list() if c.tool == "pay_invoice"
                and c.status == "succeeded"]
    print(f"pay_invoice executions: {len(paid)}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
