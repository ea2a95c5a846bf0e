"""The Toolbox (seed 004 §4): one agent's facade over a backend — what it may call, what it
could have and why not, a tool's semantics, and calls that carry the turn they belong to.

Every method is a coroutine with a ``*_sync`` twin. Stopped calls (denied, awaiting
approval, superseded, failed) come back as :class:`CallResult` with a stable ``reason``;
nothing here raises for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any

from toolkeeper.model.call import CallRequest, CallResult
from toolkeeper.toolbox.backend import Approver, Backend
from toolkeeper.toolbox.decisions import Decide, Maybe, SupersedeGuard, new_turn_group_id
from toolkeeper.toolbox.types import Approval, ToolInfo, ToolMetadata, UnavailableInfo

BatchItem = CallRequest | Mapping[str, Any]
"""A batch entry: a :class:`CallRequest`, or its fields as a mapping (``critical`` too)."""


class Toolbox:
    """The tools of ``agent`` (of ``tenant_id``) over ``backend``."""

    def __init__(self, backend: Backend, *, agent: str, tenant_id: str = "default") -> None:
        self.backend = backend
        self.agent = agent
        self.tenant_id = tenant_id
        # per toolbox, so two toolboxes in one task never see each other's turn
        self._turn: ContextVar[str | None] = ContextVar(f"toolkeeper_turn_{id(self)}",
                                                        default=None)

    # -- discovery ---------------------------------------------------------------------

    async def enabled(self) -> list[ToolInfo]:
        """The tools and actions the agent may call now (tier 3)."""
        return await self.backend.enabled(self.agent, self.tenant_id)

    async def unavailable(self) -> list[UnavailableInfo]:
        """The tools the agent's profile names but it may not call, with ``why_unavailable``
        (so the agent can say what an admin could enable)."""
        return await self.backend.unavailable(self.agent, self.tenant_id)

    async def metadata(self, tool: str) -> ToolMetadata | None:
        """Side effects, risk, confirmation and compensation of an enabled tool; ``None``
        when the agent may not call it."""
        return await self.backend.metadata(self.agent, self.tenant_id, tool)

    # -- calls -------------------------------------------------------------------------

    @property
    def turn_group_id(self) -> str | None:
        """The turn group of the innermost :meth:`turn` entered here, if any."""
        return self._turn.get()

    async def execute(self, tool: str, arguments: Any = None, *, action: str | None = None,
                      idempotency_key: str | None = None, turn_group_id: str | None = None,
                      **fields: Any) -> CallResult:
        """Run one call. ``fields``: ``approval_id``, ``preview_token``, ``task_id``,
        ``step_id``, ``trace_id``, ``scopes`` (see :class:`CallRequest`)."""
        request = CallRequest(tool=tool, action=action,
                              arguments={} if arguments is None else arguments,
                              idempotency_key=idempotency_key,
                              turn_group_id=turn_group_id or self._turn.get(), **fields)
        return await self.backend.execute(request, self.agent, self.tenant_id)

    async def check(self, tool: str, arguments: Any = None, *, action: str | None = None,
                    idempotency_key: str | None = None, turn_group_id: str | None = None,
                    **fields: Any) -> CallResult | None:
        """Ask the gate about a call without running it: ``None`` when it may run now, else
        the result that stops it — an approval or a preview is created as :meth:`execute`
        creates it, a refusal recorded once. For frameworks that run checks of their own
        between the gate and the tool; the call itself is then :meth:`execute`. Limits
        are counted by that call, not the check."""
        request = CallRequest(tool=tool, action=action,
                              arguments={} if arguments is None else arguments,
                              idempotency_key=idempotency_key,
                              turn_group_id=turn_group_id or self._turn.get(), **fields)
        return await self.backend.check(request, self.agent, self.tenant_id)

    async def execute_batch(self, requests: Iterable[BatchItem], *,
                            mode: str = "sequential") -> list[CallResult]:
        """Run several calls (SPEC §5), results in request order. In ``sequential`` mode a
        failed call whose ``critical`` flag is set stops the batch and rolls back completed
        compensatable calls; a call without the flag is critical when its risk is."""
        turn = self._turn.get()
        batch = [self._request(item, turn) for item in requests]
        return await self.backend.execute_batch(batch, mode, self.agent, self.tenant_id)

    @staticmethod
    def _request(item: BatchItem, turn: str | None) -> CallRequest:
        req = item if isinstance(item, CallRequest) else CallRequest(**item)
        if req.turn_group_id is None and turn is not None:
            req = CallRequest(**{**_fields(req), "turn_group_id": turn})
        return req

    def turn(self, turn_group_id: str | None = None) -> Turn:
        """A turn (``with``/``async with``): calls made inside carry its ``turn_group_id``
        (a new one unless given — pass the framework's run id to make retries dedupe)."""
        return Turn(self, turn_group_id or new_turn_group_id())

    def guard(self, *, has_pending: Callable[[], Maybe[bool]], decide: Decide,
              absorb: Callable[[], Maybe[object]] | None = None,
              pending_count: Callable[[], Maybe[int]] | None = None,
              turn_group_id: str | None = None) -> SupersedeGuard:
        """A turn that, before each irreversible call while ``has_pending()`` says new user
        messages wait, asks ``decide`` (supersede, absorb, force_complete or queue),
        records the decision in the audit and lets the turn group — so the keys — follow
        it (seed 004 §10; :mod:`toolkeeper.toolbox.decisions`). The turn group: the given
        one, else the :meth:`turn` entered here, else a new one."""
        return SupersedeGuard(toolbox=self, has_pending=has_pending, decide=decide,
                              absorb=absorb, pending_count=pending_count,
                              turn_group_id=turn_group_id or self._turn.get()
                              or new_turn_group_id())

    async def supersede(self, turn_group_id: str) -> bool:
        """A newer turn replaces that one: its later irreversible calls stop with
        ``superseded`` (pure and reversible ones still run)."""
        return await self.backend.supersede(turn_group_id, self.tenant_id)

    # -- approvals ---------------------------------------------------------------------

    async def approval(self, approval_id: str) -> Approval:
        return await self.backend.approval(approval_id, self.tenant_id)

    async def approve(self, approval_id: str, *, by: Approver = None, note: str | None = None,
                      edited_arguments: Any = None) -> Approval:
        """Approve as ``by`` (never the requesting agent); then execute the same call again
        (same arguments and turn, or the same ``idempotency_key``) to run it once."""
        return await self.backend.decide(approval_id, "approve", self.tenant_id, by=by,
                                         note=note, edited_arguments=edited_arguments)

    async def deny(self, approval_id: str, *, by: Approver = None,
                   note: str | None = None) -> Approval:
        return await self.backend.decide(approval_id, "deny", self.tenant_id, by=by, note=note)

    async def confirm(self, approval_id: str, *, by: Approver = None) -> Approval:
        """Resolve a ``confirm`` gate (the agent's own user may)."""
        return await self.backend.decide(approval_id, "confirm", self.tenant_id, by=by)

    async def wait_for_decision(self, approval_id: str, *, timeout_s: float) -> Approval:
        """The approval once a human decided it (or it expired), else still pending after
        ``timeout_s`` seconds — bounded, for a loop that waits instead of pausing."""
        return await self.backend.wait_for_decision(approval_id, self.tenant_id, timeout_s)

    # -- blocking twins ----------------------------------------------------------------

    def enabled_sync(self) -> list[ToolInfo]:
        return self.backend.run_sync(self.enabled())

    def unavailable_sync(self) -> list[UnavailableInfo]:
        return self.backend.run_sync(self.unavailable())

    def metadata_sync(self, tool: str) -> ToolMetadata | None:
        return self.backend.run_sync(self.metadata(tool))

    def execute_sync(self, tool: str, arguments: Any = None, **kwargs: Any) -> CallResult:
        return self.backend.run_sync(self.execute(tool, arguments, **kwargs))

    def execute_batch_sync(self, requests: Iterable[BatchItem], *,
                           mode: str = "sequential") -> list[CallResult]:
        return self.backend.run_sync(self.execute_batch(requests, mode=mode))

    def supersede_sync(self, turn_group_id: str) -> bool:
        return self.backend.run_sync(self.supersede(turn_group_id))

    def approval_sync(self, approval_id: str) -> Approval:
        return self.backend.run_sync(self.approval(approval_id))

    def approve_sync(self, approval_id: str, **kwargs: Any) -> Approval:
        return self.backend.run_sync(self.approve(approval_id, **kwargs))

    def deny_sync(self, approval_id: str, **kwargs: Any) -> Approval:
        return self.backend.run_sync(self.deny(approval_id, **kwargs))

    def confirm_sync(self, approval_id: str, **kwargs: Any) -> Approval:
        return self.backend.run_sync(self.confirm(approval_id, **kwargs))

    def wait_for_decision_sync(self, approval_id: str, *, timeout_s: float) -> Approval:
        return self.backend.run_sync(self.wait_for_decision(approval_id, timeout_s=timeout_s))


def _fields(req: CallRequest) -> dict[str, Any]:
    return {name: getattr(req, name) for name in req.__slots__}


class Turn:
    """One turn of the agent: every call made in it carries :attr:`turn_group_id`."""

    def __init__(self, toolbox: Toolbox, turn_group_id: str) -> None:
        self.toolbox = toolbox
        self.turn_group_id = turn_group_id
        self._tokens: list[Token[str | None]] = []

    async def execute(self, tool: str, arguments: Any = None, **kwargs: Any) -> CallResult:
        return await self.toolbox.execute(tool, arguments, turn_group_id=self.turn_group_id,
                                          **kwargs)

    def execute_sync(self, tool: str, arguments: Any = None, **kwargs: Any) -> CallResult:
        return self.toolbox.execute_sync(tool, arguments, turn_group_id=self.turn_group_id,
                                         **kwargs)

    async def execute_batch(self, requests: Iterable[BatchItem], *,
                            mode: str = "sequential") -> list[CallResult]:
        batch = [Toolbox._request(item, self.turn_group_id) for item in requests]
        return await self.toolbox.execute_batch(batch, mode=mode)

    async def supersede(self) -> bool:
        """This turn is replaced: its later irreversible calls stop."""
        return await self.toolbox.supersede(self.turn_group_id)

    def supersede_sync(self) -> bool:
        return self.toolbox.supersede_sync(self.turn_group_id)

    def __enter__(self) -> Turn:
        self._tokens.append(self.toolbox._turn.set(self.turn_group_id))
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.toolbox._turn.reset(self._tokens.pop())

    async def __aenter__(self) -> Turn:
        return self.__enter__()

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(kind, exc, tb)
