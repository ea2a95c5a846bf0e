"""The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) over ``/mcp``, driven by
the official SDK client in the 2026-07-28 era (its generic request path: it has no tasks
API): a call waiting for an approver becomes a task the client polls, runs exactly once
after the approver decides over REST, or ends denied, expired or cancelled (never run);
confirmations as ``input_required``; tasks bound to tenant and agent; clients without the
extension keep the synchronous answers."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, ClassVar

import httpx
import mcp_types as types
import pytest
from conformance_upstream import ANSWERED, upstream
from cryptography.exceptions import InvalidTag
from mcp.client.extension import advertise
from mcp.shared.exceptions import MCPError
from mcp_fixtures import McpServer, confirm_with, connect, serving
from pydantic import TypeAdapter
from sqlalchemy import update

from mcp import Client
from toolkeeper import (
    ActionSpec,
    Activation,
    BaseTool,
    ExecutionMeta,
    Profile,
    Risk,
    SideEffect,
    ToolContext,
)
from toolkeeper.mcp import task_asks, task_wire
from toolkeeper.mcp import tasks as tasks_module
from toolkeeper.store.mcp_tasks import McpTaskRepo, TaskRow
from toolkeeper.store.schema import approvals

TASKS = "io.modelcontextprotocol/tasks"
RUNS: list[dict[str, Any]] = []
"""Every execution of :class:`Counted` (the tool must run exactly once per task)."""
_SCHEMA = {"type": "object", "required": ["n"], "properties": {"n": {"type": "string"}}}


class Counted(BaseTool):
    """Moves money (high risk): approve gate at autonomy 0, confirm gate at autonomy 1."""

    tool_name = "counted"
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(input_schema=_SCHEMA)}
    risk_default = Risk.HIGH
    side_effect = SideEffect.IRREVERSIBLE

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        RUNS.append(dict(request))
        await asyncio.sleep(0.2)  # long enough for concurrent polls to overlap the run
        return {"moved": request["n"]}


class Background(BaseTool):
    """A task-supporting tool: runs in the background for a client with the extension."""

    tool_name = "background"
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(input_schema=_SCHEMA)}
    risk_default = Risk.LOW
    side_effect = SideEffect.PURE
    execution = ExecutionMeta(is_pure=True, task_support="required")

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        return {"done": request["n"]}


class Raw(types.Request[dict[str, Any] | None, str]):
    """Any request, through the SDK client's own request path."""


@contextmanager
def tasks_server(url: str) -> Iterator[McpServer]:
    """The MCP fixture server; ``counted`` gated for intern (approve) and sup (confirm)."""
    with serving(url, extra=(Counted, Background)) as s:
        everything = tuple(Activation(tool=n) for n in ("add", "pay", "bank", "counted",
                                                         "background"))
        for name, autonomy in (("manual", 0), ("supervised", 1)):
            s.gw.registry.put_profile(Profile(name=name, autonomy=autonomy,
                                              activations=everything), replace=True)
        s.gw.registry.put_profile(Profile(name="acme", tenant_id="acme", autonomy=0,
                                          activations=everything), replace=True)
        yield s


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    with tasks_server(f"sqlite:///{tmp_path_factory.mktemp('tasks')}/tk.db") as s:
        yield s


@asynccontextmanager
async def tasks_client(srv: McpServer, who: str, era: str = "2026-07-28",
                       declare: bool = True) -> AsyncIterator[Client]:
    extensions = [advertise(TASKS)] if declare else []
    async with connect(srv, who, era, extensions=extensions) as c:
        yield c


async def rpc(c: Client, method: str, **params: Any) -> dict[str, Any]:
    result: dict[str, Any] = await c.session.send_request(
        Raw(method=method, params=params), TypeAdapter(dict))
    return result


async def rpc_error(c: Client, method: str, **params: Any) -> MCPError:
    with pytest.raises(MCPError) as info:
        await rpc(c, method, **params)
    return info.value


