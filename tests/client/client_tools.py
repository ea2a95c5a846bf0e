"""Tools the client tests' ``toolkeeper serve`` loads as ``tests.client.client_tools:…``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from toolkeeper import ActionSpec, BaseTool, Compensation, Risk, SideEffect, ToolContext, tool

_ENTRY = {"type": "object", "additionalProperties": False, "required": ["mark", "path"],
          "properties": {"mark": {"type": "string"}, "path": {"type": "string"}}}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def stamp(mark: str, path: str) -> dict[str, Any]:
    """Irreversible, allowed: appends one line per execution to ``path``."""
    with Path(path).open("a") as fh:
        fh.write(f"{mark}\n")
    return {"stamped": mark}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.HIGH)
def pay(invoice: str, path: str) -> dict[str, Any]:
    """High risk, needs an approver at autonomy 0: appends one line per payment."""
    with Path(path).open("a") as fh:
        fh.write(f"{invoice}\n")
    return {"paid": invoice}


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def echo(n: int) -> int:
    """Pure echo, for rate limits."""
    return n


class Ledger(BaseTool):
    """A ledger: booking is undone by unbooking.

    Two actions, so a model sees ``ledger_book`` and ``ledger_unbook``; each execution
    appends a line to ``path``."""

    tool_name = "ledger"
    actions: ClassVar[dict[str, ActionSpec]] = {
        "book": ActionSpec(description="Book an entry.", input_schema=_ENTRY,
                           side_effect=SideEffect.COMPENSATABLE),
        "unbook": ActionSpec(description="Take an entry back.", input_schema=_ENTRY,
                             side_effect=SideEffect.IDEMPOTENT),
    }
    risk_default = Risk.LOW
    compensation: ClassVar[dict[str, Compensation]] = {"book": Compensation(
        action="unbook", arguments={"mark": "arguments.mark", "path": "arguments.path"})}

    async def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        line = request["mark"] if action == "book" else f"-{request['mark']}"
        with Path(request["path"]).open("a") as fh:
            fh.write(f"{line}\n")
        return {action: request["mark"]}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW, requires_confirmation=True)
def wipe(target: str) -> str:
    """Wipes a target once the user confirms (prompt and category: from the config)."""
    return target


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW, scopes=("vault",))
def vault(key: str) -> str:
    """Needs a scope no profile here grants."""
    return key


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW)
def broken(x: int) -> int:
    """Always fails (a batch's critical step)."""
    raise RuntimeError("broken on purpose")
