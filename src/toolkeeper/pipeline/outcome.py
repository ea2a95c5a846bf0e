"""Step 11: turn what happened into the call's result, durably, with audit and metrics."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import BaseModel

from toolkeeper.errors import ToolDenied, ToolError
from toolkeeper.model.call import CallResult, McpContent
from toolkeeper.model.enums import CallStatus, OutcomeState, SideEffect
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline import budgets
from toolkeeper.pipeline.content import shape_blocks, texts_of
from toolkeeper.pipeline.execute import Execution
from toolkeeper.pipeline.ids import new_id
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState, safe_message
from toolkeeper.secrets.redact import Redactor
from toolkeeper.store.records import SideEffectRecord


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def shape_output(value: Any, cap: int) -> tuple[Any, dict[str, Any] | None]:
    """Plain JSON output within ``cap`` characters, serialised once.

    Strings are truncated; a larger structure is returned as its truncated JSON text.
    """
    if value is None or type(value) in (int, bool, float):
        return value, None
    if type(value) is str:
        if len(value) <= cap:
            return value, None
        return value[:cap], {"truncated": True, "original_chars": len(value)}
    text = orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS)
    if len(text) > cap:  # bytes ≥ chars: decode to count characters exactly
        chars = text.decode()
        if len(chars) > cap:
            return chars[:cap], {"truncated": True, "original_chars": len(chars)}
    return orjson.loads(text), None


def _shaped(value: Any, cap: int, redactor: Redactor
            ) -> tuple[Any, dict[str, Any] | None, dict[str, Any] | None]:
    """``(output, mcp, details)``: the output capped and masked; an upstream MCP tool's
    blocks kept as sent (:mod:`toolkeeper.pipeline.content`), its ``structuredContent``
    shaped like any output (passed on only if the cap left it whole)."""
    if not isinstance(value, McpContent):
        output, details = shape_output(value, cap)
        return redactor.redact(output), None, details
    blocks, details = shape_blocks(value, cap, redactor)
    mcp: dict[str, Any] = {"content": blocks}
    if value.structured is None:
        return texts_of(blocks), mcp, details
    output, cut = shape_output(value.structured, cap)
    output = redactor.redact(output)
    if cut is None:
        mcp["structuredContent"] = output
    return output, mcp, {**(details or {}), **cut} if cut else details


def _classify(st: CallState, run: Execution) -> tuple[CallStatus, str | None, str | None,
                                                      EventType]:
    err = run.error
    if err is None:
        return CallStatus.SUCCEEDED, None, None, EventType.CALL_SUCCEEDED
    retry_safe = st.side_effect in (SideEffect.PURE, SideEffect.IDEMPOTENT)
    if isinstance(err, ToolDenied):
        return CallStatus.DENIED, err.reason, err.message, EventType.POLICY_DENIED
    if run.timed_out:
        if retry_safe:
            return CallStatus.FAILED, Reason.TIMEOUT, "the tool timed out", EventType.CALL_FAILED
        return (CallStatus.UNKNOWN, Reason.TIMEOUT,
                "the tool timed out after it may have acted", EventType.CALL_UNKNOWN)
    if isinstance(err, ToolError):
        if err.may_have_executed and not retry_safe:
            return CallStatus.UNKNOWN, err.reason, err.message, EventType.CALL_UNKNOWN
        return CallStatus.FAILED, err.reason, err.message, EventType.CALL_FAILED
    return (CallStatus.FAILED, Reason.TOOL_ERROR, f"{type(err).__name__}: {err}",
            EventType.CALL_FAILED)


async def finish(rt: Runtime, st: CallState, run: Execution) -> CallResult:
    """The outcome step: the result, its events, and the outcome row if the call has one."""
    res, effect = settle(rt, st, run)
    if st.recorded:
        await _record(rt, st, res, effect)
    budgets.charge(rt, st, res)  # once per execution: a deduped call never gets here
    return res


def finish_unrecorded(rt: Runtime, st: CallState, run: Execution) -> CallResult:
    """:func:`finish` for a call with no outcome row (``pure``, no key): nothing to await,
    so no coroutine is made."""
    assert not st.recorded
    res, _ = settle(rt, st, run)
    budgets.charge(rt, st, res)
    return res


def settle(rt: Runtime, st: CallState,
           run: Execution) -> tuple[CallResult, SideEffectRecord | None]:
    """The call's result and its events (and the side effect it recorded, if any)."""
    assert st.tool is not None
    tool = st.tool.definition
    status, reason, message, event = _classify(st, run)
    redactor = rt.redactor
    if run.ctx is not None and run.ctx._resolved_secrets:
        redactor = redactor.union(run.ctx._resolved_secrets)
    output, mcp, details = None, None, None
    if status is CallStatus.SUCCEEDED:
        cap = tool.execution.max_output_chars
        if st.policy is not None and st.policy.max_output_chars:
            cap = min(cap, st.policy.max_output_chars)
        try:
            output, mcp, details = _shaped(run.output, cap, redactor)
        except (TypeError, orjson.JSONEncodeError) as exc:
            status, reason, event = CallStatus.FAILED, Reason.INVALID_OUTPUT, EventType.CALL_FAILED
            message = f"the tool returned something that is not JSON: {exc}"
    if message is not None:
        message = safe_message(message, redactor)
    effect = None
    if status is CallStatus.SUCCEEDED and st.side_effect is not SideEffect.PURE:
        effect = SideEffectRecord(
            id=new_id("se_"), tenant_id=st.tenant_id or "", agent=st.agent or "",
            call_id=st.call_id, tool=tool.name, action=st.action or "",
            tool_version=tool.version, policy=str(st.side_effect),
            arguments=redactor.redact(st.arguments), result=output,
            turn_group_id=st.request.turn_group_id, created_at=datetime.now(UTC))
    res = st.result_as_is(status, reason, message, output=output, mcp=mcp, details=details,
                          side_effect_id=effect.id if effect else None)
    _health(rt, st, run, status, redactor)
    st.emit(event, reason=reason, duration_ms=res.duration_ms, attempts=run.attempts,
            **({"message": message} if message and status is not CallStatus.SUCCEEDED else {}))
    if effect is not None:
        st.emit(EventType.SIDE_EFFECT_RECORDED, side_effect_id=effect.id, policy=effect.policy)
        rt.metrics.side_effect(effect.tenant_id, effect.policy)
    return res, effect


