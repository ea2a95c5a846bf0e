"""MCP tasks (the tasks extension ``io.modelcontextprotocol/tasks``, ``toolkeeper.mcp.tasks``)
in the store every worker and replica shares.

A task is found only by its id together with its tenant and agent (anything else reads as
absent), and only until ``expires_at``. Every change is a compare-and-set on the row's
state, so two workers polling the same task never both run its call: :meth:`claim` takes
it once (or again only after a dead runner's lease ran out), and a terminal status
(completed, failed, cancelled) is never left. Times: epoch seconds of the caller's clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import and_, case, insert, or_, select, update

from toolkeeper.store.db import Database, delete_chunked
from toolkeeper.store.schema import mcp_tasks as tasks

TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRow:
    id: str
    tenant_id: str
    agent: str
    tool: str
    status: str
    phase: str
    """``running`` (the call runs), ``approval`` / ``confirm`` (waits for a human),
    ``upstream`` (waits for answers to an upstream tool's questions), ``done``."""
    status_message: str | None
    approval_id: str | None
    request: dict[str, Any]
    input_requests: dict[str, Any] | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    poll_ms: int
    created_at: float
    updated_at: float
    expires_at: float
    lease_until: float | None


class McpTaskRepo:
    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, row: TaskRow) -> None:
        with self._db.write() as conn:
            conn.execute(insert(tasks).values(**asdict(row)))

    def get(self, task_id: str, tenant_id: str, agent: str, now: float) -> TaskRow | None:
        """The agent's task, or ``None`` (unknown, another's, or expired: all the same)."""
        c = tasks.c
        with self._db.read() as conn:
            found = conn.execute(select(tasks).where(
                c.id == task_id, c.tenant_id == tenant_id, c.agent == agent,
                c.expires_at > now)).first()
        return TaskRow(**found._mapping) if found is not None else None

    def claim(self, task_id: str, phases: tuple[str, ...], now: float, lease_s: float) -> bool:
        """Take the task's call to run it: from one of ``phases``, or from ``running`` when
        that run's lease ran out. ``True`` for exactly one claimer."""
        c = tasks.c
        return self._set(and_(or_(c.phase.in_(phases),
                                  and_(c.phase == "running", c.lease_until < now))),
                         task_id, now, phase="running", status="working",
                         lease_until=now + lease_s, input_requests=None,
                         status_message="running the call")

    def wait(self, task_id: str, now: float, *, phase: str, status: str, message: str,
             approval_id: str, input_requests: dict[str, Any] | None,
             expires_at: float) -> bool:
        """The running call stopped for a human: wait for its approval or confirmation
        (the task's expiry only ever moves later: its announced ``ttlMs`` holds)."""
        later = case((tasks.c.expires_at > expires_at, tasks.c.expires_at), else_=expires_at)
        return self._set(tasks.c.phase == "running", task_id, now, phase=phase,
                         status=status, status_message=message, approval_id=approval_id,
                         input_requests=input_requests, lease_until=None, expires_at=later)

    def finish(self, task_id: str, now: float, *, status: str, message: str | None,
               result: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None) -> bool:
        """completed / failed with the call's answer (``False``: cancelled meanwhile)."""
        return self._set(tasks.c.phase == "running", task_id, now, phase="done",
                         status=status, status_message=message, result=result, error=error,
                         lease_until=None, input_requests=None)

    def ask(self, task_id: str, now: float, *, phases: tuple[str, ...],
            updated_at: float | None = None, **values: Any) -> bool:
        """An upstream's questions (``toolkeeper.mcp.task_asks``): park the running call,
        keep answers, resume it. Compare-and-set on the phase and, when given, on the row's
        last update (two answers at once: one wins; the other's keys stay open in tasks/get)."""
        c = tasks.c
        cond: Any = c.phase.in_(phases)
        if updated_at is not None:
            cond = and_(cond, c.updated_at == updated_at)
        return self._set(cond, task_id, now, **values)

    def cancel(self, task_id: str, now: float) -> bool:
        """Cancelled unless already terminal; ``True`` when this call cancelled it."""
        return self._set(None, task_id, now, phase="done", status="cancelled",
                         status_message="cancelled by the client", input_requests=None,
                         lease_until=None)

    def _set(self, where: Any, task_id: str, now: float, **values: Any) -> bool:
        c = tasks.c
        cond = [c.id == task_id, c.status.not_in(TERMINAL)]
        if where is not None:
            cond.append(where)
        with self._db.write() as conn:
            res = conn.execute(update(tasks).where(*cond).values(updated_at=now, **values))
            return bool(res.rowcount == 1)

    def purge_expired(self, now: float, chunk: int = 200,
                      stop: Callable[[], bool] = lambda: False) -> int:
        """Delete the tasks past their expiry (they already read as absent)."""
        return delete_chunked(self._db, tasks, tasks.c.id, (tasks.c.expires_at < now,),
                              chunk, stop)
