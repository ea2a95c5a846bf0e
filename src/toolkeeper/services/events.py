"""Audit events that belong to no call (health changes, publishes, config applies)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from toolkeeper.model.events import EventType
from toolkeeper.pipeline.ids import new_event_id
from toolkeeper.store.records import AuditDraft


def system_event(type_: EventType, tenant_id: str | None, *, tool: str | None = None,
                 agent: str | None = None, call_id: str | None = None,
                 reason: str | None = None, **data: Any) -> AuditDraft:
    return AuditDraft(type=type_.value, tenant_id=None if tenant_id in (None, "*") else tenant_id,
                      event_id=new_event_id(), ts=datetime.now(UTC), tool=tool, agent_id=agent,
                      call_id=call_id, reason=reason,
                      data={k: v for k, v in data.items() if v is not None})


def health_auditor(submit: Callable[[list[AuditDraft]], None]) -> Callable[..., None]:
    """A health board's ``on_change``: each change of a tool's health as a
    ``tool.health_changed`` event (the tool's key is ``tenant:name``)."""
    def changed(tool: str, old: Any, new: Any, error: str | None) -> None:
        tenant, _, name = tool.partition(":")
        submit([system_event(EventType.TOOL_HEALTH_CHANGED, tenant, tool=name, old=str(old),
                             new=str(new), error=error)])

    return changed
