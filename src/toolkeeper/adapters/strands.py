"""Strands Agents adapter (SPEC §7 Library; issue 29): agent tools over an agent's enabled
tools, whose approval pause is Strands' own interrupt.

    tools = build_tools(toolbox, framework="strands")        # or build(toolbox)
    agent = strands.Agent(model=model, tools=tools)
    result = agent("pay invoice 7")
    while result.stop_reason == "interrupt":                  # a gate stopped a call
        for ask in pending_approvals(result).values():       # show the human
            ...
        responses = resolve_interrupts_sync(toolbox, result, {interrupt_id: True},
                                            approver=alice)
        result = agent(responses)                             # [{"interruptResponse": …}]

One Strands ``AgentTool`` per callable action, named as the MCP face names it, its
``inputSchema`` the action's JSON Schema; toolkeeper's validate step judges the arguments,
so malformed ones come back to the model as ``invalid_arguments`` with JSON pointers. A
call stopped at an ``approve``/``confirm``/``preview`` gate raises a Strands interrupt
(``ToolContext.interrupt``, named ``"toolkeeper"``, its reason what the human needs to
decide): the run stops with ``stop_reason == "interrupt"``. The pause is raised inside the
tool, after every ``BeforeToolCallEvent`` hook and intervention handler (the application's
guardrails) has run, so nothing reaches toolkeeper before they have decided, and the tools
need no hook registered beside them. The human's decision reaches toolkeeper
through :func:`resolve_interrupts` with the application's approver credential — never the
agent's own — and comes back to the tool as the interrupt's response on resume: the tool
re-submits the exact call under the same idempotency key (derived from the conversation,
kept in ``agent.state``, and the tool use id), now carrying its approval, so it executes
once however often the resume is retried. Any stop (gate deny, rejection, rate limit) is
the tool's answer, a short JSON object with its reason code, never an exception.

The pending pause is kept in ``agent.state`` under ``"toolkeeper"`` (plain JSON), so an
agent restored by a Strands session manager resumes the same call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolkeeper.adapters.common import GATED, KIND, call_key, output_of, stop_message
from toolkeeper.errors import UserError
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.toolbox import Approver, Toolbox, ToolInfo, new_turn_group_id

try:
    import strands  # noqa: F401  (the extra: named in the message below when missing)
except ImportError as exc:  # pragma: no cover - exercised only without the framework
    raise ImportError("the Strands adapter needs strands-agents, which cannot be installed "
                      "beside the toolkeeper server (it requires mcp<2.2): install it with "
                      "the client, pip install 'toolkeeper-client[strands]'") from exc
from strands import ToolContext
from strands.agent import AgentResult
from strands.interrupt import Interrupt
from strands.types.tools import AgentTool, ToolGenerator, ToolResult, ToolSpec, ToolUse

FRAMEWORK = "strands"
INTERRUPT = "toolkeeper"
"""The name of the interrupts the tools raise (``Interrupt.name``)."""
STATE_KEY = "toolkeeper"
"""The ``agent.state`` key under which the adapter keeps its conversation id and pauses."""
TURN_KEY = "turn_group_id"
"""An ``invocation_state`` key naming the turn: ``agent(prompt, invocation_state={…})``."""

TurnGroup = Callable[[ToolUse, dict[str, Any]], str | None]


@dataclass(frozen=True, slots=True)
class Reject:
    """A human's rejection, with an optional note the model is told."""

    note: str | None = None


Decision = bool | Reject
"""``True`` approves, ``False`` or :class:`Reject` rejects."""


def _memory(agent: Any) -> dict[str, Any]:
    """The adapter's part of ``agent.state``: ``{"conversation": …, "pending": {id: …}}``."""
    mine: dict[str, Any] = agent.state.get(STATE_KEY) or {}
    if "conversation" not in mine:
        mine["conversation"] = new_turn_group_id()
        mine.setdefault("pending", {})
        agent.state.set(STATE_KEY, mine)
    return mine


def _remember(agent: Any, tool_use_id: str, pause: dict[str, Any] | None) -> None:
    mine = _memory(agent)
    if pause is None:
        mine["pending"].pop(tool_use_id, None)
    else:
        mine["pending"][tool_use_id] = pause
    agent.state.set(STATE_KEY, mine)


def idempotency_key(agent: Any, tool_use_id: str) -> str:
    """One key per model tool call: the conversation id lives in ``agent.state`` (it
    survives a resume and a session restore), the tool use id names the call."""
    return call_key(FRAMEWORK, _memory(agent)["conversation"], tool_use_id)


