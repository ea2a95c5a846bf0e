"""The vocabulary of toolkeeper: enums, reasons, events, definitions, call types."""

from toolkeeper.model.call import CallRequest, CallResult, PreviewResult, Principal
from toolkeeper.model.enums import (
    ApprovalStatus,
    Autonomy,
    CallStatus,
    Gate,
    Health,
    Mode,
    OutcomeState,
    Risk,
    Role,
    SideEffect,
    ToolStatus,
)
from toolkeeper.model.events import EventType
from toolkeeper.model.gates import DEFAULT_MATRIX, GateMatrix
from toolkeeper.model.profile import (
    Activation,
    Adjuster,
    Agent,
    Condition,
    Limits,
    Profile,
    RateLimit,
)
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, Compensation, ExecutionMeta, ToolDefinition

__all__ = [
    "DEFAULT_MATRIX",
    "ActionSpec",
    "Activation",
    "Adjuster",
    "Agent",
    "ApprovalStatus",
    "Autonomy",
    "CallRequest",
    "CallResult",
    "CallStatus",
    "Compensation",
    "Condition",
    "EventType",
    "ExecutionMeta",
    "Gate",
    "GateMatrix",
    "Health",
    "Limits",
    "Mode",
    "OutcomeState",
    "PreviewResult",
    "Principal",
    "Profile",
    "RateLimit",
    "Reason",
    "Risk",
    "Role",
    "SideEffect",
    "ToolDefinition",
    "ToolStatus",
]
