"""Enumerations of SPEC §1; wire values are the lowercase strings."""

from __future__ import annotations

from enum import IntEnum, StrEnum


class Risk(StrEnum):
    """How much harm a call can do: ``low < medium < high < critical``."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RISK_ORDER[self]

    @classmethod
    def from_rank(cls, rank: int) -> Risk:
        return _RISKS[max(0, min(rank, len(_RISKS) - 1))]

    def at_least(self, other: Risk) -> Risk:
        return self if self.rank >= other.rank else other


_RISKS = (Risk.LOW, Risk.MEDIUM, Risk.HIGH, Risk.CRITICAL)
_RISK_ORDER = {r: i for i, r in enumerate(_RISKS)}


class SideEffect(StrEnum):
    """What executing a call does to the world."""

    PURE = "pure"
    IDEMPOTENT = "idempotent"
    COMPENSATABLE = "compensatable"
    IRREVERSIBLE = "irreversible"

    @property
    def retry_safe(self) -> bool:
        return self in (SideEffect.PURE, SideEffect.IDEMPOTENT)


class Autonomy(IntEnum):
    """How much an agent may do without a human: 0 manual … 3 autonomous."""

    MANUAL = 0
    SUPERVISED = 1
    GUARDED = 2
    AUTONOMOUS = 3


class Gate(StrEnum):
    """What the gate step demands before a call runs."""

    ALLOW = "allow"
    PREVIEW = "preview"
    CONFIRM = "confirm"
    APPROVE = "approve"
    DENY = "deny"


class ToolStatus(StrEnum):
    DRAFT = "draft"
    PUBLISHED = "published"
    DEPRECATED = "deprecated"
    DISABLED = "disabled"
    QUARANTINED = "quarantined"


class Health(StrEnum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    UNAVAILABLE = "unavailable"


class CallStatus(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DENIED = "denied"
    APPROVAL_REQUIRED = "approval_required"
    CONFIRMATION_REQUIRED = "confirmation_required"
    PREVIEW_REQUIRED = "preview_required"
    IN_PROGRESS = "in_progress"
    UNKNOWN = "unknown"
    SUPERSEDED = "superseded"
    COMPENSATED = "compensated"


class OutcomeState(StrEnum):
    """States of a durable outcome record (SPEC §2 step 9)."""

    IN_PROGRESS = "in_progress"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    CONSUMED = "consumed"
    EXPIRED = "expired"


class Role(StrEnum):
    """Roles a token can carry."""

    ADMIN = "admin"
    APPROVER = "approver"
    OPERATOR = "operator"
    AGENT = "agent"


class Mode(StrEnum):
    """Which tool statuses may run: production (published, deprecated) or debug (+ draft)."""

    PRODUCTION = "production"
    DEBUG = "debug"
