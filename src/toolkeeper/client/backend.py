"""The remote backend: a Toolbox over a ``toolkeeper serve`` through :class:`AsyncClient`.

The same answers as the in-process backend, read from the REST face: listings from
``/discovery/agents/{agent}/…``, a tool's semantics from ``GET /tools/{id}``, calls from
``/tools/execute`` and ``/tools/execute-batch`` (each call's ``critical`` flag included).
The server decides everything; the client's token fixes the tenant, so the ``tenant_id``
the protocol passes is not sent.

Decisions are made as a person, never with the agent's own token: ``by`` is an approver
token, used by a second client for that one decision; without it the backend's
``approver_token``, else the decision is refused (``forbidden``) before anything is sent.
A confirmation is the exception: the requesting agent's own user may confirm, so without
an approver it is sent with the agent's token and the server decides.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from toolkeeper.client._models import Approval as RestApproval
from toolkeeper.client._models import DiscoveredTool, ToolView, TurnDecided
from toolkeeper.errors import OperationRefused, UserError
from toolkeeper.model.call import CallRequest, CallResult, Principal
from toolkeeper.model.enums import ApprovalStatus, Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import Compensation
from toolkeeper.toolbox.backend import Approver, Decision
from toolkeeper.toolbox.types import Approval, ToolInfo, ToolMetadata, UnavailableInfo

if TYPE_CHECKING:  # the client hands itself in; only its type is needed here
    from toolkeeper.client._async import AsyncApprovals, AsyncClient

T = TypeVar("T")


class RemoteBackend:
    """Runs a Toolbox's calls on the server ``client`` talks to (as the client's token).

    ``approver_token`` decides when a decision names no one. ``loop``: the event loop the
    client lives on when it is not the caller's (the blocking :class:`Client`'s own thread);
    every request then runs there, and :meth:`run_sync` blocks on it."""

    def __init__(self, client: AsyncClient, *, approver_token: str | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.client = client
        self._approver_token = approver_token
        self._loop = loop

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """``coro`` on the client's loop (httpx connections belong to one loop)."""
        if self._loop is None or _running_loop() is self._loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    # -- discovery ---------------------------------------------------------------------

    async def enabled(self, agent: str, tenant_id: str) -> list[ToolInfo]:
        return [_info(t) for t in await self._enabled(agent)]

    async def _enabled(self, agent: str) -> list[DiscoveredTool]:
        return (await self._on_loop(self.client.discovery.enabled(agent))).tools

    async def unavailable(self, agent: str, tenant_id: str) -> list[UnavailableInfo]:
        listing = await self._on_loop(self.client.discovery.unavailable(agent))
        return [UnavailableInfo(name=t.name, description=t.description,
                                why_unavailable=t.why_unavailable or "",
                                message=t.message or "",
                                missing_scopes=tuple(t.missing_scopes),
                                categories=tuple(t.categories))
                for t in listing.tools]

    async def metadata(self, agent: str, tenant_id: str, tool: str) -> ToolMetadata | None:
        listed = next((t for t in await self._enabled(agent) if t.name == tool), None)
        if listed is None or listed.id is None:
            return None
        try:
            view = await self._on_loop(self.client.discovery.tool(listed.id))
        except OperationRefused as exc:
            if exc.reason == Reason.NOT_FOUND:  # no longer callable since the listing
                return None
            raise
        return _metadata(view, listed.actions)

    # -- calls -------------------------------------------------------------------------

    async def execute(self, request: CallRequest, agent: str, tenant_id: str) -> CallResult:
        # an agent token runs as its agent; an operator's token acts for ``agent``
        return await self._on_loop(self.client.execute_request(request, agent=agent))

    async def check(self, request: CallRequest, agent: str, tenant_id: str) -> CallResult | None:
        return await self._on_loop(self.client.check_request(request, agent=agent))

    async def execute_batch(self, requests: Sequence[CallRequest], mode: str, agent: str,
                            tenant_id: str) -> list[CallResult]:
        if mode not in ("sequential", "parallel_safe"):
            raise UserError(f"unknown batch mode {mode!r}; known: parallel_safe, sequential")
        return await self._on_loop(self.client.execute_batch(
            requests, mode="sequential" if mode == "sequential" else "parallel_safe",
            agent=agent))

    async def supersede(self, turn_group_id: str, tenant_id: str) -> bool:
        return (await self._on_loop(self.client.supersede(turn_group_id))).changed

    async def decide_turn(self, turn_group_id: str, decision: str, tenant_id: str,
                          **fields: Any) -> TurnDecided:
        fields.pop("agent", None)  # the server records the token's own agent
        return await self._on_loop(self.client.decide_turn(turn_group_id, decision,
                                                           **fields))

    # -- approvals ---------------------------------------------------------------------

    async def approval(self, approval_id: str, tenant_id: str) -> Approval:
        return approval_of(await self._on_loop(self.client.approvals.get(approval_id)))

    async def decide(self, approval_id: str, decision: Decision, tenant_id: str, *,
                     by: Approver = None, note: str | None = None,
                     edited_arguments: Any = None) -> Approval:
        token = self._token(by, decision)
        return await self._on_loop(self._decide(token, approval_id, decision, note,
                                                edited_arguments))

    async def _decide(self, token: str | None, approval_id: str, decision: Decision,
                      note: str | None, edited_arguments: Any) -> Approval:
        if token is None:  # a confirmation by the requesting agent's own user
            return approval_of(await self.client.approvals.confirm(approval_id))
        async with self.client.with_token(token) as person:
            return approval_of(await _send(person.approvals, approval_id, decision, note,
                                           edited_arguments))

    def _token(self, by: Approver, decision: Decision) -> str | None:
        if isinstance(by, Principal):
            raise UserError("a remote decision is made with a token: pass by= an approver "
                            "token (a Principal decides in-process only)")
        if by is not None:
            return by
        if self._approver_token is None and decision != "confirm":
            raise OperationRefused(Reason.FORBIDDEN, (
                f"to {decision} needs an approver, never the agent itself: pass by= an "
                "approver token, or client.toolbox(agent, approver_token=...)"))
        return self._approver_token

    async def wait_for_decision(self, approval_id: str, tenant_id: str,
                                timeout_s: float) -> Approval:
        return approval_of(await self._on_loop(
            self.client.approvals.wait_for_decision(approval_id, timeout_s)))

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise UserError(
                "this toolbox is over an AsyncClient, which has no blocking face: await its "
                "methods (and build framework tools with the adapter's async builder: "
                "langchain abuild, openai_agents build_async), or use "
                "Client(...).toolbox(...) from blocking code")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _send(approvals: AsyncApprovals, approval_id: str, decision: Decision,
                note: str | None, edited_arguments: Any) -> RestApproval:
    if decision == "approve":
        return await approvals.approve(approval_id, arguments=edited_arguments, note=note)
    if decision == "deny":
        return await approvals.deny(approval_id, note=note)
    return await approvals.confirm(approval_id)


