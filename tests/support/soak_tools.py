"""The soak suite's tools, loaded by its ``serve`` as ``tests.support.soak_tools:…`` (the
repository root is on its ``PYTHONPATH``): a pure one, and a critical irreversible one that
needs an approver. The plain irreversible tool is the crash chaos's
``tests.support.chaos_tools:append``."""

from __future__ import annotations

import os
from typing import Any

from toolkeeper import Risk, SideEffect, tool


@tool(side_effect=SideEffect.PURE, risk=Risk.LOW, inline=True)
def add(a: int, b: int) -> int:
    """Pure: the sum of two integers."""
    return a + b


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.CRITICAL)
def release(mark: str, path: str) -> dict[str, Any]:
    """Irreversible and critical (an approver must approve it at autonomy 2): appends
    ``mark`` as one fsync'd line per execution to ``path``."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{mark}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return {"released": mark}
