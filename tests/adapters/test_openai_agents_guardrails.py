"""The OpenAI Agents SDK's tool input guardrails run before a toolkeeper call executes
(issue 29 item 4): ``needs_approval`` only asks the gate (``Toolbox.check``), and the call
runs in the SDK's invocation, after the guardrails.

``post_note`` is irreversible and allowed, so nothing but the guardrail stands between the
model and the side effect; ``transfer`` is approve-gated. Executions are counted on the tool
side and the audit trail is read for what ran.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import (
    FunctionTool,
    Runner,
    RunResult,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    set_tracing_disabled,
    tool_input_guardrail,
)

from tests.adapters.test_openai_agents import ALICE, TRANSFER_50, Script, said
from toolkeeper import ApprovalStatus, Gateway
from toolkeeper.adapters.openai_agents import (
    ToolkeeperCall,
    build_async,
    idempotency_key,
    pending_approvals,
)
from toolkeeper.adapters.openai_agents import resolve_interruptions as resolve
from toolkeeper.toolbox import InProcessBackend, Toolbox

NOTE = ("post_note", {"text": "ship it"}, "c1")


@pytest.fixture(autouse=True)
def _no_trace_export() -> None:
    set_tracing_disabled(True)  # offline: the SDK would try to upload its traces


async def guarded(gw: Gateway, counts: dict[str, int], seen: list[dict[str, int]], *,
            block: bool) -> list[FunctionTool]:
    """The agent's tools, each with a tool input guardrail that notes the executions so far
    (``counts``) when it runs, and rejects the call when ``block``."""

    @tool_input_guardrail
    def check_input(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        seen.append(dict(counts))
        if block:
            return ToolGuardrailFunctionOutput.reject_content("notes are blocked here")
        return ToolGuardrailFunctionOutput.allow()

    tools = await build_async(Toolbox(InProcessBackend(gw), agent="bot"))
    for t in tools:
        t.tool_input_guardrails = [check_input]
    return tools


async def run_one(gw: Gateway, counts: dict[str, int], seen: list[dict[str, int]],
                  call: tuple[str, Any, str], *, block: bool) -> RunResult:
    agent = Script(calls=[call]).agent(await guarded(gw, counts, seen, block=block))
    return await Runner.run(agent, "go", context={})


def _events(gw: Gateway, tool: str, kind: str) -> list[str]:
    """The audit events of type ``kind`` of ``tool``'s calls."""
    gw.flush()
    return [e.type for e in gw.store.audit.list("default", tool=tool, types=[kind])]


async def test_a_guardrail_blocks_an_allowed_call_before_anything_runs(
        gw: Gateway, counts: dict[str, int]) -> None:
    seen: list[dict[str, int]] = []
    run = await run_one(gw, counts, seen, NOTE, block=True)
    assert run.interruptions == []
    assert said(run) == {"c1": "notes are blocked here"}
    assert seen == [{}]  # the guardrail ran, with nothing executed before it
    assert counts == {} and _events(gw, "post_note", "call.attempted") == []
    assert [o for o in gw.calls.list("default") if o.tool == "post_note"] == []


async def test_an_allowed_call_runs_once_after_its_guardrail(
        gw: Gateway, counts: dict[str, int]) -> None:
    seen: list[dict[str, int]] = []
    run = await run_one(gw, counts, seen, NOTE, block=False)
    assert said(run) == {"c1": {"posted": "ship it"}}
    assert seen == [{}]  # checked before the note was posted
    assert counts == {"post_note": 1} and len(_events(gw, "post_note", "call.attempted")) == 1


async def test_a_gated_call_is_guarded_after_approval_and_runs_once(
        gw: Gateway, counts: dict[str, int]) -> None:
    seen: list[dict[str, int]] = []
    tools = await guarded(gw, counts, seen, block=False)
    script = Script(calls=[TRANSFER_50])
    agent = script.agent(tools)
    first = await Runner.run(agent, "pay", context={})
    (ask,) = pending_approvals(first).values()
    assert gw.approvals.get(ask["approval_id"], "default").status is ApprovalStatus.PENDING
    assert counts == {} and seen == []  # asked the gate only: nothing ran, nothing guarded
    resumed = await Runner.run(agent, await resolve(first, {"c1": True}, approver=ALICE))
    assert said(resumed) == {"c1": {"transferred": 50, "to": "acme"}}
    assert seen == [{}] and counts == {"transfer": 1}


async def test_a_refused_call_is_audited_once_and_told_to_the_model(
        gw: Gateway, counts: dict[str, int]) -> None:
    seen: list[dict[str, int]] = []
    big = ("transfer", {"account": "acme", "amount": 5000}, "c1")
    run = await run_one(gw, counts, seen, big, block=False)
    assert (said(run)["c1"]["reason"], counts) == ("gate_denied", {})
    assert len(_events(gw, "transfer", "policy.denied")) == 1


async def test_the_guardrail_test_catches_a_gate_that_executes(
        gw: Gateway, counts: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule broken on purpose: ``needs_approval`` running the call (as it did before)
    puts the side effect before the guardrail, and the first test's check sees it."""

    async def executing(self: ToolkeeperCall, ctx: Any, arguments: dict[str, Any],
                        call_id: str) -> bool:
        await self.toolbox.execute(self.tool, arguments, action=self.action,
                                   idempotency_key=idempotency_key(ctx, call_id))
        return False

    monkeypatch.setattr(ToolkeeperCall, "needs_approval", executing)
    seen: list[dict[str, int]] = []
    await run_one(gw, counts, seen, NOTE, block=True)
    assert seen == [{"post_note": 1}] and counts == {"post_note": 1}
