"""A Google ADK agent whose tools are governed by toolkeeper — runs offline.

    pip install 'toolkeeper[google-adk]'
    python examples/google_adk_agent.py [DATABASE_URL]

The model is scripted (a small ``BaseLlm``) so the example needs no API key: it looks up an
invoice (a pure tool, allowed), then pays it (irreversible, high risk: the profile's gate
says ``approve``). The tool asks for ADK's tool confirmation: ADK emits an
``adk_request_confirmation`` call and the turn ends. A human approver — the application's
credential, never the agent's — approves it through ``resolve_confirmations``, whose answer
resumes the run, and the invoice is paid exactly once. Replace ``Scripted()`` with a real model
(``model="gemini-flash-latest"``…) and nothing else changes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from invoices import ALICE, open_gateway

from toolkeeper import Gateway
from toolkeeper.adapters.google_adk import pending_confirmations, resolve_confirmations
from toolkeeper.toolbox import InProcessBackend, Toolbox, build_tools


class Scripted(BaseLlm):
    """The model: find the invoice, pay it, then say what happened."""

    model: str = "scripted"

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> Any:
        last = llm_request.contents[-1].parts or []
        answers = [p.function_response for p in last if p.function_response]
        if not answers:
            part = types.Part(function_call=types.FunctionCall(
                name="find_invoice", args={"number": "INV-7"}, id="c-1"))
        elif answers[-1].name == "find_invoice":
            found = answers[-1].response or {}
            part = types.Part(function_call=types.FunctionCall(
                name="pay_invoice", args={"number": found["number"],
                                          "amount": found["amount"]}, id="c-2"))
        else:
            part = types.Part(text=f"Done: {json.dumps(answers[-1].response)}")
        yield LlmResponse(content=types.Content(role="model", parts=[part]),
                          usage_metadata=types.GenerateContentResponseUsageMetadata(
                              prompt_token_count=0, candidates_token_count=0))


async def main(gw: Gateway, toolbox: Toolbox) -> None:
    tools = build_tools(toolbox, framework="google_adk")  # or: await build_async(toolbox)
    agent = LlmAgent(name="accounts_bot", model=Scripted(), tools=tools)
    runner = InMemoryRunner(agent=agent, app_name="accounts")
    session = await runner.session_service.create_session(app_name="accounts", user_id="u")
    message: types.Content | None = types.Content(
        role="user", parts=[types.Part(text="Pay invoice INV-7.")])
    while message is not None:
        async for event in runner.run_async(user_id="u", session_id=session.id,
                                            new_message=message):
            for part in (event.content.parts or []) if event.content else []:
                if part.text:
                    print(f"agent: {part.text}")
        paused = await runner.session_service.get_session(
            app_name="accounts", user_id="u", session_id=session.id)
        asks = pending_confirmations(paused) if paused else {}
        for ask in asks.values():
            print(f"waiting for a human: {ask['tool']} {json.dumps(ask['arguments'])} "
                  f"({ask['kind']}, approval {ask.get('approval_id')})")
        decisions = {call_id: True for call_id in asks}  # your approval UI decides here
        # the human's decision reaches toolkeeper with the approver's credential
        message = await resolve_confirmations(toolbox, paused, decisions, approver=ALICE) \
            if paused and decisions else None
    paid = [o.call_id for o in gw.calls.list("default")
            if o.tool == "pay_invoice" and o.status == "succeeded"]
    print(f"pay_invoice executions: {len(paid)}")


def run(url: str) -> None:
    with open_gateway(url) as gw:
        asyncio.run(main(gw, Toolbox(InProcessBackend(gw), agent="accounts-bot")))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        run(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            run(f"sqlite:///{Path(tmp) / 'toolkeeper.db'}")