async def _record(rt: Runtime, st: CallState, res: CallResult,
                  effect: SideEffectRecord | None) -> None:
    """The outcome row's final state, with the call's events when they are transactional."""
    status, reason = res.status, res.reason
    state = {CallStatus.SUCCEEDED: OutcomeState.SUCCEEDED,
             CallStatus.UNKNOWN: OutcomeState.UNKNOWN}.get(status, OutcomeState.FAILED)
    in_txn = rt.settings.audit_durability == "transactional"
    await rt.store.outcomes.finish_async(
        st.call_id, state=state, status=status.value, reason=reason, result=res.to_dict(),
        side_effect=effect, events=st.take_drafts() if in_txn else (),
        offload=await rt.loop_calls.company())
    if reason == Reason.INPUT_REQUIRED:  # asked, ran nothing: the retry must run
        rt.store.outcomes.release(st.call_id)


def _health(rt: Runtime, st: CallState, run: Execution, status: CallStatus,
            redactor: Redactor) -> None:
    name = f"{st.tenant_id}:{st.tool_name}"
    if status is CallStatus.SUCCEEDED:
        rt.health.success(name)
    elif run.timed_out or (isinstance(run.error, ToolError) and run.error.retryable):
        # shown by GET /tools/health and audited: masked like any message, then cut
        rt.health.failure(name, safe_message(str(run.error), redactor)[:200])


def unknown_after_cancel(rt: Runtime, st: CallState) -> None:
    """The caller went away mid-execution: the tool may have acted, so the outcome is unknown."""
    if not st.recorded:
        return
    st.emit(EventType.CALL_UNKNOWN, reason="cancelled")
    res = st.result(CallStatus.UNKNOWN, "cancelled", message="the call was cancelled mid-flight")
    rt.store.outcomes.finish(st.call_id, state=OutcomeState.UNKNOWN, status="unknown",
                             reason="cancelled", result=res.to_dict(), events=st.take_drafts())


__all__ = ["Redactor", "finish", "shape_output", "unknown_after_cancel"]
