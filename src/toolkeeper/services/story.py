"""A call's story (``GET /calls/{call_id}/story``): its audit events as steps with their
timing, the gate and why, the approvals it asked for or used, its outcome, side effects and
their compensation, and the calls it is related to — read from the store, never from the
call's arguments or output beyond what the approvals already show."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from toolkeeper.errors import OperationRefused
from toolkeeper.model.events import EventType as E
from toolkeeper.model.reasons import Reason
from toolkeeper.services.approvals import as_of
from toolkeeper.store import Store
from toolkeeper.store.db import utcnow
from toolkeeper.store.records import ApprovalRecord, AuditEvent, OutcomeRecord

MAX_EVENTS = 500
"""The most audit events one story reads; past it the story says ``truncated``."""

COMPENSATION_KEY = "k:compensate:"
"""How a compensation call's recorded key starts (``services/calls.py`` passes
``compensate:<side effect id>``; the idempotency step stores a caller's key as ``k:…``)."""

_STEPS_ONLY = (E.CALL_REQUESTED.value, E.CALL_RESOLVED.value)
_DENIALS = (E.POLICY_DENIED.value, E.SCOPE_DENIED.value, E.LIMIT_DENIED.value)
_WAITING = ("approval_required", "confirmation_required", "preview_required")
_ENDS = {E.CALL_SUCCEEDED.value: "succeeded", E.CALL_FAILED.value: "failed",
         E.CALL_UNKNOWN.value: "unknown", E.CALL_SUPERSEDED.value: "superseded",
         E.PREVIEW_CREATED.value: "preview_required", **dict.fromkeys(_DENIALS, "denied")}
_DEDUPED = {Reason.IDEMPOTENCY_IN_PROGRESS.value: "in_progress",
            Reason.OUTCOME_UNKNOWN.value: "unknown"}
_NEEDS = {"approval_required": "an approver's decision",
          "confirmation_required": "a confirmation by the agent's user",
          "preview_required": "the caller to confirm a preview"}


def _words(code: str | None) -> str:
    return (code or "").replace("_", " ")


def _risk(ev: AuditEvent) -> str:
    """"risk high at autonomy 0" (the autonomy when the event carries it)."""
    autonomy = ev.data.get("autonomy")
    return f"risk {ev.risk}" + ("" if autonomy is None else f" at autonomy {autonomy}")


def _gate_phrase(ev: AuditEvent) -> str:
    risk = f" — {_risk(ev)}" if ev.risk else ""
    return f"gate: {_words(ev.reason) or 'approval required'}{risk}"


def _allowed(ev: AuditEvent) -> str:
    if ev.data.get("approval_id"):
        return f"gate: {ev.gate} — allowed by approval {ev.data['approval_id']}"
    if "preview_token" in ev.data:
        return "gate: preview — allowed by the preview the caller confirmed"
    return f"gate: allowed — {_risk(ev)}" if ev.risk else "gate: allowed"


def _ran(ev: AuditEvent) -> str:
    attempts = ev.data.get("attempts")
    tries = f" after {attempts} attempts" if isinstance(attempts, int) and attempts > 1 else ""
    outcome = {E.CALL_SUCCEEDED.value: "the tool succeeded",
               E.CALL_FAILED.value: "the tool failed",
               E.CALL_UNKNOWN.value: "the outcome is unknown"}[ev.type]
    why = f": {_words(ev.reason)}" if ev.reason and ev.type != E.CALL_SUCCEEDED.value else ""
    return f"{outcome}{why}{tries}"


_DETAIL: dict[str, Callable[[AuditEvent], str]] = {
    E.CALL_REQUESTED.value: lambda ev: f"agent {ev.agent_id} asked for "
                                       f"{ev.tool}{'.' + ev.action if ev.action else ''}",
    E.CALL_RESOLVED.value: lambda ev: f"resolved to {ev.tool} version {ev.tool_version}",
    E.GATE_ALLOWED.value: _allowed,
    E.GATE_REQUIRED.value: _gate_phrase,
    E.PREVIEW_CREATED.value: lambda ev: "a preview was made for the caller to confirm",
    E.APPROVAL_CREATED.value: lambda ev: f"{ev.data.get('kind', 'approval')} "
                                         f"{ev.data.get('approval_id')} asked for by agent "
                                         f"{ev.agent_id}",
    E.APPROVAL_GRANTED.value: lambda ev: f"approved by {ev.data.get('by')}"
                                         + (" with edits" if ev.data.get("edited") else ""),
    E.APPROVAL_DENIED.value: lambda ev: f"denied by {ev.data.get('by')}",
    E.APPROVAL_CONSUMED.value: lambda ev: ("the confirmed preview was used by this call"
                                           if ev.gate == "preview" else  # its id: a token
                                           f"approval {ev.data.get('approval_id')} used by "
                                           "this call"),
    E.CALL_ATTEMPTED.value: lambda ev: "outcome recorded as in progress; the tool runs",
    E.CALL_DEDUPED.value: lambda ev: (f"not run: {_words(ev.reason)}" if ev.reason else
                                      "answered from the earlier call "
                                      f"{ev.data.get('original_call_id')}"),
    E.CALL_SUCCEEDED.value: _ran, E.CALL_FAILED.value: _ran, E.CALL_UNKNOWN.value: _ran,
    E.CALL_SUPERSEDED.value: lambda ev: "stopped: its turn group was superseded",
    E.CALL_RESOLVED_MANUALLY.value: lambda ev: f"resolved as {ev.data.get('status')} by "
                                               f"{ev.data.get('by')}",
    E.SIDE_EFFECT_RECORDED.value: lambda ev: f"side effect {ev.data.get('side_effect_id')} "
                                             f"recorded ({ev.data.get('policy')})",
    E.SIDE_EFFECT_COMPENSATED.value: lambda ev: "side effect "
                                                f"{ev.data.get('side_effect_id')} compensated "
                                                f"by call {ev.data.get('compensation_call_id')}",
    **dict.fromkeys(_DENIALS, lambda ev: f"{ev.type.split('.')[0]}: denied — "
                                         f"{_words(ev.reason)}"),
}