def _info(t: DiscoveredTool) -> ToolInfo:
    return ToolInfo(name=t.name, description=t.description, version=t.version,
                    actions=tuple(t.actions), input_schemas=t.input_schemas,
                    action_descriptions=t.action_descriptions, names=t.names,
                    categories=tuple(t.categories))


def _metadata(view: ToolView, callable_actions: Sequence[str]) -> ToolMetadata:
    """The semantics of the actions the agent may call (an operator's view has them all)."""
    actions = {a: spec for a, spec in view.actions.items() if a in callable_actions}
    return ToolMetadata(
        name=view.name, version=view.version,
        side_effects={a: SideEffect(spec["side_effect"]) for a, spec in actions.items()},
        risks={a: Risk(spec["risk"]) for a, spec in actions.items()},
        requires_confirmation=view.requires_confirmation,
        confirmation_prompt=view.confirmation_prompt,
        compensation={a: Compensation.model_validate(c) for a, c in view.compensation.items()
                      if a in actions},
        categories=tuple(view.categories))


def approval_of(rest: RestApproval) -> Approval:
    """An approval as the server shows it, as a Toolbox shows it (a pending one past its
    time: expired). The REST view has no preview; its ``summary`` is the preview's line."""
    expires_at = datetime.fromisoformat(rest.expires_at)
    status = ApprovalStatus(rest.status)
    if status is ApprovalStatus.PENDING and expires_at <= datetime.now(UTC):
        status = ApprovalStatus.EXPIRED
    return Approval(id=rest.id, kind=rest.kind, status=status, agent=rest.agent,
                    tool=rest.tool, action=rest.action, arguments=rest.arguments,
                    risk=rest.risk, gate=rest.gate, summary=rest.summary,
                    call_id=rest.call_id, expires_at=expires_at,
                    decided_by=rest.decided_by, note=rest.note,
                    edited_arguments=rest.edited_arguments)