def invocation_turn_group(tool_use: ToolUse, invocation_state: dict[str, Any]) -> str | None:
    """The default turn group: ``invocation_state["turn_group_id"]`` when the application
    names one, else one id per agent invocation (kept in its ``invocation_state``)."""
    turn = invocation_state.setdefault(TURN_KEY, new_turn_group_id())
    return str(turn)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def answer(tool_use_id: str, result: CallResult) -> ToolResult:
    """The tool's result for the model: a succeeded call's output, else its stop."""
    if result.ok:
        return {"toolUseId": tool_use_id, "status": "success",
                "content": [{"text": _text(output_of(result))}]}
    return {"toolUseId": tool_use_id, "status": "error",
            "content": [{"text": _text(stop_message(result))}]}


def pause_value(result: CallResult, arguments: Any, turn_group_id: str | None) -> dict[str, Any]:
    """The interrupt's reason: what the application shows the human who decides, and what
    the resumed call needs back (plain JSON: session managers persist it)."""
    value: dict[str, Any] = {
        "toolkeeper": True, "kind": KIND[result.status], "status": result.status.value,
        "reason": str(result.reason), "message": result.message, "tool": result.tool,
        "action": result.action, "arguments": arguments, "approval_id": result.approval_id,
        "preview_token": result.preview_token, "preview": result.preview,
        "turn_group_id": turn_group_id}
    return {k: v for k, v in value.items() if v is not None}


def approved(response: Any) -> bool:
    """The interrupt's response read: ``True`` or ``{"approve": True}`` approves."""
    return response is True or (isinstance(response, Mapping) and response.get("approve") is True)


def rejection(tool_use_id: str, pause: Mapping[str, Any], response: Any) -> ToolResult:
    """What the model is told of a call the human rejected."""
    note = response.get("note") if isinstance(response, Mapping) else None
    said = {"status": CallStatus.DENIED.value, "reason": Reason.APPROVAL_DENIED.value,
            "message": "the reviewer rejected the call" + (f": {note}" if note else ""),
            "tool": pause.get("tool"), "action": pause.get("action")}
    return {"toolUseId": tool_use_id, "status": "error",
            "content": [{"text": json.dumps({k: v for k, v in said.items() if v is not None})}]}


class ToolkeeperTool(AgentTool):  # type: ignore[misc]  # strands is untyped here (own venv)
    """One callable action of a :class:`Toolbox`'s agent as a Strands agent tool."""

    def __init__(self, toolbox: Toolbox, info: ToolInfo, action: str, *,
                 turn_group: TurnGroup = invocation_turn_group) -> None:
        super().__init__()
        self.toolbox = toolbox
        self.target_tool = info.name
        self.target_action = action
        self._turn_group = turn_group
        parts = [p for p in (info.description, info.action_descriptions.get(action, "")) if p]
        self._name = info.names.get(action, info.name)
        self._spec: ToolSpec = {"name": self._name,
                                "description": " — ".join(parts) or info.name,
                                "inputSchema": {"json": info.input_schemas[action]}}

    @property
    def tool_name(self) -> str:
        return self._name

    @property
    def tool_spec(self) -> ToolSpec:
        return self._spec

    @property
    def tool_type(self) -> str:
        return "toolkeeper"

    async def stream(self, tool_use: ToolUse, invocation_state: dict[str, Any],
                     **kwargs: Any) -> ToolGenerator:
        """Submit the call; raise the interrupt when the gate asks a human; on resume, carry
        the human's answer (and the approval it was recorded under) back to toolkeeper."""
        agent = invocation_state["agent"]
        context = kwargs.get("_tool_context") or ToolContext(
            tool_use=tool_use, agent=agent, invocation_state=invocation_state)
        use_id = str(tool_use["toolUseId"])
        pause: dict[str, Any] | None = _memory(agent)["pending"].get(use_id)
        if pause is None:
            result = await self._submit(tool_use, invocation_state, agent, None)
            if result.status not in GATED:
                yield answer(use_id, result)
                return
            pause = pause_value(result, tool_use["input"],
                                self._turn(tool_use, invocation_state))
            _remember(agent, use_id, pause)
        response = context.interrupt(INTERRUPT, reason=pause)  # raises until answered
        _remember(agent, use_id, None)
        if not approved(response):
            yield rejection(use_id, pause, response)
            return
        yield answer(use_id, await self._submit(tool_use, invocation_state, agent, pause))

    def _turn(self, tool_use: ToolUse, invocation_state: dict[str, Any]) -> str | None:
        return self.toolbox.turn_group_id or self._turn_group(tool_use, invocation_state)

    async def _submit(self, tool_use: ToolUse, invocation_state: dict[str, Any], agent: Any,
                      pause: Mapping[str, Any] | None) -> CallResult:
        """The exact call under its key; resumed, in the paused call's turn, with its
        approval (or preview token)."""
        resumed = pause or {}
        return await self.toolbox.execute(
            self.target_tool, tool_use["input"], action=self.target_action,
            idempotency_key=idempotency_key(agent, str(tool_use["toolUseId"])),
            turn_group_id=resumed.get("turn_group_id") or self._turn(tool_use, invocation_state),
            approval_id=resumed.get("approval_id"), preview_token=resumed.get("preview_token"))


