"""The Toolbox (seed 004): one agent's tools over an in-process gateway or a remote server,
and :func:`build_tools`, which turns them into an agent framework's tools.

    from toolkeeper.toolbox import InProcessBackend, Toolbox

    box = Toolbox(InProcessBackend(gw), agent="release-bot")
    async with box.turn() as turn:
        result = await turn.execute("git", {"cmd": "status"}, action="status")
"""

from typing import TYPE_CHECKING
from typing import Any as _Any

from toolkeeper.toolbox.backend import Approver, Backend, Decision
from toolkeeper.toolbox.build import FRAMEWORKS, Framework, build_tools
from toolkeeper.toolbox.decisions import PlannedCall, SupersedeGuard, new_turn_group_id
from toolkeeper.toolbox.toolbox import BatchItem, Toolbox, Turn
from toolkeeper.toolbox.types import Approval, ToolInfo, ToolMetadata, UnavailableInfo

if TYPE_CHECKING:
    from toolkeeper.toolbox.inprocess import InProcessBackend


def __getattr__(name: str) -> _Any:
    """``InProcessBackend`` loads the gateway, so it loads when first named (the remote
    backend and the adapters use this package without a server)."""
    if name != "InProcessBackend":
        raise AttributeError(f"module 'toolkeeper.toolbox' has no attribute {name!r}")
    try:
        from toolkeeper.toolbox.inprocess import InProcessBackend
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("toolkeeper"):
            raise ImportError(
                "toolkeeper.toolbox.InProcessBackend runs a gateway in this process, which the "
                "client distribution (toolkeeper-client) does not ship: use the remote backend "
                "(Client(url, token).toolbox(agent)), or install the server with: "
                "pip install toolkeeper") from exc
        raise
    globals()[name] = InProcessBackend
    return InProcessBackend


__all__ = [
    "FRAMEWORKS",
    "Approval",
    "Approver",
    "Backend",
    "BatchItem",
    "Decision",
    "Framework",
    "InProcessBackend",
    "PlannedCall",
    "SupersedeGuard",
    "ToolInfo",
    "ToolMetadata",
    "Toolbox",
    "Turn",
    "UnavailableInfo",
    "build_tools",
    "new_turn_group_id",
]
