"""CPU time of processes from ``/proc``, for the benchmarks. The standard library only:
``sdk1_client.py`` loads this file by its path from the 1.x SDK's venv, where toolkeeper
cannot be imported."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(*pids: int) -> float:
    """User + system CPU time of processes ``pids`` and their live descendants (workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, list(pids)
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            for task in Path(f"/proc/{current}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile
    return total
