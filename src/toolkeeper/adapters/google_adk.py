"""Google ADK adapter (issue 29 item 3): ADK tools over an agent's enabled tools, whose
approval pause is ADK's own tool confirmation flow.

    tools = build_tools(toolbox, framework="google_adk")          # or build(toolbox)
    agent = LlmAgent(name="bot", model=model, tools=tools)
    runner = InMemoryRunner(agent=agent, app_name="app")
    async for event in runner.run_async(user_id=u, session_id=s, new_message=ask): ...
    session = await runner.session_service.get_session(app_name="app", user_id=u,
                                                       session_id=s)
    for call_id, ask in pending_confirmations(session).items():   # a gate stopped a call
        ...                                                        # show the human
    answer = await resolve_confirmations(toolbox, session, {call_id: True}, approver=alice)
    async for event in runner.run_async(user_id=u, session_id=s, new_message=answer): ...

One ADK tool per callable action, named as the MCP face names it, declared with the
action's JSON Schema unchanged (``parameters_json_schema``): toolkeeper's validate step
judges the arguments, so malformed ones come back to the model as ``invalid_arguments``
with JSON pointers. Each call goes to toolkeeper under an idempotency key derived from the
ADK session and the model's function call id. A call stopped at an
``approve``/``confirm``/``preview`` gate asks for ADK's tool confirmation
(``ToolContext.request_confirmation``): ADK emits an ``adk_request_confirmation`` function
call whose payload is what the human needs to decide, and the tool keeps the same record in
the session state (``toolkeeper:pending:<call id>``), which only tools write; the turn ends
there (the model is not asked to sum up the pause, as with ADK's own confirmation gate). The human's
decision reaches toolkeeper through :func:`resolve_confirmations` with the application's
approver credential — never the agent's own — which returns the user message carrying
ADK's ``FunctionResponse`` (``{"confirmed": …}``) for each decided call. On that message
ADK re-runs the tool with the confirmation: the exact call is re-submitted with its
approval under the same key, so it executes once however often the resume is retried. A
confirmation given in ADK only (the app never told toolkeeper) runs nothing: the call comes
back ``approval_required``. Any other stop (a gate deny, a rejection, a rate limit) is the
tool's answer, a short JSON object with its reason code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolkeeper.adapters.common import (
    GATED,
    call_key,
    enabled_now,
    missing_extra,
    output_of,
    pause_record,
    rejected,
    stop_message,
)
from toolkeeper.errors import UserError
from toolkeeper.model.call import CallResult
from toolkeeper.toolbox import Approver, Toolbox, ToolInfo

try:
    from google.adk.sessions import Session
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(missing_extra("Google ADK", "google-adk")) from exc

FRAMEWORK = "google-adk"
CONFIRMATION = "adk_request_confirmation"
"""The function call ADK emits to ask for a tool confirmation, and the name of the
``FunctionResponse`` that answers it (ADK keeps the constant in a private module)."""
STATE_PREFIX = "toolkeeper:pending:"
"""Session state key prefix of a gated call's record, by function call id."""

TurnGroup = Callable[[ToolContext], str | None]


@dataclass(frozen=True, slots=True)
class Reject:
    """A human's rejection, with an optional note the model is told."""

    note: str | None = None


Decision = bool | Reject
"""``True`` approves, ``False`` or :class:`Reject` rejects."""


def idempotency_key(ctx: ToolContext) -> str:
    """One key per model function call: the session survives the pause and every resume,
    the function call id (the model's, else the one ADK assigned) names the call."""
    return call_key(FRAMEWORK, ctx.session.id, ctx.function_call_id)


def answer(result: CallResult) -> dict[str, Any]:
    """The tool's response for the model (ADK wants a JSON object): a succeeded call's
    output (a non-object one under ``"result"``), else its stop."""
    if not result.ok:
        return stop_message(result)
    output = output_of(result)
    return output if isinstance(output, dict) else {"result": output}


class ToolkeeperTool(BaseTool):
    """One callable action of a :class:`Toolbox`'s agent as an ADK tool."""

    def __init__(self, toolbox: Toolbox, info: ToolInfo, action: str, *,
                 turn_group: TurnGroup | None = None) -> None:
        parts = [p for p in (info.description, info.action_descriptions.get(action, "")) if p]
        super().__init__(name=info.names.get(action, info.name),
                         description=" — ".join(parts) or info.name)
        self.toolbox = toolbox
        self.target_tool = info.name
        self.target_action = action
        self.schema = info.input_schemas[action]
        self._turn_group = turn_group

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(name=self.name, description=self.description,
                                         parameters_json_schema=self.schema)

    def turn_group_id(self, ctx: ToolContext) -> str | None:
        """The turn a call belongs to: ``turn_group(ctx)`` when given, else the Toolbox turn
        entered around the run, else the ADK invocation (one per user message)."""
        if self._turn_group is not None:
            return self._turn_group(ctx)
        return self.toolbox.turn_group_id or ctx.invocation_id

    async def _execute(self, ctx: ToolContext, arguments: Any,
                       record: Mapping[str, Any]) -> CallResult:
        return await self.toolbox.execute(
            self.target_tool, arguments, action=self.target_action,
            idempotency_key=idempotency_key(ctx),
            turn_group_id=record.get("turn_group_id") or self.turn_group_id(ctx),
            approval_id=record.get("approval_id"), preview_token=record.get("preview_token"))

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        key = STATE_PREFIX + str(tool_context.function_call_id)
        record: dict[str, Any] = tool_context.state.get(key) or {}
        confirmation = tool_context.tool_confirmation
        if confirmation is not None and record:  # ADK's resume with the human's answer
            if not confirmation.confirmed:
                payload = confirmation.payload if isinstance(confirmation.payload, dict) else {}
                note = payload.get("note")
                return rejected(record.get("tool"), record.get("action"),
                                str(note) if note else None)
            return answer(await self._execute(tool_context, args, record))
        result = await self._execute(tool_context, args, {})
        if result.status in GATED:
            record = pause_record(result, args, self.turn_group_id(tool_context))
            tool_context.state[key] = record
            tool_context.request_confirmation(
                hint=result.message or f"toolkeeper asks a human to {record['kind']} this call",
                payload={"toolkeeper": True, **record})
            # as ADK's own confirmation gate does: the pause ends the turn; a model asked to
            # sum it up would call the tool again (a second call, a second approval)
            tool_context.actions.skip_summarization = True
        return answer(result)


