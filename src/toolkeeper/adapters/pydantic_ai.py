"""Pydantic AI adapter (SPEC §7 Library; issue 9): a toolset over an agent's enabled tools.

    toolset = build_tools(toolbox, framework="pydantic_ai")      # or build(toolbox)
    agent = pydantic_ai.Agent(model, toolsets=[toolset],
                              output_type=[str, DeferredToolRequests])
    run = await agent.run("pay invoice 7")
    if isinstance(run.output, DeferredToolRequests):            # a gate stopped a call
        results = resolve_deferred(toolbox, run.output, {id: True}, approver=alice)
        run = await agent.run(message_history=run.all_messages(),
                              deferred_tool_results=results)

One Pydantic AI tool per callable action, named as the MCP face names it, with the action's
JSON Schema passed on unchanged; toolkeeper's validate step judges the arguments, so
malformed ones come back to the model as ``invalid_arguments`` with JSON pointers, never as
an exception out of the run. A call stopped at an ``approve``/``confirm``/``preview`` gate
raises Pydantic AI's :class:`~pydantic_ai.ApprovalRequired`, so the run ends with
``DeferredToolRequests`` whose metadata carries the toolkeeper approval (id, kind, preview).
The human's decision reaches toolkeeper through :func:`resolve_deferred` with the
application's approver credential — never the agent's own — and the resumed run re-submits
the exact call under the same idempotency key, derived from the conversation and the tool
call id, so it executes once however often the run is retried. Any other stop (a gate deny,
a rejected approval, a rate limit) returns to the model as a short structured message with
its reason code; ``ModelRetry`` is never used for them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
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
from toolkeeper.toolbox import Approver, Toolbox, ToolInfo

try:
    from pydantic_ai import (
        ApprovalRequired,
        DeferredToolRequests,
        DeferredToolResults,
        RunContext,
        ToolApproved,
        ToolDenied,
    )
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(missing_extra("Pydantic AI", "pydantic-ai")) from exc

FRAMEWORK = "pydantic-ai"
MALFORMED = "__toolkeeper_unparsed_arguments__"
"""Key under which arguments that are not a JSON object reach :meth:`call_tool`."""

TurnGroup = Callable[[RunContext[Any]], str | None]


class _Unvalidated:
    """An ``args_validator`` that judges nothing: the pipeline's validate step is the one
    home of argument rules. Text that is not a JSON object is carried through as is."""

    def validate_json(self, input: str | bytes | bytearray, *,
                      allow_partial: Any = False, **kwargs: Any) -> Any:
        try:
            value = json.loads(input)
        except ValueError:
            value = input.decode(errors="replace") if isinstance(input, bytes | bytearray) \
                else input
        return self.validate_python(value)

    def validate_python(self, input: Any, *, allow_partial: Any = False,
                        **kwargs: Any) -> Any:
        return input if isinstance(input, dict) else {MALFORMED: input}




def idempotency_key(ctx: RunContext[Any]) -> str:
    """One key per model tool call: the conversation survives a resumed or retried run
    (Pydantic AI carries it in the message history), the tool call id names the call."""
    return call_key(FRAMEWORK, ctx.conversation_id, ctx.tool_call_id)


@dataclass(frozen=True, slots=True)
class _Target:
    """The toolkeeper call behind one Pydantic AI tool name."""

    tool: str
    action: str


class ToolkeeperToolset(AbstractToolset[Any]):
    """The enabled tools of a :class:`Toolbox`'s agent as a Pydantic AI toolset."""

    def __init__(self, toolbox: Toolbox, *, id: str | None = "toolkeeper",
                 turn_group: TurnGroup | None = None, explain_unavailable: bool = True) -> None:
        self.toolbox = toolbox
        self._id = id
        self._turn_group = turn_group
        self._explain_unavailable = explain_unavailable

    @property
    def id(self) -> str | None:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools: dict[str, ToolsetTool[Any]] = {}
        for info in await self.toolbox.enabled():
            for action in info.actions:
                definition = tool_definition(info, action)
                # a global and a tenant tool may share a name: the first listed wins
                tools.setdefault(definition.name, ToolsetTool(
                    toolset=self, tool_def=definition, max_retries=0,
                    args_validator=_Unvalidated()))
        return tools

    async def get_instructions(self, ctx: RunContext[Any]) -> str | None:
        """Which tools the agent's profile names but it may not use now, and why, so the
        model can tell the user what an admin could enable. Only names and reason codes
        (operator-controlled), never tool descriptions."""
        if not self._explain_unavailable:
            return None
        missing = await self.toolbox.unavailable()
        if not missing:
            return None
        listed = "; ".join(f"{u.name} ({u.why_unavailable})" for u in missing)
        return ("These tools exist for you but are unavailable now; an administrator could "
                f"enable them: {listed}.")

    def turn_group_id(self, ctx: RunContext[Any]) -> str | None:
        """The turn a call belongs to: ``turn_group(ctx)`` when given, else the Toolbox turn
        entered around the run, else the Pydantic AI run id."""
        if self._turn_group is not None:
            return self._turn_group(ctx)
        return self.toolbox.turn_group_id or ctx.run_id

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        target = _target(tool.tool_def)
        arguments = tool_args.get(MALFORMED, tool_args)
        resumed: dict[str, Any] = ctx.tool_call_metadata if ctx.tool_call_approved and \
            isinstance(ctx.tool_call_metadata, dict) else {}
        turn_group_id = resumed.get("turn_group_id") or self.turn_group_id(ctx)
        result = await self.toolbox.execute(
            target.tool, arguments, action=target.action, idempotency_key=idempotency_key(ctx),
            turn_group_id=turn_group_id, approval_id=resumed.get("approval_id"),
            preview_token=resumed.get("preview_token"))
        if result.ok:
            return output_of(result)
        if result.status in GATED and not ctx.tool_call_approved:
            raise ApprovalRequired(metadata=pending_metadata(result, arguments, turn_group_id))
        return stop_message(result)


