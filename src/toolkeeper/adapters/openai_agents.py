"""OpenAI Agents SDK adapter (SPEC §7 Library; issue 9): function tools over an agent's
enabled tools whose approval need comes from toolkeeper's gate.

    tools = build_tools(toolbox, framework="openai_agents")      # or build(toolbox)
    agent = agents.Agent(name="bot", model=model, tools=tools)
    result = await Runner.run(agent, "pay invoice 7", context={})
    while result.interruptions:                                  # a gate stopped a call
        for ask in pending_approvals(result):                   # show the human
            ...
        state = await resolve_interruptions(result, {call_id: True}, approver=alice)
        result = await Runner.run(agent, state)

One :class:`~agents.FunctionTool` per callable action, named as the MCP face names it, with
the action's JSON Schema unchanged (``strict_json_schema=False``). ``needs_approval`` asks
toolkeeper's gate without running anything (``Toolbox.check``), under an idempotency key
derived from the run and the tool call id, so the SDK's tool input guardrails — which run
after ``needs_approval`` — see the call before it executes. A call that the gate stops with
``approve``/``confirm``/``preview`` pauses the run (an SDK interruption) and its approval is
remembered in the run context under ``"toolkeeper"`` — a JSON mapping, so it survives
``RunState.to_json()``/``from_json``. A call the gate allows is run by the SDK's invocation
(after its guardrails) with that key; a refusal is remembered and comes back from the
invocation as a short structured message with its reason code. The human's decision reaches
toolkeeper through :func:`resolve_interruptions` with the application's approver credential
— never the agent's own — and the resumed run re-submits the approved call, which runs once.

The run context must be a mutable mapping (``context={}``) or ``None`` (the adapter then
installs one); the run id in it is the turn group and names the idempotency keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from toolkeeper.adapters.common import (
    GATED,
    call_key,
    missing_extra,
    output_of,
    pause_record,
    rejected,
    stop_message,
)
from toolkeeper.errors import UserError
from toolkeeper.model.call import CallResult
from toolkeeper.toolbox import Approver, Toolbox, ToolInfo, new_turn_group_id

try:
    import agents  # noqa: F401  (the extra: named in the message below when missing)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(missing_extra("OpenAI Agents", "openai-agents")) from exc
from agents import Agent, FunctionTool, RunContextWrapper, RunResult, RunState, ToolApprovalItem
from agents.tool_context import ToolContext

FRAMEWORK = "openai-agents"
CONTEXT_KEY = "toolkeeper"
"""The run context's key under which the adapter keeps the run id and pending approvals."""

TurnGroup = Callable[[RunContextWrapper[Any]], str | None]


@dataclass(frozen=True, slots=True)
class Reject:
    """A human's rejection, with an optional note the model is told."""

    note: str | None = None


Decision = bool | Reject
"""``True`` approves, ``False`` or :class:`Reject` rejects."""


def memory(ctx: RunContextWrapper[Any]) -> dict[str, Any]:
    """The adapter's part of the run context: ``{"run_id": …, "pending": {call_id: …},
    "refused": {call_id: message}}``,
    created on first use (plain JSON, so it round-trips through ``RunState.to_json``)."""
    if ctx.context is None:
        ctx.context = {}
    context = ctx.context
    if not isinstance(context, MutableMapping):
        raise UserError("the toolkeeper tools need the run context to be a mapping "
                        "(Runner.run(..., context={})) to remember approvals across a pause")
    mine: dict[str, Any] = context.setdefault(CONTEXT_KEY, {})
    mine.setdefault("run_id", new_turn_group_id())
    mine.setdefault("pending", {})
    mine.setdefault("refused", {})
    return mine


def idempotency_key(ctx: RunContextWrapper[Any], call_id: str) -> str:
    """One key per model tool call: the run id lives in the run context (it survives a
    resume from ``RunState``), the tool call id names the call."""
    return call_key(FRAMEWORK, memory(ctx)["run_id"], call_id)


