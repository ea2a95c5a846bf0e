"""A LangChain agent (a LangGraph graph) whose tools are governed by toolkeeper — runs offline.

    pip install 'toolkeeper[langchain]'
    python examples/langgraph_agent.py [DATABASE_URL]

The chat model is scripted, so the example needs no API key: it looks up an invoice (a
pure tool, allowed), then pays it (irreversible, high risk: the profile's gate says
``approve``). The tool pauses the graph with LangGraph's ``interrupt()``; a human decides,
and the application resumes with ``Command(resume={"type": "approve"})``. The tools record
that decision in toolkeeper as the application's approver — never the agent's credential —
and the resumed graph pays the invoice exactly once. Replace ``ScriptedModel()`` with a real
chat model (``init_chat_model("openai:gpt-5")``…) and nothing else changes.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from invoices import ALICE, open_gateway
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from toolkeeper.toolbox import InProcessBackend, Toolbox, build_tools


class ScriptedModel(BaseChatModel):
    """The model: find the invoice, pay it, then say what happened."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if not isinstance(last, ToolMessage):
            reply = AIMessage(content="", tool_calls=[
                {"name": "find_invoice", "args": {"number": "INV-7"}, "id": "call-1"}])
        elif last.name == "find_invoice":
            found = json.loads(str(last.content))
            reply = AIMessage(content="", tool_calls=[{
                "name": "pay_invoice", "id": "call-2",
                "args": {"number": found["number"], "amount": found["amount"]}}])
        else:
            reply = AIMessage(content=f"Done: {last.content}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def main(url: str) -> None:
    with open_gateway(url) as gw:
        toolbox = Toolbox(InProcessBackend(gw), agent="accounts-bot")
        # the human's decisions reach toolkeeper with the application's approver credential
        alice = ALICE
        agent = create_agent(ScriptedModel(),
                             build_tools(toolbox, framework="langchain", approver=alice),
                             checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "thread-1", "turn_group_id": "message-1"}}
        state = agent.invoke({"messages": [("user", "Pay invoice INV-7.")]}, config)
        while state.get("__interrupt__"):
            resume = {}
            for pause in state["__interrupt__"]:
                value = pause.value
                print(f"waiting for a human: {value['tool']} {json.dumps(value['arguments'])} "
                      f"({value['kind']}, approval {value.get('approval_id')})")
                resume[pause.id] = {"type": "approve"}  # your approval UI decides here
            state = agent.invoke(Command(resume=resume), config)
        print(f"agent: {state['messages'][-1].content}")
        paid = [o.call_id for o in gw.calls.list("default")
                if o.tool == "pay_invoice" and o.status == "succeeded"]
        print(f"pay_invoice executions: {len(paid)}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(f"sqlite:///{Path(tmp) / 'toolkeeper.db'}")
