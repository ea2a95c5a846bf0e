"""Child Python processes (``toolkeeper serve`` replicas) that import test modules."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository root: where ``tests.support.…`` entry points resolve from."""


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child, with the repository root first on
    ``PYTHONPATH`` (what is already there, e.g. ``src``, is kept) and ``extra`` set."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def stop(proc: subprocess.Popen[bytes], grace_s: float = 20) -> None:
    """SIGTERM ``proc`` and wait ``grace_s`` for it; SIGKILL it after that."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
