"""toolkeeper — the governed tool gateway for AI agents.

    from toolkeeper import Gateway, tool, SideEffect

    @tool(side_effect=SideEffect.PURE)
    def add(a: int, b: int) -> int:
        return a + b

    with Gateway.open("sqlite:///./toolkeeper.db") as gw:
        gw.registry.register(add)
        ...
        result = gw.call_sync("add", arguments={"a": 1, "b": 2}, agent="helper")
"""

# first, before anything imports httpx: its command-line client stays unimported
from toolkeeper import _httpx_cli  # noqa: F401
from toolkeeper.errors import (
    ApprovalRequired,
    CallDenied,
    CallFailed,
    CallStopped,
    ConfigError,
    OperationRefused,
    ToolDenied,
    ToolError,
    ToolkeeperError,
    ToolSignal,
    UpstreamError,
    UserError,
)
from toolkeeper.gateway import Gateway
from toolkeeper.model import (
    ActionSpec,
    Activation,
    Adjuster,
    Agent,
    ApprovalStatus,
    Autonomy,
    CallRequest,
    CallResult,
    CallStatus,
    Compensation,
    Condition,
    EventType,
    ExecutionMeta,
    Gate,
    GateMatrix,
    Health,
    Limits,
    Mode,
    OutcomeState,
    PreviewResult,
    Principal,
    Profile,
    RateLimit,
    Reason,
    Risk,
    Role,
    SideEffect,
    ToolDefinition,
    ToolStatus,
)
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool, tool
from toolkeeper.store import Store
from toolkeeper.version import __version__

__all__ = [
    "ActionSpec",
    "Activation",
    "Adjuster",
    "Agent",
    "ApprovalRequired",
    "ApprovalStatus",
    "Autonomy",
    "BaseTool",
    "CallDenied",
    "CallFailed",
    "CallRequest",
    "CallResult",
    "CallStatus",
    "CallStopped",
    "Compensation",
    "Condition",
    "ConfigError",
    "EventType",
    "ExecutionMeta",
    "Gate",
    "GateMatrix",
    "Gateway",
    "Health",
    "Limits",
    "Mode",
    "OperationRefused",
    "OutcomeState",
    "PreviewResult",
    "Principal",
    "Profile",
    "RateLimit",
    "Reason",
    "Risk",
    "Role",
    "Settings",
    "SideEffect",
    "Store",
    "ToolContext",
    "ToolDefinition",
    "ToolDenied",
    "ToolError",
    "ToolPolicy",
    "ToolSignal",
    "ToolStatus",
    "ToolkeeperError",
    "UpstreamError",
    "UserError",
    "__version__",
    "tool",
]
