"""Supersede decisions (seed 004 §6, §10): before an irreversible call, if new user messages
are pending, the agent's runtime is asked what to do, the decision is recorded in the
audit, and the turn group — and so the calls' keys — follow it.

- ``SUPERSEDE``: the turn group is superseded; the call (and every later irreversible one
  of the turn) stops with ``superseded``, recorded; the new messages start a new turn.
- ``ABSORB``: the runtime's ``absorb`` takes the messages in; the call goes on in the same
  turn group, so a re-run of it (the regenerated answer plans it again) dedupes.
- ``FORCE_COMPLETE``: the call goes on as planned, in the same turn group.
- ``QUEUE``: the call goes on under a new turn group: new keys, so it may run again.

Keys follow the turn group when the gateway derives them (no explicit
``idempotency_key``): ``{tool}:{action}:{business key}:turn_group:{id}``.
Pure and reversible calls, and calls with no messages pending, are not asked about.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypeVar

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import SideEffect
from toolkeeper.model.turns import SupersedeAction
from toolkeeper.model.wire import TurnDecided
from toolkeeper.toolbox.backend import Backend
from toolkeeper.toolbox.types import ToolMetadata

T = TypeVar("T")
Maybe: TypeAlias = T | Awaitable[T]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedCall:
    """The irreversible call the runtime is asked about."""

    tool: str
    arguments: Any
    action: str | None
    turn_group_id: str
    metadata: ToolMetadata


class Box(Protocol):
    """What the guard needs of a :class:`~toolkeeper.toolbox.Toolbox`."""

    backend: Backend
    agent: str
    tenant_id: str

    async def metadata(self, tool: str) -> ToolMetadata | None: ...

    async def execute(self, tool: str, arguments: Any = None, *, action: str | None = None,
                      idempotency_key: str | None = None, turn_group_id: str | None = None,
                      **fields: Any) -> CallResult: ...


Decide = Callable[[PlannedCall], Maybe[SupersedeAction | str]]
"""The runtime's decision function (the seed's brain): sync or async."""


async def _settle(value: Maybe[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass(kw_only=True)
class SupersedeGuard:
    """One agent turn that asks ``decide`` before each irreversible call while
    ``has_pending()`` says new user messages wait (see the module's docstring)."""

    toolbox: Box
    turn_group_id: str
    """The turn group calls go in now (a ``queue`` decision moves it to a new one)."""
    has_pending: Callable[[], Maybe[bool]]
    decide: Decide
    absorb: Callable[[], Maybe[object]] | None = None
    """Takes the pending messages into the turn (an ``absorb`` decision)."""
    pending_count: Callable[[], Maybe[int]] | None = None
    """How many messages wait (recorded with the decision)."""
    decisions: list[TurnDecided] = field(default_factory=list)
    """The decisions taken in this turn, as recorded."""
    superseded: bool = False

    async def execute(self, tool: str, arguments: Any = None, *, action: str | None = None,
                      **fields: Any) -> CallResult:
        """Run one call, first deciding about pending messages if it is irreversible.
        ``fields`` as :meth:`Toolbox.execute` takes them (not ``turn_group_id``: the
        turn's, which the decision may change)."""
        if not self.superseded and await _settle(self.has_pending()):
            meta = await self.toolbox.metadata(tool)
            if meta is not None and _irreversible(meta, action):
                await self._decide(PlannedCall(tool=tool, arguments=arguments, action=action,
                                               turn_group_id=self.turn_group_id,
                                               metadata=meta))
        return await self.toolbox.execute(tool, arguments, action=action,
                                          turn_group_id=self.turn_group_id, **fields)

    def execute_sync(self, tool: str, arguments: Any = None, **kwargs: Any) -> CallResult:
        return self.toolbox.backend.run_sync(self.execute(tool, arguments, **kwargs))

    async def _decide(self, planned: PlannedCall) -> None:
        decision = SupersedeAction(await _settle(self.decide(planned)))
        if decision is SupersedeAction.ABSORB and self.absorb is None:
            raise ValueError("an absorb decision needs the guard's absorb callback")
        continued_as = new_turn_group_id() if decision is SupersedeAction.QUEUE else None
        pending = None if self.pending_count is None else await _settle(self.pending_count())
        # recorded first: the audit says why before the call's own events follow
        recorded = await self.toolbox.backend.decide_turn(
            self.turn_group_id, decision.value, self.toolbox.tenant_id,
            agent=self.toolbox.agent, tool=planned.tool, action=planned.action,
            continued_as=continued_as, pending=pending)
        self.decisions.append(recorded)
        if decision is SupersedeAction.SUPERSEDE:
            self.superseded = True  # the gateway stops this and later irreversible calls
        elif decision is SupersedeAction.ABSORB:
            assert self.absorb is not None
            await _settle(self.absorb())
        elif decision is SupersedeAction.QUEUE:
            self.turn_group_id = recorded.continued_as or self.turn_group_id


def new_turn_group_id() -> str:
    return f"turn-{uuid.uuid4().hex}"


def _irreversible(meta: ToolMetadata, action: str | None) -> bool:
    effect = meta.side_effects.get(action) if action else None
    return (effect or meta.side_effect) is SideEffect.IRREVERSIBLE