def tools_of(infos: list[ToolInfo], toolbox: Toolbox, **options: Any) -> list[ToolkeeperTool]:
    return [ToolkeeperTool(toolbox, info, action, **options)
            for info in infos for action in info.actions]


def build(toolbox: Toolbox, **options: Any) -> list[ToolkeeperTool]:
    """The tools ``build_tools(…, framework="strands")`` returns (from synchronous code; in
    a coroutine use :func:`build_async`). ``options``: ``turn_group`` (``(tool_use,
    invocation_state)`` → turn group id; default the Toolbox turn entered around the run,
    else ``invocation_state["turn_group_id"]``, else one id per agent invocation)."""
    return tools_of(toolbox.enabled_sync(), toolbox, **options)


async def build_async(toolbox: Toolbox, **options: Any) -> list[ToolkeeperTool]:
    """:func:`build` from a coroutine."""
    return tools_of(await toolbox.enabled(), toolbox, **options)


# -- the human's decisions ------------------------------------------------------------


def _interrupts(result: AgentResult | Sequence[Interrupt]) -> Sequence[Interrupt]:
    return (result.interrupts or ()) if isinstance(result, AgentResult) else result


def pending_approvals(result: AgentResult | Sequence[Interrupt]) -> dict[str, dict[str, Any]]:
    """The interrupts a human must decide, by interrupt id: kind (``approve``, ``confirm``,
    ``preview``), tool, action, arguments, ``approval_id``, the preview."""
    return {i.id: dict(i.reason) for i in _interrupts(result)
            if i.name == INTERRUPT and isinstance(i.reason, Mapping)}


async def resolve_interrupts(toolbox: Toolbox, result: AgentResult | Sequence[Interrupt],
                             decisions: Mapping[str, Decision | Any], *,
                             approver: Approver) -> list[dict[str, Any]]:
    """Carry the human's decisions (interrupt id → ``True``, ``False`` or ``Reject(note)``)
    to toolkeeper as ``approver`` — a :class:`Principal` in-process or an approver token,
    never the agent's own — and return the ``interruptResponse`` blocks to resume the agent
    with (``agent(responses)``).

    Interrupts left out of ``decisions`` get no response (Strands then asks again). Other
    interrupts' decisions pass through as their responses, unchanged.
    """
    responses: list[dict[str, Any]] = []
    asks = pending_approvals(result)
    for interrupt in _interrupts(result):
        if interrupt.id not in decisions:
            continue
        decision = decisions[interrupt.id]
        response: Any = decision
        ask = asks.get(interrupt.id)
        if ask is not None:
            response = await _record(toolbox, ask, decision, approver)
        responses.append({"interruptResponse": {"interruptId": interrupt.id,
                                                "response": response}})
    return responses


def resolve_interrupts_sync(toolbox: Toolbox, result: AgentResult | Sequence[Interrupt],
                            decisions: Mapping[str, Decision | Any], *,
                            approver: Approver) -> list[dict[str, Any]]:
    """:func:`resolve_interrupts` from synchronous code."""
    return toolbox.backend.run_sync(resolve_interrupts(toolbox, result, decisions,
                                                       approver=approver))


async def _record(box: Toolbox, ask: Mapping[str, Any], decision: Any,
                  approver: Approver) -> dict[str, Any]:
    """The decision recorded in toolkeeper; the response the tool reads on resume. A
    preview has nothing to record: its token already lets the reviewed call run."""
    if decision is not True and decision is not False and not isinstance(decision, Reject):
        raise UserError("a toolkeeper interrupt is decided with True, False or Reject(note)")
    approval_id = ask.get("approval_id")
    if decision is True:
        if approval_id is not None and ask["kind"] == "confirm":
            await box.confirm(approval_id, by=approver)
        elif approval_id is not None:
            await box.approve(approval_id, by=approver)
        return {"approve": True}
    note = decision.note if isinstance(decision, Reject) else None
    if approval_id is not None:
        await box.deny(approval_id, by=approver, note=note)
    return {"approve": False, "note": note} if note else {"approve": False}