def tool_definition(info: ToolInfo, action: str) -> ToolDefinition:
    """One callable action as a Pydantic AI tool: the MCP face's name, the JSON Schema as
    the pipeline validates it."""
    parts = [p for p in (info.description, info.action_descriptions.get(action, "")) if p]
    return ToolDefinition(
        name=info.names.get(action, info.name), description=" — ".join(parts),
        parameters_json_schema=info.input_schemas[action],
        metadata={"toolkeeper": {"tool": info.name, "action": action}})


def _target(definition: ToolDefinition) -> _Target:
    meta = (definition.metadata or {})["toolkeeper"]
    return _Target(tool=meta["tool"], action=meta["action"])




def pending_metadata(result: CallResult, arguments: Any,
                     turn_group_id: str | None) -> dict[str, Any]:
    """What ``DeferredToolRequests.metadata[tool_call_id]`` tells the application (and the
    human deciding) of a gated call, and what the resumed call needs back."""
    return {"toolkeeper": True, **pause_record(result, arguments, turn_group_id)}


def build(toolbox: Toolbox, **options: Any) -> ToolkeeperToolset:
    """The toolset ``build_tools(…, framework="pydantic_ai")`` returns. ``options``: ``id``
    (the toolset id, default ``"toolkeeper"``), ``turn_group`` (``RunContext`` → turn group
    id; default the Toolbox turn entered around the run, else the run id),
    ``explain_unavailable`` (tell the model which tools it lacks and why; default on)."""
    return ToolkeeperToolset(toolbox, **options)


Decision = bool | ToolApproved | ToolDenied


async def resolve_deferred(toolbox: Toolbox | ToolkeeperToolset, requests: DeferredToolRequests,
                           decisions: Mapping[str, Decision], *,
                           approver: Approver) -> DeferredToolResults:
    """Carry the human's decisions (``tool_call_id`` → ``True``, ``False``,
    ``ToolApproved(override_args=…)`` to approve edited arguments, or ``ToolDenied(note)``)
    to toolkeeper as ``approver`` — a :class:`Principal` in-process or an approver token,
    never the agent's own — and return the ``DeferredToolResults`` to resume the run with.

    Calls left out of ``decisions`` stay pending; approvals of other toolsets pass through.
    """
    box = toolbox.toolbox if isinstance(toolbox, ToolkeeperToolset) else toolbox
    results = DeferredToolResults()
    for call in requests.approvals:
        cid = call.tool_call_id
        if cid not in decisions:
            continue
        decision = decisions[cid]
        meta = requests.metadata.get(cid) or {}
        if not meta.get("toolkeeper"):
            results.approvals[cid] = decision
            continue
        if decision is False or isinstance(decision, ToolDenied):
            note = decision.message if isinstance(decision, ToolDenied) else None
            results.approvals[cid] = await _deny(box, meta, note, approver)
            continue
        edited = decision.override_args if isinstance(decision, ToolApproved) else None
        await _approve(box, meta, edited, approver)
        results.approvals[cid] = decision
        results.metadata[cid] = {k: meta[k] for k in ("approval_id", "preview_token",
                                                      "turn_group_id") if k in meta}
    return results


def resolve_deferred_sync(toolbox: Toolbox | ToolkeeperToolset, requests: DeferredToolRequests,
                          decisions: Mapping[str, Decision], *,
                          approver: Approver) -> DeferredToolResults:
    """:func:`resolve_deferred` from synchronous code."""
    box = toolbox.toolbox if isinstance(toolbox, ToolkeeperToolset) else toolbox
    return box.backend.run_sync(resolve_deferred(box, requests, decisions, approver=approver))


async def _approve(box: Toolbox, meta: Mapping[str, Any], edited: Any,
                   approver: Approver) -> None:
    approval_id = meta.get("approval_id")
    if approval_id is None:  # a preview: its token already lets the reviewed call run
        if edited is not None:
            raise UserError("a previewed call cannot be approved with other arguments; "
                            "the agent must call again with them")
        return
    if meta["kind"] == "confirm" and edited is None:
        await box.confirm(approval_id, by=approver)
    else:
        await box.approve(approval_id, by=approver, edited_arguments=edited)


async def _deny(box: Toolbox, meta: Mapping[str, Any], note: str | None,
                approver: Approver) -> ToolDenied:
    approval_id = meta.get("approval_id")
    if approval_id is not None:
        await box.deny(approval_id, by=approver, note=note)
    return ToolDenied(json.dumps(rejected(meta.get("tool"), meta.get("action"), note)))