def rest(srv: McpServer, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    return httpx.post(f"{srv.base}{path}", json=body or {}, timeout=20,
                      headers={"Authorization": f"Bearer {srv.tokens['admin']}"})


async def settle(c: Client, task_id: str, timeout: float = 15.0) -> dict[str, Any]:
    """Poll (bounded) until the task is terminal."""
    deadline = time.monotonic() + timeout
    while True:
        got = await rpc(c, "tasks/get", taskId=task_id)
        if got["status"] in ("completed", "failed", "cancelled"):
            return got
        assert time.monotonic() < deadline, f"task still {got['status']}"
        await asyncio.sleep(0.1)


async def parked(c: Client, n: str) -> tuple[dict[str, Any], str]:
    """``counted`` called by an agent whose gate stops it: the task and its approval."""
    created = await rpc(c, "tools/call", name="counted", arguments={"n": n})
    assert created["resultType"] == "task" and created["taskId"].startswith("tsk_")
    assert "result" not in created and "requestState" not in created
    approval = created["statusMessage"].split("approval ")[1].split(" ")[0].rstrip(":")
    return created, approval


async def fails(check: Any) -> None:
    """``check`` must fail (an assertion, maybe wrapped by the client's task groups)."""
    caught = False
    try:
        await check
    except* (AssertionError, pytest.fail.Exception):
        caught = True
    assert caught, "the check passed with its rule broken"


def runs_of(n: str) -> int:
    return sum(1 for r in RUNS if r["n"] == n)


async def test_an_approval_is_a_task_that_runs_exactly_once_after_the_approver_decides(
        srv: McpServer) -> None:
    await _round_trip(srv, "once")


@pytest.mark.postgres
async def test_the_round_trip_on_postgresql(pg_url: str) -> None:
    with tasks_server(pg_url) as s:
        await _round_trip(s, "once-pg")


async def _round_trip(srv: McpServer, n: str) -> None:
    async with tasks_client(srv, "intern") as c, tasks_client(srv, "intern") as other:
        created, approval = await parked(c, n)
        assert created["status"] == "working" and isinstance(created["ttlMs"], int)
        assert f"/approvals/{approval}/approve" in created["statusMessage"]
        waiting = await rpc(c, "tasks/get", taskId=created["taskId"])
        assert waiting["status"] == "working" and "result" not in waiting
        assert runs_of(n) == 0
        row = srv.gw.store.mcp_tasks.get(created["taskId"], "default", "intern", time.time())
        assert row is not None and "arguments" not in row.request  # sealed at rest
        assert f'"{n}"' not in json.dumps(row.request)
        assert rest(srv, f"/approvals/{approval}/approve").status_code == 200
        # two clients poll at once, several times: one of them takes the call, once
        polls = [rpc(x, "tasks/get", taskId=created["taskId"]) for x in (c, other, c, other)]
        await asyncio.gather(*polls)
        done = await settle(c, created["taskId"])
        again = await settle(other, created["taskId"])
    assert done["status"] == "completed" and done["result"]["isError"] is False
    assert done["result"]["structuredContent"] == {"moved": n}
    assert again["result"] == done["result"]
    assert runs_of(n) == 1
    assert srv.gw.approvals.get(approval, "default").status.value == "consumed"


@pytest.mark.parametrize("ending", ["denied", "expired"])
async def test_a_denied_or_expired_approval_ends_the_task_without_running(
        srv: McpServer, ending: str) -> None:
    async with tasks_client(srv, "intern") as c:
        created, approval = await parked(c, ending)
        if ending == "denied":
            assert rest(srv, f"/approvals/{approval}/deny").status_code == 200
        else:
            with srv.gw.store.db.write() as conn:
                conn.execute(update(approvals).where(approvals.c.id == approval).values(
                    expires_at=srv.gw.store.approvals.get(approval).created_at))  # type: ignore[union-attr]
        done = await settle(c, created["taskId"])
    # the tool answered nothing: the call's own answer, toolkeeper's reason kept
    assert done["status"] == "completed" and done["result"]["isError"] is True
    assert done["result"]["structuredContent"]["reason"] == f"approval_{ending}"
    assert runs_of(ending) == 0


async def _cancel_before_approval(srv: McpServer) -> None:
    async with tasks_client(srv, "intern") as c:
        created, approval = await parked(c, "cancelled")
        ack = await rpc(c, "tasks/cancel", taskId=created["taskId"])
        assert ack["resultType"] == "complete" and "status" not in ack
        refused = rest(srv, f"/approvals/{approval}/approve")  # withdrawn: nothing to approve
        assert refused.status_code >= 400, refused.text
        got = await rpc(c, "tasks/get", taskId=created["taskId"])
        assert got["status"] == "cancelled" and "result" not in got
        again = await rpc(c, "tasks/cancel", taskId=created["taskId"])  # idempotent
        assert again["resultType"] == "complete"
    rec = srv.gw.approvals.get(approval, "default")
    assert rec.status.value == "denied" and "cancelled" in (rec.note or "")
    assert runs_of("cancelled") == 0


async def test_a_task_cancelled_before_its_approval_never_runs(srv: McpServer) -> None:
    await _cancel_before_approval(srv)


async def test_cancel_that_does_not_cancel_is_caught(srv: McpServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken on purpose (cancel acknowledged, nothing done): the test fails."""
    monkeypatch.setattr(McpTaskRepo, "cancel", lambda self, task_id, now: False)
    await fails(_cancel_before_approval(srv))


async def _isolation(srv: McpServer) -> None:
    async with tasks_client(srv, "intern") as c:
        created, _ = await parked(c, "isolated")
        task_id = created["taskId"]
        unknown = await rpc_error(c, "tasks/get", taskId="tsk_" + "A" * 32)
        assert (unknown.code, unknown.message) == (-32602, "Task not found")
        for who in ("reader", "acme-bot"):  # another agent, another tenant
            async with tasks_client(srv, who) as thief:
                for method, extra in (("tasks/get", {}), ("tasks/cancel", {}),
                                      ("tasks/update", {"inputResponses": {}})):
                    err = await rpc_error(thief, method, taskId=task_id, **extra)
                    assert (err.code, err.message) == (unknown.code, unknown.message)
        still = await rpc(c, "tasks/get", taskId=task_id)
        assert still["status"] == "working"
        await rpc(c, "tasks/cancel", taskId=task_id)


async def test_another_agents_or_tenants_task_is_not_found_like_an_unknown_one(
        srv: McpServer) -> None:
    await _isolation(srv)


async def test_a_lookup_without_the_owner_is_caught(srv: McpServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken on purpose (any caller finds any task by id): the test fails."""
    real = McpTaskRepo.get
    monkeypatch.setattr(McpTaskRepo, "get", lambda self, task_id, tenant_id, agent, now:
                        real(self, task_id, "default", "intern", now))
    await fails(_isolation(srv))


@pytest.mark.parametrize(("answer", "outcome"), [("accept", "moved"), ("decline", "denied")])
async def test_a_confirmation_is_an_input_required_task_answered_by_update(
        srv: McpServer, answer: str, outcome: str) -> None:
    n = f"confirm-{answer}"
    async with tasks_client(srv, "sup") as c:
        created = await rpc(c, "tools/call", name="counted", arguments={"n": n})
        assert created["status"] == "input_required" and "inputRequests" not in created
        got = await rpc(c, "tasks/get", taskId=created["taskId"])
        (key, ask), = got["inputRequests"].items()
        assert ask["method"] == "elicitation/create"
        assert ask["params"]["requestedSchema"]["required"] == ["confirm"]
        assert n in ask["params"]["message"]  # the exact call the user is asked about
        ignored = await rpc(c, "tasks/update", taskId=created["taskId"],
                            inputResponses={"not-asked": {"action": "accept"}})
        assert ignored["resultType"] == "complete"
        assert (await rpc(c, "tasks/get", taskId=created["taskId"]))["status"] == \
            "input_required"
        reply = {"action": "accept", "content": {"confirm": True}} if answer == "accept" \
            else {"action": "decline"}
        await rpc(c, "tasks/update", taskId=created["taskId"], inputResponses={key: reply})
        done = await settle(c, created["taskId"])
    assert done["status"] == "completed"
    if outcome == "moved":
        assert done["result"]["structuredContent"] == {"moved": n}
    else:
        assert done["result"]["structuredContent"]["reason"] == "approval_denied"
    assert runs_of(n) == (1 if outcome == "moved" else 0)


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
async def test_a_client_without_the_extension_gets_the_synchronous_answer(
        srv: McpServer, era: str) -> None:
    # the legacy client declares the extension too: tasks are a 2026-07-28 extension here
    async with tasks_client(srv, "intern", era, declare=era == "legacy") as c:
        r = await c.call_tool("counted", {"n": f"sync-{era}"})
        assert r.is_error and r.structured_content["status"] == "approval_required"
        assert "taskId" not in r.model_dump(by_alias=True)
        err = await rpc_error(c, "tasks/get", taskId="tsk_whatever")
        assert err.code == -32021
    assert runs_of(f"sync-{era}") == 0


async def _without_extension(srv: McpServer) -> None:
    async with tasks_client(srv, "intern", declare=False) as c:
        for method, extra in (("tasks/get", {}), ("tasks/cancel", {}),
                              ("tasks/update", {"inputResponses": {}})):
            err = await rpc_error(c, method, taskId="tsk_whatever", **extra)
            assert err.code == -32021
            assert err.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
        err = await rpc_error(c, "tools/call", name="background", arguments={"n": "x"})
        assert err.code == -32021  # a tool that runs only as a task
        err = await rpc_error(c, "tools/call", name="background", arguments={"n": "x"},
                              inputResponses={"k": {"action": "accept"}})
        assert err.code == -32021  # a retry's answers do not make it synchronous


async def test_tasks_need_the_extension_declared(srv: McpServer) -> None:
    await _without_extension(srv)


async def test_an_undeclared_extension_taken_as_declared_is_caught(
        srv: McpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken on purpose (every request counts as declaring it): the test fails."""
    always: Callable[[Any], bool] = lambda ctx: True  # noqa: E731
    monkeypatch.setattr(task_wire, "declared", always)
    monkeypatch.setattr(tasks_module, "declared", always)
    await fails(_without_extension(srv))


async def test_a_task_tool_runs_in_the_background_and_completes(srv: McpServer) -> None:
    async with tasks_client(srv, "bot") as c:
        created = await rpc(c, "tools/call", name="background", arguments={"n": "bg"})
        assert created["resultType"] == "task"
        done = await settle(c, created["taskId"])
    assert done["result"]["structuredContent"] == {"done": "bg"}


def _row(task_id: str, now: float, **kw: Any) -> TaskRow:
    base: dict[str, Any] = dict(
        id=task_id, tenant_id="default", agent="intern", tool="counted", status="working",
        phase="approval", status_message=None, approval_id="ap_x", request={"tool": "x"},
        input_requests=None, result=None, error=None, poll_ms=500, created_at=now,
        updated_at=now, expires_at=now + 60, lease_until=None)
    return TaskRow(**{**base, **kw})


def test_a_claim_is_taken_once_and_an_expired_task_is_gone(srv: McpServer) -> None:
    repo, now = srv.gw.store.mcp_tasks, time.time()
    repo.create(_row("tsk_claim", now))
    takes = [repo.claim("tsk_claim", ("approval",), now, 60.0) for _ in range(3)]
    assert takes == [True, False, False]
    assert repo.claim("tsk_claim", ("approval",), now + 120, 60.0)  # a dead runner's lease
    assert repo.finish("tsk_claim", now, status="completed", message=None, result={})
    assert not repo.cancel("tsk_claim", now)  # terminal stays terminal
    repo.create(_row("tsk_old", now - 120, expires_at=now - 1))
    assert repo.get("tsk_old", "default", "intern", now) is None  # expired: not found
    assert srv.gw.retention.run().mcp_tasks >= 1  # the housekeeping sweep deletes it
    assert repo.get("tsk_old", "default", "intern", now - 60) is None
    assert repo.get("tsk_claim", "default", "intern", now) is not None


def test_sealed_arguments_open_only_on_their_own_row(srv: McpServer) -> None:
    seal = task_wire.ArgumentSeal(b"k" * 32)
    sealed = seal.seal({"card": "4111"}, "tsk_a", "default", "intern")
    assert "4111" not in sealed
    assert seal.open(sealed, "tsk_a", "default", "intern") == {"card": "4111"}
    for moved in (("tsk_b", "default", "intern"), ("tsk_a", "acme", "intern"),
                  ("tsk_a", "default", "reader")):
        with pytest.raises(InvalidTag):
            seal.open(sealed, *moved)


async def test_a_call_whose_runner_died_is_taken_over_and_runs_once(srv: McpServer) -> None:
    async with tasks_client(srv, "intern") as c:
        created, approval = await parked(c, "orphan")
        assert rest(srv, f"/approvals/{approval}/approve").status_code == 200
        # another worker claimed the call and died before running it: its lease ran out
        assert srv.gw.store.mcp_tasks.claim(created["taskId"], ("approval",),
                                            time.time() - 100, 1.0)
        done = await settle(c, created["taskId"])
    assert done["result"]["structuredContent"] == {"moved": "orphan"}  # sealed args opened
    assert runs_of("orphan") == 1


async def test_a_confirmation_answered_over_rest_runs_the_call_once(srv: McpServer) -> None:
    async with tasks_client(srv, "sup") as c:
        created = await rpc(c, "tools/call", name="counted", arguments={"n": "rest-confirm"})
        assert created["status"] == "input_required"
        approval = created["statusMessage"].split("approval ")[1].split(" ")[0]
        assert rest(srv, f"/approvals/{approval}/confirm").status_code == 200
        done = await settle(c, created["taskId"])
    assert done["result"]["structuredContent"] == {"moved": "rest-confirm"}
    assert runs_of("rest-confirm") == 1


async def test_arguments_the_approver_edited_are_the_ones_that_run(srv: McpServer) -> None:
    async with tasks_client(srv, "intern") as c:
        created, approval = await parked(c, "as-asked")
        edited = rest(srv, f"/approvals/{approval}/approve",
                      {"arguments": {"n": "as-edited"}})
        assert edited.status_code == 200, edited.text
        done = await settle(c, created["taskId"])
    assert done["result"]["structuredContent"] == {"moved": "as-edited"}
    assert (runs_of("as-asked"), runs_of("as-edited")) == (0, 1)


# -- an upstream tool's questions inside a task (toolkeeper.mcp.task_asks) ---------------

@pytest.fixture(scope="module")
def fronting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    """toolkeeper fronting the conformance fixture upstream; its ``multi_input`` (two
    questions at once) runs as a task by the operator's ``task_support``."""
    tmp = tmp_path_factory.mktemp("asks")
    with upstream() as url:
        config = tmp / "toolkeeper.yaml"
        config.write_text(json.dumps({"version": 1, "servers": [
            {"name": "conf", "url": url, "prefix": "", "side_effect": "pure", "risk": "low",
             "tools": {"multi_input": {"task_support": "optional"}}}]}))
        with serving(f"sqlite:///{tmp}/tk.db", config=config) as s:
            s.gw.registry.put_profile(Profile(name="auto", autonomy=3, activations=(
                Activation(tool="multi_input"), Activation(tool="test_tool_with_task"))),
                replace=True)
            yield s


async def _input_required(c: Client, task_id: str, timeout: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while (got := await rpc(c, "tasks/get", taskId=task_id))["status"] != "input_required":
        assert got["status"] == "working" and time.monotonic() < deadline, got
        await asyncio.sleep(0.1)
    return got


def _named(name: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": name}}


async def _upstream_round(srv: McpServer) -> None:
    before = len(ANSWERED)
    async with tasks_client(srv, "bot") as c:
        created = await rpc(c, "tools/call", name="multi_input", arguments={})
        assert created["resultType"] == "task"
        tid = created["taskId"]
        got = await _input_required(c, tid)
        assert sorted(got["inputRequests"]) == ["first", "second"]
        assert {a["method"] for a in got["inputRequests"].values()} == {"elicitation/create"}
        async with tasks_client(srv, "sup") as other:  # another agent's task: not found
            err = await rpc_error(other, "tasks/update", taskId=tid,
                                  inputResponses={"first": _named("Eve")})
            assert err.code == -32602 and err.message == "Task not found"
        ack = await rpc(c, "tasks/update", taskId=tid, inputResponses={
            "first": _named("Ada"), "unasked": _named("x"), "second": {"action": "nonsense"}})
        assert ack["resultType"] == "complete" and "status" not in ack
        got = await rpc(c, "tasks/get", taskId=tid)  # one answer of two: still waiting
        assert got["status"] == "input_required" and list(got["inputRequests"]) == ["second"]
        row = srv.gw.store.mcp_tasks.get(tid, "default", "bot", time.time())
        assert row is not None and "Ada" not in json.dumps(row.request)  # sealed at rest
        assert "multi-input" not in json.dumps(row.request)  # the upstream's state too
        await rpc(c, "tasks/update", taskId=tid, inputResponses={"second": _named("Bob")})
        await rpc(c, "tasks/update", taskId=tid, inputResponses={"second": _named("Bob")})
        done = await settle(c, tid)
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "got Ada and Bob"
    assert ANSWERED[before:] == ["got Ada and Bob"]  # the upstream tool ran to the end once


async def test_an_upstream_question_in_a_task_is_answered_by_update(
        fronting: McpServer) -> None:
    await _upstream_round(fronting)


async def test_a_task_resumed_before_every_answer_is_caught(
        fronting: McpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken on purpose (the first answer resumes the call): the test fails."""
    monkeypatch.setattr(task_asks.TaskAsks, "still_open", staticmethod(lambda p, a: {}))
    await fails(_upstream_round(fronting))


async def _escalated(srv: McpServer) -> None:
    async with connect(srv, "bot", "2026-07-28", extensions=[advertise(TASKS)],
                       elicitation_callback=confirm_with("accept")) as c:
        asked = await rpc(c, "tools/call", name="test_tool_with_task", arguments={})
        assert asked["resultType"] == "input_required" and "taskId" not in asked
        created = await rpc(c, "tools/call", name="test_tool_with_task", arguments={},
                            inputResponses={"user_name": _named("Alice")},
                            requestState=asked["requestState"])
        assert created["resultType"] == "task" and "requestState" not in created
        done = await settle(c, created["taskId"])
        assert done["result"]["content"][0]["text"] == "Hello, Alice, from a task!"
        again = await rpc_error(c, "tools/call", name="test_tool_with_task", arguments={},
                                inputResponses={"user_name": _named("Mallory")},
                                requestState=asked["requestState"])
        assert again.code == -32602  # the state was used once


async def test_a_retry_with_the_answers_becomes_a_task(fronting: McpServer) -> None:
    await _escalated(fronting)


async def test_a_retry_answered_synchronously_is_caught(
        fronting: McpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken on purpose (no task for a retry): the test fails."""
    monkeypatch.setattr(task_asks, "declared", lambda ctx: False)
    await fails(_escalated(fronting))
