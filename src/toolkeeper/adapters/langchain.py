"""LangChain / LangGraph adapter (SPEC §7 Library; issue 9): structured tools over an
agent's enabled tools, whose approval pause is LangGraph's ``interrupt()``.

    tools = build_tools(toolbox, framework="langchain", approver=alice)   # or build(toolbox)
    graph = StateGraph(MessagesState) … ToolNode(tools) … .compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t-1", "turn_group_id": "msg-42"}}
    out = graph.invoke({"messages": [("user", "pay invoice 7")]}, config)
    for pause in out.get("__interrupt__", ()):          # a gate stopped a call
        show_to_a_human(pause.value)                    # approval id, reason, preview…
    out = graph.invoke(Command(resume={"type": "approve"}), config)   # or "reject"

One LangChain tool per callable action, named as the MCP face names it, its
``args_schema`` the action's JSON Schema dict unchanged; toolkeeper's validate step judges
the arguments, so malformed ones come back to the model as ``invalid_arguments`` with JSON
pointers. A call stopped at an ``approve``/``confirm``/``preview`` gate calls
``langgraph.types.interrupt`` with what the human needs to decide. LangGraph re-runs the
tool from its start on resume, so each call carries an idempotency key derived from the
thread and the model's tool call id: the second pass reaches the same call record and the
same approval. The human's decision (the resume value) is recorded in toolkeeper with the
``approver`` the application built the tools with — its approver credential, never the
agent's — and the exact call is re-submitted under the same key, so it executes once. Any
stop (gate deny, rejection, rate limit…) is the tool's answer, a short JSON object with its
reason code, never an exception out of the graph.

Several gated calls in one model turn: run each tool call as its own task, as
``langchain.agents.create_agent`` does, so their pauses come together and each resumes by
its interrupt id; one ``ToolNode`` task over all of them pauses on one gate at a time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from toolkeeper.adapters.common import (
    GATED,
    call_key,
    missing_extra,
    output_of,
    pause_record,
    stop_message,
)
from toolkeeper.adapters.common import rejected as rejected_call
from toolkeeper.model.call import CallResult
from toolkeeper.toolbox import Approver, Toolbox, ToolInfo

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForToolRun,
        CallbackManagerForToolRun,
    )
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool
    from langgraph.types import interrupt
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(missing_extra("LangChain", "langchain")) from exc

FRAMEWORK = "langgraph"

TurnGroup = Callable[[RunnableConfig], str | None]


def configured_turn_group(config: RunnableConfig) -> str | None:
    """The default turn group: ``configurable["turn_group_id"]`` of the run (one per user
    message, given again on resume), else the Toolbox's own turn (``toolbox.turn()``)."""
    value = (config.get("configurable") or {}).get("turn_group_id")
    return str(value) if value is not None else None


def idempotency_key(config: RunnableConfig, tool_call_id: str | None) -> str | None:
    """One key per model tool call in a thread: the thread survives the interrupt, the
    resume and a replay from a checkpoint; the tool call id names the call."""
    thread = (config.get("configurable") or {}).get("thread_id")
    if thread is None or tool_call_id is None:
        return None
    return call_key(FRAMEWORK, thread, tool_call_id)



def answer(result: CallResult) -> str:
    """The tool's content for the model: a succeeded call's output, else its stop."""
    if not result.ok:
        return json.dumps(stop_message(result), default=str)
    output = output_of(result)
    return output if isinstance(output, str) else json.dumps(output, default=str)


def pause_value(result: CallResult, arguments: Any, turn_group_id: str | None) -> dict[str, Any]:
    """The ``interrupt()`` value: what the application shows the human who decides."""
    return {"toolkeeper": True, **pause_record(result, arguments, turn_group_id)}


@dataclass(frozen=True, slots=True)
class Decision:
    """The human's answer to a pause: the resume value, read."""

    approve: bool
    note: str | None = None
    edited: Any = None

    @classmethod
    def read(cls, value: Any) -> Decision:
        """``{"type": "approve"|"reject"|"edit", "message"?, "args"?}`` (the
        HumanInTheLoopMiddleware shape, one decision or ``{"decisions": [one]}``) or a
        bool. Anything else is a rejection."""
        if isinstance(value, bool):
            return cls(approve=value)
        if isinstance(value, Mapping) and isinstance(value.get("decisions"), list) \
                and len(value["decisions"]) == 1:
            value = value["decisions"][0]
        kind = value.get("type") if isinstance(value, Mapping) else None
        note = value.get("message") if isinstance(value, Mapping) else None
        if kind == "edit":
            edited = value.get("args", (value.get("edited_action") or {}).get("args"))
            return cls(approve=True, edited=edited)
        return cls(approve=kind == "approve", note=str(note) if note else None)


def rejected(pause: Mapping[str, Any], note: str | None) -> str:
    return json.dumps(rejected_call(pause.get("tool"), pause.get("action"), note))


