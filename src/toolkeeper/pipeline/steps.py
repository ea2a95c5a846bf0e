"""The normative order of SPEC §2, in one visible place.

authenticate → resolve → validate → scope → limits → risk → gate → supersede →
budgets → idempotency → execute → outcome. Each step returns ``None`` to continue or the result
that ends the call (having emitted its audit event).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from toolkeeper.errors import ConfigError
from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.enums import ApprovalStatus, CallStatus, OutcomeState, SideEffect
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline import budgets
from toolkeeper.pipeline.authenticate import authenticate
from toolkeeper.pipeline.execute import execute, run_awaited, run_inline
from toolkeeper.pipeline.gate import gate, gate_allows
from toolkeeper.pipeline.idempotency import idempotency
from toolkeeper.pipeline.ids import new_call_id
from toolkeeper.pipeline.limits import limits, needs_slot, slot
from toolkeeper.pipeline.outcome import finish, finish_unrecorded, unknown_after_cancel
from toolkeeper.pipeline.resolve import resolve
from toolkeeper.pipeline.risk import risk
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.scope import scope
from toolkeeper.pipeline.state import CallState
from toolkeeper.pipeline.supersede import supersede
from toolkeeper.pipeline.validate import text_fields, validate
from toolkeeper.store.faults import RETRY_AFTER_S, is_store_unavailable, unavailable_message

log = logging.getLogger("toolkeeper.pipeline")


async def run(rt: Runtime, st: CallState) -> CallResult:
    calls = rt.loop_calls
    calls.n += 1
    try:
        res = _to_scope(rt, st) or limits(rt, st)
        if res is None and needs_slot(st):
            res = await slot(rt, st)
        res = res or risk(rt, st)
        if res is None and not gate_allows(rt, st):
            res = await gate(rt, st)
        res = res or supersede(rt, st) or budgets.check(rt, st)
        if res is None and (st.side_effect is not SideEffect.PURE
                            or st.request.idempotency_key is not None):
            res = await idempotency(rt, st)  # a pure call without a key claims nothing
        if res is not None:
            return res
        if st.approval is not None:
            return await _execute(rt, st)
        # the common case without a coroutine per step: an inline tool runs here, and a
        # call with no outcome row has nothing to await when it ends
        run_ = run_inline(rt, st) or await run_awaited(rt, st)
        return finish_unrecorded(rt, st, run_) if not st.recorded else \
            await finish(rt, st, run_)
    finally:
        calls.n -= 1


def _to_scope(rt: Runtime, st: CallState) -> CallResult | None:
    res = authenticate(rt, st) or text_fields(st)
    if res is None:
        try:
            res = resolve(rt, st)
        except ConfigError as exc:
            res = st.stop(EventType.POLICY_DENIED, Reason.CONFIG_INVALID, str(exc),
                          status=CallStatus.FAILED)
    return res or validate(rt, st) or scope(rt, st)


async def check_call(rt: Runtime, request: CallRequest,
                     principal: Principal | None) -> tuple[CallState, CallResult | None]:
    """:func:`check` on a new call state (a bug of ours ends it ``internal_error``)."""
    st = CallState(call_id=new_call_id(), request=request, principal=principal,
                   redactor=rt.redactor)
    try:
        res = await check(rt, st)
    except Exception as exc:  # a bug of ours: never a crash for the caller
        log.exception("pipeline error in check %s", st.call_id)
        res = internal_error(rt, st, exc)
    finally:
        for release in st.release:
            release()
    return st, res


async def check(rt: Runtime, st: CallState) -> CallResult | None:
    """The steps up to the gate, nothing executed: ``None`` when the gate lets the call run
    now (its events are dropped: the call that follows records its own), else the result
    that stops it, recorded as :func:`run` records it — an approval or a preview is created
    and a refusal audited once. Limits are left to the call that follows (checking would
    count the call twice), so a call over a limit can pass a check and be refused then."""
    res = _to_scope(rt, st) or risk(rt, st)
    if res is None:
        res = await gate(rt, st)
    if res is None:
        st.events = []
    return res


async def _execute(rt: Runtime, st: CallState) -> CallResult:
    approval = st.approval
    if approval is not None and approval.status is ApprovalStatus.APPROVED:
        st.emit(EventType.APPROVAL_CONSUMED, approval_id=approval.id)
        if not rt.store.approvals.consume(approval.id, st.call_id, st.drafts()):
            st.events.pop()
            return _refuse_consumed(rt, st)
        st.events = []
        return await finish(rt, st, await _on_behalf(rt, st, approval.id,
                                                     approval.decided_by_subject is not None))
    run = await execute(rt, st)
    return await finish(rt, st, run)


async def _on_behalf(rt: Runtime, st: CallState, approval_id: str, person: bool) -> Any:
    """Execute with the approval known to ``subject: approver`` upstreams; the token set of
    the ``person`` who approved, bound to it, is deleted after (the call ran once)."""
    from toolkeeper.identity.upstream_person import APPROVED, PersonTokens

    mark = APPROVED.set((st.tenant_id or "", approval_id))
    try:
        return await execute(rt, st)
    finally:
        APPROVED.reset(mark)
        if person:
            try:
                await asyncio.to_thread(PersonTokens(rt.credentials).take,
                                        st.tenant_id or "", approval_id)
            except Exception as exc:  # it expires with nothing to use it; say so
                log.warning("approver token of approval %s not deleted: %s", approval_id,
                            type(exc).__name__)


def _refuse_consumed(rt: Runtime, st: CallState) -> CallResult:
    """Two calls raced for one approval and this one lost: it never runs."""
    res = st.stop(EventType.POLICY_DENIED, Reason.APPROVAL_CONSUMED,
                  "the approval was used by another call")
    if st.recorded:
        rt.store.outcomes.finish(st.call_id, state=OutcomeState.FAILED, status=res.status.value,
                                 reason=str(res.reason), result=res.to_dict(),
                                 events=st.take_drafts())
    return res


def cancelled(rt: Runtime, st: CallState) -> None:
    try:
        unknown_after_cancel(rt, st)
    except Exception:  # the store is gone too: recovery will mark it unknown later
        log.exception("could not record cancellation of %s", st.call_id)


def internal_error(rt: Runtime, st: CallState, exc: Exception) -> CallResult:
    """Our own bug: the call fails with ``internal_error`` (``store_unavailable`` when the
    database is down or cannot write, with ``retry_after``); a recorded call becomes
    unknown (we cannot tell whether the tool ran), and so does what the caller is told:
    ``failed`` would invite a retry of something that may have happened."""
    event, status = ((EventType.CALL_UNKNOWN, CallStatus.UNKNOWN) if st.recorded
                     else (EventType.CALL_FAILED, CallStatus.FAILED))
    if is_store_unavailable(exc):
        res = st.stop(event, Reason.STORE_UNAVAILABLE, unavailable_message(exc),
                      status=status, retry_after=float(RETRY_AFTER_S))
    else:
        msg = rt.redactor.redact_text(f"{type(exc).__name__}: {exc}")
        res = st.stop(event, Reason.INTERNAL_ERROR, msg, status=status)
    if st.recorded:
        try:
            rt.store.outcomes.finish(st.call_id, state=OutcomeState.UNKNOWN, status="unknown",
                                     reason=str(res.reason), result=res.to_dict(),
                                     events=st.take_drafts())
        except Exception:
            log.exception("could not record internal error of %s", st.call_id)
    return res