def detail(ev: AuditEvent) -> str:
    """One human sentence about a step, from its fields alone (never its arguments)."""
    say = _DETAIL.get(ev.type)
    return say(ev) if say is not None else _words(ev.type.replace(".", " "))


def hidden(call_agent: str | None, agent: str | None) -> bool:
    """Whether a caller limited to ``agent``'s calls (``None``: to none) may not read a
    call made by ``call_agent``: the rule of ``GET /calls/{id}``."""
    return agent is not None and call_agent != agent


def _ms(later: datetime, earlier: datetime) -> float:
    return round((later - earlier).total_seconds() * 1000.0, 3)


def _steps(events: list[AuditEvent]) -> list[dict[str, Any]]:
    first = events[0].ts if events else None
    return [{"seq": ev.seq, "type": ev.type, "ts": ev.ts.isoformat(),
             "at_ms": _ms(ev.ts, first) if first else 0.0, "duration_ms": ev.duration_ms,
             "reason": ev.reason, "gate": ev.gate, "risk": ev.risk, "detail": detail(ev)}
            for ev in events]


def _gate(events: list[AuditEvent]) -> dict[str, Any] | None:
    """The gate this call met and why (``None``: it stopped before the gate)."""
    for ev in reversed(events):
        if ev.type == E.GATE_REQUIRED.value:
            why = f"{_risk(ev)} needs {_NEEDS.get(ev.reason or '', 'a decision')}"
        elif ev.type == E.GATE_ALLOWED.value:
            why = _allowed(ev).split(" — ", 1)[-1]
        elif ev.type == E.POLICY_DENIED.value and ev.reason == Reason.GATE_DENIED.value:
            why = str(ev.data.get("message") or f"risk {ev.risk} is denied")
        else:
            continue
        return {"gate": ev.gate, "risk": ev.risk, "why": why}
    last = next((ev for ev in reversed(events) if ev.gate), None)
    return None if last is None else {"gate": last.gate, "risk": last.risk,
                                      "why": f"risk {last.risk}: gate {last.gate}"}


def _status(events: list[AuditEvent],
            earlier: Callable[[str | None], OutcomeRecord | None]) -> tuple[str | None,
                                                                           str | None]:
    """A call's status and reason from its events (a call with no outcome row); a call
    answered from an earlier one's outcome (``earlier``) has that one's."""
    for ev in reversed(events):
        if ev.type == E.GATE_REQUIRED.value or ev.reason in _WAITING:
            return ev.reason if ev.reason in _WAITING else "approval_required", ev.reason
        if ev.type == E.CALL_DEDUPED.value:
            if ev.reason:
                return _DEDUPED.get(ev.reason, "denied"), ev.reason
            rec = earlier(ev.data.get("original_call_id"))
            return (rec.status, rec.reason) if rec else (None, None)
        if ev.type in _ENDS:
            return _ENDS[ev.type], ev.reason
    return None, None


def _approval(rec: ApprovalRecord) -> dict[str, Any]:
    waited = _ms(rec.decided_at, rec.created_at) if rec.decided_at else None
    return {"id": rec.id, "status": rec.status.value, "kind": rec.kind,
            "requested_at": rec.created_at.isoformat(), "requested_by": rec.agent,
            "decided_by": rec.decided_by,
            "decided_at": rec.decided_at.isoformat() if rec.decided_at else None,
            "waited_ms": waited, "note": rec.note, "edited": rec.edited_digest is not None,
            "arguments": rec.arguments, "edited_arguments": rec.edited_arguments,
            "preview": rec.preview, "summary": rec.summary, "call_id": rec.call_id,
            "consumed_by": rec.consumed_by}


