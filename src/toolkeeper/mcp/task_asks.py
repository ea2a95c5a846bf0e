"""An upstream tool's questions inside an MCP task (SEP-2322 rounds on the tasks surface,
SEP-2663): the task parks ``input_required`` with the upstream's ``inputRequests``,
``tasks/update`` collects the answers (a subset at a time: the task stays
``input_required`` with the keys still open) and, once every key is answered, runs the call
again upstream with the answers and the upstream's ``requestState`` — once, whichever
request gave the last answer — until it completes or asks again (at most
``asking.MAX_ROUNDS`` rounds).

The upstream's state, its questions and the answers so far live in the task's row, sealed
like its arguments (AES-GCM bound to the task, its tenant and agent). A ``tools/call`` retry
answering an upstream's round (the SEP-2322 loop in ``tools/call``) from a client that
declared the tasks extension becomes a task too: the upstream has what it asked for and
the call runs in the background (SEP-2663's MRTR → task composition).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import mcp_types as types
from pydantic import BaseModel, ValidationError

from toolkeeper.mcp.input_required import Ctx, responses
from toolkeeper.mcp.task_wire import ArgumentSeal, declared, envelope
from toolkeeper.model.call import CallRequest, Principal
from toolkeeper.model.mcp_names import Listed
from toolkeeper.store.mcp_tasks import McpTaskRepo, TaskRow
from toolkeeper.upstream import asking

T = TypeVar("T")

KEY = "upstream"
"""Where the sealed round lives in the task row's stored request."""
WAIT_S = 3600.0
"""How long a task waits for the answers to an upstream's questions."""
KEEP_S = 3600.0
"""And stays readable after that (as ``toolkeeper.mcp.tasks.KEEP_S``)."""
ANSWER: dict[str, type[BaseModel]] = {"elicitation/create": types.ElicitResult,
                                      "sampling/createMessage": types.CreateMessageResult,
                                      "roots/list": types.ListRootsResult}


class Tasks(Protocol):
    """What this module needs of :class:`toolkeeper.mcp.tasks.Tasks`."""

    repo: McpTaskRepo

    async def _db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

    def _seal(self) -> ArgumentSeal: ...

    def _stored(self, request: CallRequest, task_id: str, who: Principal
                ) -> dict[str, Any]: ...

    def _lease(self, who: Principal, tool: str) -> float: ...

    async def _rerun(self, row: TaskRow) -> CallRequest: ...

    def _spawn(self, who: Principal, row: TaskRow, request: CallRequest,
               resume: dict[str, Any] | None = None) -> None: ...

    async def _create(self, who: Principal, name: str, request: CallRequest, *, phase: str,
                      status: str, wait_s: float, message: str, lease_s: float | None = None,
                      approval_id: str | None = None,
                      input_requests: dict[str, Any] | None = None
                      ) -> tuple[TaskRow, CallRequest]: ...


