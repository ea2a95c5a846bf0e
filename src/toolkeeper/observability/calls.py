"""What every finished call leaves behind besides its audit events: one structured log
record (at INFO, when enabled) and its metrics (SPEC §9)."""

from __future__ import annotations

import logging

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus
from toolkeeper.observability.metrics import Metrics

log = logging.getLogger("toolkeeper")  # the name the call records always had


def observe_call(metrics: Metrics, res: CallResult, tenant: str | None,
                 agent: str | None) -> None:
    """Log and count one finished call (``tenant`` ``""`` when refused before it was known)."""
    if log.isEnabledFor(logging.INFO):
        log.info("call %s", res.status.value, extra={
            "call_id": res.call_id, "tenant_id": tenant, "agent": agent,
            "tool": res.tool, "action": res.action, "status": res.status.value,
            "reason": None if res.reason is None else str(res.reason),
            "risk": None if res.risk is None else res.risk.value,
            "gate": None if res.gate is None else res.gate.value,
            "deduped": res.deduped, "duration_ms": round(res.duration_ms, 3)})
    tenant = tenant or ""
    gate = res.gate
    metrics.call(tenant, res.tool, res.status._value_, res.duration_ms / 1000.0,
                 None if gate is None else gate._value_)
    if res.reason is not None and res.status is not CallStatus.SUCCEEDED:
        metrics.denial(tenant, str(res.reason))
