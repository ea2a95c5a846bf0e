"""Tools used by the pipeline tests. State lives in module-level LEDGER on purpose: the
tests read it to count executions (reset per test by the fixture)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, ClassVar

from toolkeeper import (
    ActionSpec,
    BaseTool,
    Compensation,
    ExecutionMeta,
    PreviewResult,
    Risk,
    SideEffect,
    ToolContext,
    ToolError,
    ToolPolicy,
    UpstreamError,
    tool,
)

LEDGER: dict[str, Any] = {}


def reset_ledger() -> None:
    LEDGER.clear()
    LEDGER.update(runs=0, payments=[], refunds=[], emails=[], attempts=0)


reset_ledger()


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
async def charge(invoice: str, amount: int) -> dict[str, Any]:
    """Charge an invoice (irreversible): counts executions in LEDGER."""
    LEDGER["runs"] += 1
    await asyncio.sleep(0.01)  # the behaviour under test: concurrent callers overlap
    LEDGER["payments"].append(invoice)
    return {"charged": invoice, "amount": amount}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW, timeout_s=30)
def file_charge(invoice: str, path: str) -> dict[str, Any]:
    """Irreversible, cross-process countable: appends one line per execution to ``path``."""
    with Path(path).open("a") as fh:
        fh.write(f"{invoice}:{os.getpid()}\n")
    import time

    time.sleep(0.05)  # the behaviour under test: concurrent callers overlap
    return {"charged": invoice}


class Payments(BaseTool):
    """Pay and refund invoices; pay is compensatable (high risk), refund is idempotent."""

    tool_name = "payments"
    actions: ClassVar[dict[str, ActionSpec]] = {
        "pay": ActionSpec(input_schema={
            "type": "object", "additionalProperties": False, "required": ["invoice", "amount"],
            "properties": {"invoice": {"type": "string"}, "amount": {"type": "integer"}}},
            side_effect=SideEffect.COMPENSATABLE),
        "refund": ActionSpec(input_schema={
            "type": "object", "additionalProperties": False, "required": ["invoice", "amount"],
            "properties": {"invoice": {"type": "string"}, "amount": {"type": "integer"}}},
            side_effect=SideEffect.IDEMPOTENT),
    }
    risk_default = Risk.MEDIUM
    risk_map: ClassVar[dict[str, Risk]] = {"pay": Risk.HIGH, "refund": Risk.LOW}
    compensation: ClassVar[dict[str, Compensation]] = {"pay": Compensation(
        action="refund", arguments={"invoice": "arguments.invoice", "amount": "result.amount"})}
    scopes_required = ("payments",)

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        if action == "pay":
            LEDGER["payments"].append(request["invoice"])
            return {"paid": request["invoice"], "amount": request["amount"]}
        LEDGER["refunds"].append(request["invoice"])
        return {"refunded": request["invoice"], "amount": request["amount"]}


class EmailPolicy(ToolPolicy):
    allowed_domains: tuple[str, ...] = ("example.com",)


class Email(BaseTool):
    """Send an email (irreversible, medium) with a side-effect-free preview."""

    tool_name = "email"
    actions: ClassVar[dict[str, ActionSpec]] = {"send": ActionSpec(input_schema={
        "type": "object", "additionalProperties": False, "required": ["to", "body"],
        "properties": {"to": {"type": "string"}, "body": {"type": "string"}}})}
    risk_default = Risk.MEDIUM
    policy_model = EmailPolicy

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        domain = request["to"].rpartition("@")[2]
        assert isinstance(context.policy, EmailPolicy)
        if domain not in context.policy.allowed_domains:
            context.deny("domain_not_allowed", f"{domain} is not allowed")
        LEDGER["emails"].append(request["to"])
        return {"sent": request["to"]}

    async def preview(self, action: str, request: dict[str, Any],
                      context: ToolContext) -> PreviewResult:
        return PreviewResult(summary=f"email to {request['to']}", data=dict(request))


@tool(side_effect=SideEffect.IDEMPOTENT, risk=Risk.LOW, timeout_s=0.2)
async def flaky(n: int) -> int:
    """Fails with a retryable error until it has been attempted ``n`` times."""
    LEDGER["attempts"] += 1
    if LEDGER["attempts"] < n:
        raise UpstreamError("temporarily unavailable")
    return LEDGER["attempts"]


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW, timeout_s=0.2)
async def slow_irreversible(seconds: float) -> str:
    """Sleeps; with a short timeout the outcome becomes unknown."""
    LEDGER["runs"] += 1
    await asyncio.sleep(seconds)
    return "done"


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW, timeout_s=0.2)
async def slow_pure(seconds: float) -> str:
    """Sleeps; a pure call that times out fails with ``timeout`` (after retries)."""
    LEDGER["attempts"] += 1
    await asyncio.sleep(seconds)
    return "done"


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
async def broken(x: int) -> int:
    """Raises a plain exception (a bug in the tool)."""
    raise RuntimeError(f"boom {x}")


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
async def lost_connection(x: int) -> int:
    """Fails after it may have acted (transport failure)."""
    raise ToolError("upstream_error", "connection reset after send", may_have_executed=True)


class Grouped(BaseTool):
    """A tool in a concurrency group of capacity 1 that holds its slot for a while."""

    tool_name = "grouped"
    actions: ClassVar[dict[str, ActionSpec]] = {"run": ActionSpec(input_schema={
        "type": "object", "properties": {"hold": {"type": "number"}}, "required": ["hold"]})}
    side_effect = SideEffect.IDEMPOTENT
    risk_default = Risk.LOW
    # a waiter gives up after timeout_s: 1.5 times the hold below leaves 0.3 s either way (the
    # second call gets the slot, the third does not) on a loaded machine
    execution = ExecutionMeta(concurrency_group="exclusive", max_concurrency=1, timeout_s=0.9)

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        await asyncio.sleep(request["hold"])
        return "ok"


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW, timeout_s=2)
def hang_charge(invoice: str, marker: str) -> dict[str, Any]:
    """Irreversible: records that it started (``marker`` file), then hangs — to be killed."""
    with Path(marker).open("a") as fh:
        fh.write(f"{invoice}:{os.getpid()}\n")
    import time

    time.sleep(60)  # the behaviour under test: hangs until the test kills the process
    return {"charged": invoice}