class TaskAsks:
    """The upstream rounds of one face's tasks (:class:`toolkeeper.mcp.tasks.Tasks`)."""

    def __init__(self, tasks: Tasks) -> None:
        self.tasks = tasks

    # -- sealed at rest -------------------------------------------------------------------

    def _open(self, row: TaskRow) -> dict[str, Any] | None:
        sealed = row.request.get(KEY)
        if not isinstance(sealed, str):
            return None
        opened = self.tasks._seal().open(sealed, f"{row.id}#{KEY}", row.tenant_id, row.agent)
        return opened if isinstance(opened, dict) else None

    def _with(self, stored: dict[str, Any], row_id: str, tenant_id: str, agent: str,
              round_: dict[str, Any]) -> dict[str, Any]:
        sealed = self.tasks._seal().seal(round_, f"{row_id}#{KEY}", tenant_id, agent)
        return {**stored, KEY: sealed}

    @staticmethod
    def resume_of(round_: dict[str, Any] | None) -> dict[str, Any] | None:
        """What goes back upstream once every question is answered (else ``None``)."""
        if round_ is None or set(round_["asked"]) - set(round_["answers"]):
            return None
        state = round_.get("state")
        return {"inputResponses": round_["answers"], **({"requestState": state} if state
                                                         else {})}

    @staticmethod
    def still_open(pending: dict[str, Any], answers: dict[str, Any]) -> dict[str, Any]:
        """The questions not answered yet: the task stays ``input_required`` until none."""
        return {k: v for k, v in pending.items() if k not in answers}

    def resume_stored(self, row: TaskRow) -> dict[str, Any] | None:
        """A resumed run's answers again (a dead runner's task taken over)."""
        return self.resume_of(self._open(row))

    # -- the run stopped on the upstream's questions ---------------------------------------

    async def park(self, who: Principal, task_id: str, request: CallRequest,
                   asked: dict[str, Any]) -> None:
        t = self.tasks
        now = time.time()
        row = await t._db(t.repo.get, task_id, who.tenant_id, who.agent or "", now)
        if row is None:
            return
        before = self._open(row)
        rounds = int(before["rounds"]) + 1 if before is not None else 1
        if rounds > asking.MAX_ROUNDS:
            oops = f"the upstream tool asked more than {asking.MAX_ROUNDS} rounds of questions"
            await t._db(t.repo.finish, task_id, now, status="failed", message=oops,
                        error={"code": types.INTERNAL_ERROR, "message": oops})
            return
        requests: dict[str, Any] = asked["requests"]  # bounded and typed by asking
        round_: dict[str, Any] = {"state": asked.get("state"), "asked": sorted(requests),
                                  "answers": {}, "rounds": rounds}
        stored = self._with(t._stored(request, task_id, who), task_id, who.tenant_id,
                            who.agent or "", round_)
        await t._db(t.repo.ask, task_id, now, phases=("running",), phase=KEY,
                    status="input_required", input_requests=requests, request=stored,
                    lease_until=None, expires_at=now + WAIT_S + KEEP_S,
                    status_message=f"the tool asks {len(requests)} question(s) (round "
                                   f"{rounds}): answer them with tasks/update")

    # -- tasks/update -----------------------------------------------------------------------

    async def update(self, who: Principal, row: TaskRow, given: dict[str, Any]) -> None:
        """Answers to the keys still open (others, and malformed answers, are ignored); the
        last one resumes the call."""
        round_ = self._open(row)
        pending = row.input_requests or {}
        if round_ is None or row.phase != KEY:
            return
        answers = dict(round_["answers"])
        for key, raw in responses(given).items():
            kind = ANSWER.get(str((pending.get(key) or {}).get("method")))
            if kind is None:
                continue
            try:
                kind.model_validate(raw)
            except ValidationError:
                continue  # not an answer: the question stays open
            answers[key] = raw
        if answers == round_["answers"]:
            return
        round_ = {**round_, "answers": responses(answers)}  # bounded in all, too
        left = self.still_open(pending, answers)
        t = self.tasks
        stored = self._with(row.request, row.id, row.tenant_id, row.agent, round_)
        now = time.time()
        if left:
            await t._db(t.repo.ask, row.id, now, phases=(KEY,), updated_at=row.updated_at,
                        input_requests=left, request=stored)
            return
        lease = t._lease(who, str(row.request["tool"]))
        if await t._db(t.repo.ask, row.id, now, phases=(KEY,), updated_at=row.updated_at,
                       phase="running", status="working", input_requests=None,
                       request=stored, lease_until=now + lease,
                       status_message="running the call with the answers"):
            t._spawn(who, row, await t._rerun(row), self.resume_of(round_))

    # -- tools/call: a retry answering an upstream's round ---------------------------------

    async def escalate(self, ctx: Ctx, who: Principal, entry: Listed, request: CallRequest,
                       resume: dict[str, Any]) -> dict[str, Any] | None:
        """A 2026-07-28 retry with the answers, from a client that declared the tasks
        extension: the call runs in the background as a task (``CreateTaskResult``)."""
        if not declared(ctx):
            return None
        t = self.tasks
        lease = t._lease(who, entry.tool)
        row, request = await t._create(who, entry.name, request, phase="running",
                                       status="working", wait_s=lease, lease_s=lease,
                                       message="running the call with the answers")
        answers = resume.get("inputResponses") or {}
        round_: dict[str, Any] = {"state": resume.get("requestState"),
                                  "asked": sorted(answers), "answers": answers, "rounds": 1}
        stored = self._with(row.request, row.id, row.tenant_id, row.agent, round_)
        await t._db(t.repo.ask, row.id, time.time(), phases=("running",), request=stored)
        t._spawn(who, row, request, resume)
        return {"resultType": "task", **envelope(row)}
