"""The crash-chaos suite's tool, loaded by its ``serve`` replicas as
``tests.support.chaos_tools:append`` (the repository root is on their ``PYTHONPATH``)."""

from __future__ import annotations

import os
import time
from typing import Any

from toolkeeper import Risk, SideEffect, tool


@tool(side_effect=SideEffect.IRREVERSIBLE, risk=Risk.LOW)
def append(mark: str, path: str) -> dict[str, Any]:
    """Irreversible: appends ``mark`` as one line per execution (any process) to ``path``,
    fsync'd before it returns, then lingers a moment, so a SIGKILL can land between the
    execution and its recorded outcome (a torn call)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{mark}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    time.sleep(0.02)
    return {"appended": mark}
