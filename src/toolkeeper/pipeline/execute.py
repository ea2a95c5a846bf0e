"""Step 10: run the tool — secrets only now, timeout, retries only when retry-safe."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

from toolkeeper.errors import ToolDenied, ToolError
from toolkeeper.model.call import CallResult, PreviewResult
from toolkeeper.model.enums import CallStatus, SideEffect
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.deadline import within
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState, safe_message
from toolkeeper.providers.base import ToolContext
from toolkeeper.secrets.credentials import own_credentials, tenant_getter
from toolkeeper.secrets.redact import CALL_SECRETS


@dataclass(slots=True)
class Execution:
    """What happened when the tool ran (input to the outcome step)."""

    output: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    attempts: int = 0
    ctx: ToolContext | None = None


def make_context(rt: Runtime, st: CallState) -> ToolContext:
    assert st.tool is not None and st.profile is not None and st.policy is not None
    tool = st.tool.definition
    req = st.request
    return ToolContext(
        call_id=st.call_id, tenant_id=st.tenant_id or "", agent=st.agent or "",
        tool=tool.name, action=st.action or "", tool_version=tool.version,
        autonomy=st.profile.profile.autonomy, granted_scopes=st.granted_scopes,
        policy=st.policy, connector_id=tool.connector_id, idempotency_key=st.idempotency_key,
        turn_group_id=req.turn_group_id, trace_id=req.trace_id, task_id=req.task_id,
        step_id=req.step_id, config=tool.implementation,
        timeout_s=tool.execution.timeout_s, upstreams=rt.upstreams,
        chain=tuple(req.chain), agents=rt.catalog.agents, agent_calls=rt.agent_calls,
        tenant_bounds=rt.settings.tenant_bounds,
        _get_secret=tenant_getter(rt.secrets, rt.credentials, st.tenant_id or "",
                                  written_by=tool.origin),
        _secrets_of=lambda origin: tenant_getter(rt.secrets, rt.credentials,
                                                 st.tenant_id or "", written_by=origin),
        _get_credential=own_credentials(rt.credentials, st.tenant_id or ""),
    )


async def _preview_in(rt: Runtime, st: CallState, ctx: ToolContext) -> PreviewResult | None:
    """The tool's side-effect-free preview, bounded by the tool's timeout, made safe to
    show (``None``: the tool has none); raises what the tool raised."""
    assert st.tool is not None and st.action is not None
    logged = CALL_SECRETS.set(ctx._resolved_secrets)
    try:
        preview = await within(st.tool.provider.preview(st.action, st.arguments, ctx),
                               st.tool.definition.execution.timeout_s)
    finally:
        CALL_SECRETS.reset(logged)
    if preview is None:
        return None
    # shown to approvers and the caller, stored with the approval: masked like an output
    redactor = rt.redactor.union(ctx._resolved_secrets)
    return PreviewResult(summary=safe_message(str(preview.summary), redactor),
                         data=redactor.redact(preview.data))


async def run_preview(rt: Runtime, st: CallState) -> PreviewResult | CallResult | None:
    """The preview gate's preview: a failure stops the call."""
    ctx = make_context(rt, st)
    try:
        return await _preview_in(rt, st, ctx)
    except ToolDenied as exc:
        return st.stop(EventType.POLICY_DENIED, exc.reason, _redacted(rt, ctx, exc.message))
    except (ToolError, TimeoutError, Exception) as exc:
        reason = exc.reason if isinstance(exc, ToolError) else (
            Reason.TIMEOUT if isinstance(exc, TimeoutError) else Reason.TOOL_ERROR)
        return st.stop(EventType.CALL_FAILED, reason,
                       "preview failed: " + _redacted(rt, ctx, str(exc) or type(exc).__name__),
                       status=CallStatus.FAILED)


async def preview_for_approver(rt: Runtime, st: CallState) -> PreviewResult | None:
    """The preview shown with a new approval or confirmation: best effort, a tool without
    one or one that fails gives none (the approver still sees the exact call)."""
    try:
        return await _preview_in(rt, st, make_context(rt, st))
    except Exception:  # the call waits for a human either way; nothing is executed
        return None


def _redacted(rt: Runtime, ctx: ToolContext, text: str) -> str:
    return rt.redactor.union(ctx._resolved_secrets).redact_text(text)


def run_inline(rt: Runtime, st: CallState) -> Execution | None:
    """An inline tool (``sync_execute``) run to completion on this thread, with no
    coroutine to make; ``None`` for any other tool (:func:`execute` runs it)."""
    assert st.tool is not None and st.action is not None
    provider = st.tool.provider
    sync = getattr(provider, "sync_execute", None)
    if sync is None:
        return None
    ctx = make_context(rt, st) if getattr(provider, "needs_context", True) else None
    run = Execution(ctx=ctx, attempts=1)
    try:
        run.output = sync(st.action, st.arguments, ctx)
    except Exception as exc:  # translated by the outcome step, as for any tool
        run.error = exc
    return run


async def execute(rt: Runtime, st: CallState) -> Execution:
    """Any tool: an inline one at once (:func:`run_inline`), others awaited, with retries
    (:func:`run_awaited`)."""
    return run_inline(rt, st) or await run_awaited(rt, st)


async def run_awaited(rt: Runtime, st: CallState) -> Execution:
    """A tool that is not inline (HTTP, MCP, async Python), with its retries."""
    ctx = make_context(rt, st)
    logged = CALL_SECRETS.set(ctx._resolved_secrets)  # inline tools cannot resolve secrets
    try:
        return await _attempts(rt, st, ctx)
    finally:
        CALL_SECRETS.reset(logged)


async def _attempts(rt: Runtime, st: CallState, ctx: ToolContext) -> Execution:
    assert st.tool is not None and st.action is not None
    tool = st.tool.definition
    retry_safe = st.side_effect in (SideEffect.PURE, SideEffect.IDEMPOTENT)
    attempts = 1 + (tool.execution.max_retries if retry_safe else 0)
    run = Execution(ctx=ctx)
    for attempt in range(attempts):
        run.attempts = attempt + 1
        run.error, run.timed_out = None, False
        try:
            run.output = await within(st.tool.provider.execute(st.action, st.arguments, ctx),
                                      tool.execution.timeout_s)
            return run
        except TimeoutError as exc:
            run.error, run.timed_out = exc, True
            retry = retry_safe
        except ToolDenied as exc:
            run.error = exc
            return run
        except ToolError as exc:
            run.error = exc
            retry = retry_safe and exc.retryable
        except Exception as exc:  # a tool's own bug: reported, never retried
            run.error = exc
            return run
        if not retry or attempt + 1 >= attempts:
            return run
        delay = min(rt.settings.retry_max_s, rt.settings.retry_base_s * (2 ** attempt))
        await asyncio.sleep(delay * (0.5 + random.random() / 2))  # backoff with jitter
    return run
