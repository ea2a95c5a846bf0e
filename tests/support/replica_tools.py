"""Tools for the two-replica test, loaded by the ``serve`` processes as
``tests.support.replica_tools:…`` (the repository root is on their ``PYTHONPATH``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from toolkeeper import Risk, SideEffect, tool


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def stamp(mark: str, path: str) -> dict[str, Any]:
    """Irreversible: appends one line per execution (any process) to ``path``."""
    with Path(path).open("a") as fh:
        fh.write(f"{mark}:{os.getpid()}\n")
    time.sleep(0.05)  # the behaviour under test: a slow execution, so callers overlap
    return {"stamped": mark}


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.HIGH)
def pay(invoice: str, path: str) -> dict[str, Any]:
    """High risk: needs an approval at autonomy 0; appends one line per payment."""
    with Path(path).open("a") as fh:
        fh.write(f"{invoice}\n")
    return {"paid": invoice}


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def echo(n: int) -> int:
    """Pure echo, for counting rate limits."""
    return n


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def hold(mark: str, path: str) -> dict[str, Any]:
    """Irreversible and slow: logs its entry and exit, so overlapping runs show in ``path``."""
    with Path(path).open("a") as fh:
        fh.write(f"in:{mark}\n")
    time.sleep(0.2)
    with Path(path).open("a") as fh:
        fh.write(f"out:{mark}\n")
    return {"held": mark}