class ToolkeeperTool(BaseTool):
    """One callable action of a :class:`Toolbox`'s agent as a LangChain tool."""

    toolbox: Toolbox
    target_tool: str
    target_action: str
    approver: Approver = None
    """Who records the human's decision in toolkeeper: the application's approver
    (a ``Principal`` in-process or an approver token), never the agent. Without one, the
    decision must be made in toolkeeper by other means (REST, CLI, UI) before resuming."""
    turn_group: TurnGroup = configured_turn_group

    def _to_args_and_kwargs(self, tool_input: str | dict[str, Any],
                            tool_call_id: str | None) -> tuple[tuple[str, ...], dict[str, Any]]:
        # the arguments go to toolkeeper whole (its validate step is the one judge), under
        # names no argument can shadow; the tool call id is the idempotency key's half
        return (), {"arguments": tool_input, "tool_call_id": tool_call_id}

    def _parse_input(self, tool_input: str | dict[str, Any],
                     tool_call_id: str | None) -> str | dict[str, Any]:
        return tool_input

    def _request(self, arguments: Any, tool_call_id: str | None,
                 config: RunnableConfig) -> dict[str, Any]:
        return {"tool": self.target_tool, "arguments": arguments, "action": self.target_action,
                "idempotency_key": idempotency_key(config, tool_call_id),
                "turn_group_id": self.turn_group(config) or self.toolbox.turn_group_id}

    def _run(self, *, arguments: Any, tool_call_id: str | None, config: RunnableConfig,
             run_manager: CallbackManagerForToolRun | None = None) -> str:
        request = self._request(arguments, tool_call_id, config)
        result = self.toolbox.execute_sync(**request)
        if result.status not in GATED:
            return answer(result)
        pause = pause_value(result, arguments, request["turn_group_id"])
        decision = Decision.read(interrupt(pause))
        if self.approver is not None:
            self.toolbox.backend.run_sync(record(self.toolbox, pause, decision, self.approver))
        if not decision.approve:
            return rejected(pause, decision.note)
        return answer(self.toolbox.execute_sync(**resumed(request, pause, decision)))

    async def _arun(self, *, arguments: Any, tool_call_id: str | None, config: RunnableConfig,
                    run_manager: AsyncCallbackManagerForToolRun | None = None) -> str:
        request = self._request(arguments, tool_call_id, config)
        result = await self.toolbox.execute(**request)
        if result.status not in GATED:
            return answer(result)
        pause = pause_value(result, arguments, request["turn_group_id"])
        decision = Decision.read(interrupt(pause))
        if self.approver is not None:
            await record(self.toolbox, pause, decision, self.approver)
        if not decision.approve:
            return rejected(pause, decision.note)
        return answer(await self.toolbox.execute(**resumed(request, pause, decision)))


def resumed(request: Mapping[str, Any], pause: Mapping[str, Any],
            decision: Decision) -> dict[str, Any]:
    """The same call again, now carrying its approval (or preview token), under the same
    key: the pipeline runs it once however often the node is re-run."""
    again = {**request, "approval_id": pause.get("approval_id"),
             "preview_token": pause.get("preview_token")}
    if decision.edited is not None:
        again["arguments"] = decision.edited
    return again


async def record(toolbox: Toolbox, pause: Mapping[str, Any], decision: Decision,
                 approver: Approver) -> None:
    """The human's decision, recorded in toolkeeper as ``approver``. A preview has nothing
    to record: its token already lets the reviewed call run, and rejecting it runs none."""
    approval_id = pause.get("approval_id")
    if approval_id is None:
        if decision.edited is not None:
            raise ValueError("a previewed call cannot be approved with other arguments")
        return
    if not decision.approve:
        await toolbox.deny(approval_id, by=approver, note=decision.note)
    elif pause["kind"] == "confirm" and decision.edited is None:
        await toolbox.confirm(approval_id, by=approver)
    else:
        await toolbox.approve(approval_id, by=approver, edited_arguments=decision.edited)


def tool_for(toolbox: Toolbox, info: ToolInfo, action: str, **options: Any) -> ToolkeeperTool:
    """One callable action as a LangChain tool: the MCP face's name, the JSON Schema as
    the pipeline validates it."""
    parts = [p for p in (info.description, info.action_descriptions.get(action, "")) if p]
    return ToolkeeperTool(name=info.names.get(action, info.name),
                          description=" — ".join(parts) or info.name,
                          args_schema=info.input_schemas[action], toolbox=toolbox,
                          target_tool=info.name, target_action=action, **options)


async def abuild(toolbox: Toolbox, **options: Any) -> list[ToolkeeperTool]:
    """:func:`build` from async code."""
    return [tool_for(toolbox, info, action, **options)
            for info in await toolbox.enabled() for action in info.actions]


def build(toolbox: Toolbox, **options: Any) -> list[ToolkeeperTool]:
    """The tools ``build_tools(…, framework="langchain")`` returns (for a ``ToolNode``, an
    agent factory, or ``model.bind_tools``). ``options``: ``approver`` (who records the
    human's decision; see :class:`ToolkeeperTool`), ``turn_group`` (``RunnableConfig`` →
    turn group id; default ``configurable["turn_group_id"]``)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return toolbox.backend.run_sync(abuild(toolbox, **options))
    # called from async code (a graph built inside a coroutine): block on a worker thread,
    # which has its own loop, rather than on this thread's running one
    with ThreadPoolExecutor(max_workers=1) as worker:
        return worker.submit(toolbox.backend.run_sync, abuild(toolbox, **options)).result()