def tools_of(infos: list[ToolInfo], toolbox: Toolbox, **options: Any) -> list[ToolkeeperTool]:
    return [ToolkeeperTool(toolbox, info, action, **options)
            for info in infos for action in info.actions]


def build(toolbox: Toolbox, **options: Any) -> list[ToolkeeperTool]:
    """The tools ``build_tools(…, framework="google_adk")`` returns, for
    ``LlmAgent(tools=…)`` (from synchronous code, even with an event loop running; in a
    coroutine :func:`build_async` does not block it). ``options``: ``turn_group``
    (``ToolContext`` → turn group id; default the Toolbox turn entered around the run, else
    the ADK invocation id)."""
    return tools_of(enabled_now(toolbox), toolbox, **options)


async def build_async(toolbox: Toolbox, **options: Any) -> list[ToolkeeperTool]:
    """:func:`build` from a coroutine."""
    return tools_of(await toolbox.enabled(), toolbox, **options)


# -- the human's decisions ------------------------------------------------------------


def _requests(session: Session) -> dict[str, str]:
    """Function call id → the id of ADK's ``adk_request_confirmation`` call still waiting
    for its answer. Only calls ADK itself marked long-running count: a model that names
    ``adk_request_confirmation`` cannot forge one."""
    asked: dict[str, str] = {}
    answered: set[str] = set()
    for event in session.events:
        for call in event.get_function_calls():
            original = (call.args or {}).get("originalFunctionCall")
            if call.name == CONFIRMATION and call.id \
                    and call.id in (event.long_running_tool_ids or ()) \
                    and isinstance(original, dict) and original.get("id"):
                asked[str(original["id"])] = call.id
        if event.author == "user":
            answered |= {r.id for r in event.get_function_responses()
                         if r.name == CONFIRMATION and r.id}
    return {cid: rid for cid, rid in asked.items() if rid not in answered}


def pending_confirmations(session: Session) -> dict[str, dict[str, Any]]:
    """The gated calls of ``session`` a human must decide, by function call id: kind
    (``approve``, ``confirm``, ``preview``), tool, action, arguments, ``approval_id``, the
    preview, and ``request_id`` (ADK's confirmation request). Read from the session state the
    tools wrote, never from what the model said."""
    state = session.state
    return {cid: {**state[STATE_PREFIX + cid], "request_id": rid}
            for cid, rid in _requests(session).items() if state.get(STATE_PREFIX + cid)}


async def resolve_confirmations(toolbox: Toolbox, session: Session,
                                decisions: Mapping[str, Decision], *,
                                approver: Approver) -> types.Content:
    """Carry the human's decisions (function call id → ``True``, ``False`` or
    ``Reject(note)``) to toolkeeper as ``approver`` — a :class:`Principal` in-process or an
    approver token, never the agent's own — and return the user message that resumes the
    run (``runner.run_async(…, new_message=…)``): one ``adk_request_confirmation``
    ``FunctionResponse`` per decided call. Calls left out of ``decisions`` stay pending."""
    pending = pending_confirmations(session)
    unknown = sorted(set(decisions) - set(pending))
    if unknown or not decisions:
        raise UserError(f"no pending toolkeeper confirmation for function call(s) {unknown}; "
                        f"pending: {sorted(pending)} (read from the session as it is after "
                        "the run: session_service.get_session)")
    parts = []
    for cid, decision in decisions.items():
        record = pending[cid]
        approve = decision is True
        note = decision.note if isinstance(decision, Reject) else None
        await _record(toolbox, record, approve, note, approver)
        response: dict[str, Any] = {"confirmed": approve}
        if note:
            response["payload"] = {"note": note}
        parts.append(types.Part(function_response=types.FunctionResponse(
            name=CONFIRMATION, id=record["request_id"], response=response)))
    return types.Content(role="user", parts=parts)


async def _record(box: Toolbox, record: Mapping[str, Any], approve: bool, note: str | None,
                  approver: Approver) -> None:
    """The decision, recorded in toolkeeper. A preview has nothing to record: its token
    already lets the reviewed call run, and rejecting it runs none."""
    approval_id = record.get("approval_id")
    if approval_id is None:
        return
    if not approve:
        await box.deny(approval_id, by=approver, note=note)
    elif record["kind"] == "confirm":
        await box.confirm(approval_id, by=approver)
    else:
        await box.approve(approval_id, by=approver)
