"""Child Python processes (``toolkeeper serve`` replicas) that import test modules."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository root: where ``tests.support.…`` entry points resolve from."""


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child, with the repository root first on
    ``PYTHONPATH`` (what is already there, e.g. ``src``, is kept) and ``extra`` set."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}
