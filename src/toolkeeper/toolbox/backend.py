"""The one seam between a Toolbox and where calls run: in this process over a
:class:`~toolkeeper.gateway.Gateway`, or on a server over ``toolkeeper.client``.

A backend is told the agent and tenant on every method so one backend may serve several
toolboxes. Stopped calls come back as :class:`CallResult`, never as exceptions; refused
operations (an unknown approval, an approver who may not decide) raise
:class:`~toolkeeper.errors.OperationRefused`.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, Literal, Protocol, TypeVar

from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.wire import TurnDecided
from toolkeeper.toolbox.types import Approval, ToolInfo, ToolMetadata, UnavailableInfo

T = TypeVar("T")

Decision = Literal["approve", "deny", "confirm"]
Approver = Principal | str | None
"""Who decides: a :class:`Principal` (in-process), an approver token, or ``None`` for the
backend's own default approver."""


class Backend(Protocol):
    """What a Toolbox needs from the gateway, in the gateway's own words."""

    async def enabled(self, agent: str, tenant_id: str) -> list[ToolInfo]:
        """Tier 3: the tools and actions ``agent`` may call."""
        ...

    async def unavailable(self, agent: str, tenant_id: str) -> list[UnavailableInfo]:
        """The tools the agent's profile names but it may not call, each with why."""
        ...

    async def metadata(self, agent: str, tenant_id: str, tool: str) -> ToolMetadata | None:
        """The semantics of an enabled tool; ``None`` when ``agent`` may not call it."""
        ...

    async def execute(self, request: CallRequest, agent: str, tenant_id: str) -> CallResult:
        ...

    async def check(self, request: CallRequest, agent: str, tenant_id: str) -> CallResult | None:
        """Ask the gate without executing: ``None`` when the call may run now, else the
        result that stops it (an approval or a preview created as a call creates it)."""
        ...

    async def execute_batch(self, requests: Sequence[CallRequest], mode: str, agent: str,
                            tenant_id: str) -> list[CallResult]:
        ...

    async def supersede(self, turn_group_id: str, tenant_id: str) -> bool:
        """Stop the later irreversible calls of that turn group (SPEC §2 supersede)."""
        ...

    async def decide_turn(self, turn_group_id: str, decision: str, tenant_id: str,
                          **fields: Any) -> TurnDecided:
        """Record a supersede decision (seed 004 §10) in the audit; ``fields``: ``agent``,
        ``tool``, ``action``, ``continued_as``, ``pending``, ``note``."""
        ...

    async def approval(self, approval_id: str, tenant_id: str) -> Approval:
        ...

    async def decide(self, approval_id: str, decision: Decision, tenant_id: str, *,
                     by: Approver = None, note: str | None = None,
                     edited_arguments: Any = None) -> Approval:
        """Approve, deny or confirm as ``by``."""
        ...

    async def wait_for_decision(self, approval_id: str, tenant_id: str,
                                timeout_s: float) -> Approval:
        """The approval once decided (approved, denied, consumed, expired), else its pending
        state after ``timeout_s`` seconds."""
        ...

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run one of the backend's coroutines from synchronous code."""
        ...
