"""Step 9: at most one execution per idempotency key, across threads, processes, replicas.

Key: the caller's ``idempotency_key``, else ``{tool}:{action}:{business_key}:turn_group:{id}``
(``business_key`` = the tool's ``idempotency_key_fields`` joined, else a hash of the
canonical arguments), else a fresh per-call key (recorded, never deduplicated).
``pure`` calls record nothing unless the caller passed an explicit key.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus, Gate, OutcomeState, Risk, SideEffect
from toolkeeper.model.events import EventType
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState
from toolkeeper.store.outcomes import key_expired
from toolkeeper.store.records import OutcomeRecord

MAX_KEY_CHARS = 255


def call_key(st: CallState) -> str | None:
    """The call's idempotency key, or ``None`` when it gets a fresh one."""
    req = st.request
    if req.idempotency_key is not None:
        return f"k:{req.idempotency_key}"
    if not req.turn_group_id or st.tool is None:
        return None
    tool = st.tool.definition
    if tool.idempotency_key_fields:
        business = ":".join(str(st.arguments.get(f, "")) for f in tool.idempotency_key_fields)
    else:
        # the digest validate already took of the canonical arguments (same value)
        business = (st.args_digest or "").removeprefix("sha256:")[:32]
    return f"{tool.name}:{st.action}:{business}:turn_group:{req.turn_group_id}"


def _bad_key(st: CallState) -> CallResult | None:
    key = st.request.idempotency_key
    if key is None:
        return None
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
        return st.stop(EventType.POLICY_DENIED, Reason.INVALID_ARGUMENTS,
                       f"idempotency_key must be 1 to {MAX_KEY_CHARS} printable characters",
                       details={"errors": [{"pointer": "/idempotency_key",
                                            "message": "invalid idempotency key"}]})
    return None


async def idempotency(rt: Runtime, st: CallState) -> CallResult | None:
    bad = _bad_key(st)
    if bad is not None:
        return bad
    assert st.tool is not None and st.tenant_id is not None and st.agent is not None
    explicit = st.request.idempotency_key is not None
    if st.side_effect is SideEffect.PURE and not explicit:
        return None
    key = call_key(st) or f"call:{st.call_id}"
    st.idempotency_key = key
    now = datetime.now(UTC)
    tool = st.tool.definition
    rec = OutcomeRecord(
        call_id=st.call_id, tenant_id=st.tenant_id, agent=st.agent, key=key, tool=tool.name,
        action=st.action or "", tool_version=tool.version, args_digest=st.args_digest or "",
        side_effect=str(st.side_effect), state=OutcomeState.IN_PROGRESS,
        status=CallStatus.IN_PROGRESS.value, turn_group_id=st.request.turn_group_id,
        created_at=now, updated_at=now, expires_at=now + rt.settings.outcome_ttl,
        stale_after=now + timedelta(seconds=tool.execution.timeout_s) + rt.settings.stale_grace,
    )
    attempted = len(st.events)
    st.emit(EventType.CALL_ATTEMPTED, idempotency_key=key)
    in_txn = rt.settings.audit_durability == "transactional"
    existing = await rt.store.outcomes.claim_async(rec, st.drafts() if in_txn else (),
                                                   offload=await rt.loop_calls.company())
    if existing is None:
        if in_txn:
            st.events = []
        st.recorded = True
        return None
    del st.events[attempted:]  # we did not attempt anything
    return _existing(rt, st, existing)


def recorded_repeat(rt: Runtime, st: CallState) -> CallResult | None:
    """An exact repeat (same key, same argument digest) of a call that already has an
    outcome is answered from it, before a gate asks a human again: nothing new would run
    (a second approval for a payment that already happened helps nobody). Other calls
    (no key, other arguments, an expired outcome) go on through the gate as usual."""
    if _bad_key(st) is not None:
        return None  # the idempotency step refuses the key itself
    if st.side_effect is SideEffect.PURE and st.request.idempotency_key is None:
        return None
    key = call_key(st)
    if key is None:
        return None
    assert st.tenant_id is not None and st.agent is not None
    ex = rt.store.outcomes.by_key(st.tenant_id, st.agent, key)
    if ex is None or ex.args_digest != st.args_digest or key_expired(ex, datetime.now(UTC)):
        return None
    st.idempotency_key = key
    return _existing(rt, st, ex)


def _existing(rt: Runtime, st: CallState, ex: OutcomeRecord) -> CallResult:
    if ex.args_digest != st.args_digest:
        return st.stop(EventType.POLICY_DENIED, Reason.IDEMPOTENCY_KEY_REUSED,
                       "this idempotency key was used with other arguments",
                       status=CallStatus.DENIED)
    if ex.state is OutcomeState.IN_PROGRESS:
        return st.stop(EventType.CALL_DEDUPED, Reason.IDEMPOTENCY_IN_PROGRESS,
                       "a call with this key is running", status=CallStatus.IN_PROGRESS,
                       details={"original_call_id": ex.call_id})
    if ex.state is OutcomeState.UNKNOWN:
        return st.stop(EventType.CALL_DEDUPED, Reason.OUTCOME_UNKNOWN,
                       "the outcome of the earlier call is unknown; an operator must resolve "
                       f"call {ex.call_id} before it can run again", status=CallStatus.UNKNOWN,
                       details={"original_call_id": ex.call_id})
    st.emit(EventType.CALL_DEDUPED, original_call_id=ex.call_id)
    rt.metrics.cache_hit(st.tenant_id or "", st.tool_name)
    return cached_result(ex, st)


def cached_result(ex: OutcomeRecord, st: CallState) -> CallResult:
    data: dict[str, Any] = dict(ex.result or {})
    res = CallResult(
        call_id=ex.call_id, status=CallStatus(data.get("status", ex.status)), tool=ex.tool,
        action=ex.action, reason=data.get("reason"), message=data.get("message"),
        output=data.get("output"), mcp=data.get("mcp"), details=data.get("details"),
        tool_version=ex.tool_version, deduped=True, side_effect_id=data.get("side_effect_id"),
        idempotency_key=st.caller_key() or ex.key, duration_ms=st.elapsed_ms(),
    )
    if data.get("risk"):
        res.risk = Risk(data["risk"])
    if data.get("gate"):
        res.gate = Gate(data["gate"])
    return res