def run_turn_group(ctx: RunContextWrapper[Any]) -> str | None:
    """The default turn group: the run (its id in the run context)."""
    run_id: str = memory(ctx)["run_id"]
    return run_id




def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _arguments(args_json: str) -> Any:
    """The model's arguments; text that is not JSON is passed on as is, for the pipeline's
    validate step (the one home of argument rules) to refuse with JSON pointers."""
    try:
        return json.loads(args_json)
    except ValueError:
        return args_json


class ToolkeeperCall:
    """The toolkeeper call behind one SDK function tool: its gate and its invocation."""

    def __init__(self, toolbox: Toolbox, tool: str, action: str, turn_group: TurnGroup) -> None:
        self.toolbox = toolbox
        self.tool = tool
        self.action = action
        self._turn_group = turn_group

    async def needs_approval(self, ctx: RunContextWrapper[Any], arguments: dict[str, Any],
                             call_id: str) -> bool:
        """Ask the gate, running nothing; pause the run when it asks a human."""
        turn_group_id = self._turn_group(ctx)
        result = await self.toolbox.check(
            self.tool, arguments, action=self.action,
            idempotency_key=idempotency_key(ctx, call_id), turn_group_id=turn_group_id)
        if result is not None and result.status in GATED:
            memory(ctx)["pending"][call_id] = pending_record(result, arguments, turn_group_id)
            return True
        if result is not None and not result.ok:  # told to the model by the invocation
            memory(ctx)["refused"][call_id] = stop_message(result)
        # allowed (or already ran: the invocation re-reads its outcome under the same key)
        return False

    async def invoke(self, ctx: ToolContext[Any], args_json: str) -> str:
        """Run the call under its key (once approved, if it was gated), after the SDK's
        tool input guardrails; a call the gate refused is told, not run."""
        call_id = ctx.tool_call_id
        refused = memory(ctx)["refused"].pop(call_id, None)
        if refused is not None:
            return _text(refused)
        pending: dict[str, Any] = memory(ctx)["pending"].get(call_id, {})
        result = await self.toolbox.execute(
            self.tool, _arguments(args_json), action=self.action,
            idempotency_key=idempotency_key(ctx, call_id),
            turn_group_id=pending.get("turn_group_id") or self._turn_group(ctx),
            approval_id=pending.get("approval_id"), preview_token=pending.get("preview_token"))
        if result.ok:
            return _text(output_of(result))
        return _text(stop_message(result))


def pending_record(result: CallResult, arguments: Any,
                   turn_group_id: str | None) -> dict[str, Any]:
    """What the run context keeps of a gated call: what the human deciding is shown and
    what the resumed call needs back."""
    return pause_record(result, arguments, turn_group_id)


def function_tool(toolbox: Toolbox, info: ToolInfo, action: str, *,
                  turn_group: TurnGroup = run_turn_group) -> FunctionTool:
    """One callable action as an SDK function tool: the MCP face's name, the JSON Schema
    as the pipeline validates it."""
    call = ToolkeeperCall(toolbox, info.name, action, turn_group)
    parts = [p for p in (info.description, info.action_descriptions.get(action, "")) if p]
    return FunctionTool(
        name=info.names.get(action, info.name), description=" — ".join(parts),
        params_json_schema=info.input_schemas[action], on_invoke_tool=call.invoke,
        strict_json_schema=False, needs_approval=call.needs_approval)


def tools_of(infos: list[ToolInfo], toolbox: Toolbox, **options: Any) -> list[FunctionTool]:
    return [function_tool(toolbox, info, action, **options)
            for info in infos for action in info.actions]


def build(toolbox: Toolbox, **options: Any) -> list[FunctionTool]:
    """The tools ``build_tools(…, framework="openai_agents")`` returns (from synchronous
    code; in a coroutine use :func:`build_async`). ``options``: ``turn_group``
    (``RunContextWrapper`` → turn group id; default the run id kept in the context)."""
    return tools_of(toolbox.enabled_sync(), toolbox, **options)