def _outcome(rec: OutcomeRecord | None) -> dict[str, Any] | None:
    if rec is None:
        return None
    return {"state": rec.state.value, "status": rec.status, "reason": rec.reason,
            "side_effect": rec.side_effect, "resolved_by": rec.resolved_by,
            "created_at": rec.created_at.isoformat(), "updated_at": rec.updated_at.isoformat()}


class CallStory:
    """Stories of the calls in ``store``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def _outcome_of(self, tenant_id: str, call_id: str | None) -> OutcomeRecord | None:
        rec = self._store.outcomes.get(call_id) if call_id else None
        return rec if rec is not None and rec.tenant_id == tenant_id else None

    def story(self, tenant_id: str, call_id: str, *, agent: str | None,
              audit_level: str) -> dict[str, Any]:
        """The story of ``call_id`` in ``tenant_id``; with ``agent``, only if that agent made
        the call. Unknown, another tenant's or another agent's: ``not_found`` alike."""
        outcome = self._outcome_of(tenant_id, call_id)
        events = self._store.audit.list(tenant_id, call_id=call_id, limit=MAX_EVENTS + 1)
        truncated = len(events) > MAX_EVENTS
        events = sorted(events[:MAX_EVENTS], key=lambda ev: (ev.ts, ev.seq))
        first = events[0] if events else None
        who = outcome.agent if outcome else next((e.agent_id for e in events if e.agent_id),
                                                 None)
        if (outcome is None and first is None) or hidden(who, agent):
            raise OperationRefused(Reason.NOT_FOUND, f"no call {call_id!r}")
        status, reason = ((outcome.status, outcome.reason) if outcome else _status(
            events, lambda earlier: self._outcome_of(tenant_id, earlier)))
        linked = [as_of(a, utcnow()) for a in self._store.approvals.of_call(tenant_id, call_id)
                  if not hidden(a.agent, agent)]
        approvals = [a for a in linked if a.kind != "preview"]  # its id is the caller's token
        effects = self._effects(tenant_id, call_id)
        durations = [e.duration_ms for e in events if e.duration_ms is not None]
        level = "steps" if any(e.type in _STEPS_ONLY for e in events) else audit_level
        return {
            "call_id": call_id, "agent": who,
            "tool": outcome.tool if outcome else _first(events, "tool"),
            "action": outcome.action if outcome else _first(events, "action"),
            "tool_version": outcome.tool_version if outcome else _first(events, "tool_version"),
            "turn_group_id": outcome.turn_group_id if outcome else _first(events,
                                                                         "turn_group_id"),
            "trace_id": _first(events, "trace_id"), "audit_level": level,
            "status": status, "reason": reason,
            "started_at": (first.ts if first else outcome.created_at).isoformat(),  # type: ignore[union-attr]
            "duration_ms": durations[-1] if durations else None,
            "steps": _steps(events), "gate": _gate(events),
            "approvals": [_approval(a) for a in approvals], "outcome": _outcome(outcome),
            "side_effects": effects,
            "related": self._related(tenant_id, call_id, outcome, linked, effects),
            "truncated": truncated,
        }

    def _effects(self, tenant_id: str, call_id: str) -> list[dict[str, Any]]:
        out = []
        for e in self._store.outcomes.side_effects_of_call(tenant_id, call_id):
            comp = self._outcome_of(tenant_id, e.compensation_call_id)
            out.append({"id": e.id, "policy": e.policy, "status": e.status,
                        "created_at": e.created_at.isoformat(),
                        "compensation_call_id": e.compensation_call_id,
                        "compensation_status": comp.status if comp else None})
        return out

    def _related(self, tenant_id: str, call_id: str, outcome: OutcomeRecord | None,
                 approvals: list[ApprovalRecord],
                 effects: list[dict[str, Any]]) -> list[dict[str, str]]:
        """Calls linked to this one: through an approval or a preview (the call that asked
        for it, the call that re-submitted and consumed it) or a compensation (both ways)."""
        found: list[tuple[str, str]] = []
        for a in approvals:
            if a.call_id == call_id and a.consumed_by and a.consumed_by != call_id:
                found.append((a.consumed_by, "resubmitted_as"))
            if a.consumed_by == call_id and a.call_id and a.call_id != call_id:
                found.append((a.call_id, "resubmission_of"))
        found += [(e["compensation_call_id"], "compensated_by") for e in effects
                  if e["compensation_call_id"]]
        if outcome is not None and outcome.key.startswith(COMPENSATION_KEY):
            effect = self._store.outcomes.side_effect(outcome.key[len(COMPENSATION_KEY):])
            if effect is not None and effect.tenant_id == tenant_id and \
                    effect.compensation_call_id == call_id:
                found.append((effect.call_id, "compensation_of"))
        return [{"call_id": c, "relation": r} for c, r in dict.fromkeys(found)]


def _first(events: list[AuditEvent], name: str) -> Any:
    return next((getattr(e, name) for e in events if getattr(e, name)), None)
