"""Tools the client tests' ``toolkeeper serve`` loads as ``tests.client.client_tools:…``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolkeeper import Risk, SideEffect, tool


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