async def build_async(toolbox: Toolbox, **options: Any) -> list[FunctionTool]:
    """:func:`build` from a coroutine."""
    return tools_of(await toolbox.enabled(), toolbox, **options)


# -- the human's decisions ------------------------------------------------------------


def _state(result_or_state: RunResult | RunState[Any]) -> RunState[Any]:
    return result_or_state if isinstance(result_or_state, RunState) \
        else result_or_state.to_state()


def _pending(state: RunState[Any]) -> dict[str, Any]:
    wrapper = state._context  # the SDK gives no public accessor to a state's context
    if wrapper is None or not isinstance(wrapper.context, Mapping):
        return {}
    mine = wrapper.context.get(CONTEXT_KEY) or {}
    pending: dict[str, Any] = mine.get("pending", {})
    return pending


def _call(item: ToolApprovalItem) -> ToolkeeperCall | None:
    """The toolkeeper call behind an interruption, if it is one of ours."""
    agent = item.agent
    for tool in agent.tools if isinstance(agent, Agent) else ():
        bound = getattr(getattr(tool, "on_invoke_tool", None), "__self__", None)
        if isinstance(tool, FunctionTool) and tool.name == item.tool_name and \
                isinstance(bound, ToolkeeperCall):
            return bound
    return None


def pending_approvals(result_or_state: RunResult | RunState[Any]) -> dict[str, dict[str, Any]]:
    """The interruptions a human must decide, by tool call id: kind (``approve``,
    ``confirm``, ``preview``), tool, action, arguments, ``approval_id``, the preview."""
    state = _state(result_or_state)
    pending = _pending(state)
    return {cid: pending[cid] for item in state.get_interruptions()
            if (cid := item.call_id) is not None and cid in pending}


async def resolve_interruptions(result_or_state: RunResult | RunState[Any],
                                decisions: Mapping[str, Decision], *,
                                approver: Approver) -> RunState[Any]:
    """Carry the human's decisions (tool call id → ``True``, ``False`` or ``Reject(note)``)
    to toolkeeper as ``approver`` — a :class:`Principal` in-process or an approver token,
    never the agent's own — and into the SDK's run state, which is returned to resume with
    ``Runner.run(agent, state)``.

    Calls left out of ``decisions`` stay pending. An interruption of a toolkeeper tool that
    toolkeeper did not gate (the SDK pauses on arguments it cannot parse) is let through:
    the pipeline judges the call when it runs. Other tools' interruptions pass through.
    """
    state = _state(result_or_state)
    pending = _pending(state)
    for item in state.get_interruptions():
        cid = item.call_id
        call = _call(item)
        record = pending.get(cid) if cid is not None else None
        if call is not None and record is None:
            state.approve(item)
        elif cid is None or cid not in decisions:
            continue
        elif decisions[cid] is True:
            if call is not None and record is not None:
                await _approve(call.toolbox, record, approver)
            state.approve(item)
        else:
            decision = decisions[cid]
            note = decision.note if isinstance(decision, Reject) else None
            if call is not None and record is not None:
                await _deny(call.toolbox, record, note, approver)
            state.reject(item, rejection_message=rejection(record or {}, note))
    return state


async def _approve(box: Toolbox, record: Mapping[str, Any], approver: Approver) -> None:
    approval_id = record.get("approval_id")
    if approval_id is None:  # a preview: its token already lets the reviewed call run
        return
    if record["kind"] == "confirm":
        await box.confirm(approval_id, by=approver)
    else:
        await box.approve(approval_id, by=approver)


async def _deny(box: Toolbox, record: Mapping[str, Any], note: str | None,
                approver: Approver) -> None:
    approval_id = record.get("approval_id")
    if approval_id is not None:
        await box.deny(approval_id, by=approver, note=note)


def rejection(record: Mapping[str, Any], note: str | None) -> str:
    """What the model is told of a call the human rejected."""
    return json.dumps(rejected(record.get("tool"), record.get("action"), note))
