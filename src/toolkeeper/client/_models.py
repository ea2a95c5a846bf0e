"""Typed answers of the REST face, as the client returns them (never bare dicts).

Calls, approvals and the audit trail are the server's own wire models (``model/wire.py``,
re-exported here); the discovery listings and tool views are read here. Built from the JSON
by field name: a field the server adds later is ignored, so an older client keeps working
against a newer server.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import CallStatus, Gate, Risk
from toolkeeper.model.reasons import Reason
from toolkeeper.model.wire import (
    AgentTools,
    Approval,
    AuditEvent,
    AuditPage,
    AuditVerification,
    DiscoveredTool,
    Outcome,
    Superseded,
    TurnDecided,
)

T = TypeVar("T")


def from_json(cls: type[T], data: dict[str, Any]) -> T:
    """``cls`` from the JSON object ``data`` (its known fields only)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in names})


def _reason(value: Any) -> Reason | str | None:
    if value is None:
        return None
    try:
        return Reason(value)
    except ValueError:  # a tool's own deny reason is passed through as it came
        return str(value)


E = TypeVar("E", Risk, Gate)


def _known(enum: type[E], value: Any) -> E | None:
    """``value`` as ``enum``; ``None`` when absent or one a newer server added."""
    try:
        return enum(value) if value else None
    except ValueError:
        return None


def call_result(data: dict[str, Any]) -> CallResult:
    """The library's :class:`CallResult` from its wire shape (``CallResult.to_dict``)."""
    names = set(CallResult.__slots__)
    kw = {k: v for k, v in data.items() if k in names}
    kw["status"] = CallStatus(data["status"])
    kw["reason"] = _reason(data.get("reason"))
    kw["risk"] = _known(Risk, data.get("risk"))
    kw["gate"] = _known(Gate, data.get("gate"))
    kw["deduped"] = bool(data.get("deduped", False))
    kw["duration_ms"] = float(data.get("duration_ms") or 0.0)
    return CallResult(**kw)


def is_call_result(data: Any) -> bool:
    return isinstance(data, dict) and "call_id" in data and "status" in data


@dataclass(slots=True, kw_only=True)
class ToolView:
    """One tool as ``GET /tools/{id}`` shows it (to an agent token: only the actions it may
    call, without wiring or policy values)."""

    id: str | None
    name: str
    version: str
    description: str = ""
    actions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Action → its spec, with the ``side_effect`` and ``risk`` it has."""
    requires_confirmation: bool = False
    confirmation_prompt: str | None = None
    compensation: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Action → how the gateway undoes it (``action``, ``tool``, ``arguments``)."""
    categories: list[str] = field(default_factory=list)


def agent_tools(data: dict[str, Any]) -> AgentTools:
    return AgentTools.model_validate(data)


__all__ = [
    "AgentTools",
    "Approval",
    "AuditEvent",
    "AuditPage",
    "AuditVerification",
    "DiscoveredTool",
    "Outcome",
    "Superseded",
    "ToolView",
    "TurnDecided",
    "agent_tools",
    "call_result",
    "from_json",
    "is_call_result",
]
