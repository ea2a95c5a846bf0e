"""Running Strands code under ``.venv-strands`` (``make strands``) from the main suite:
strands-agents requires mcp<2.2 and the server pins mcp 2.3, so the two never share a venv.

The worktree's ``src`` goes on the child's path (the slim client and, in-process, the server
with its dependencies less mcp, which the make target installs there). Without the venv a
test skips loudly, except under ``CI=true``, where ``make test`` has made it: it fails.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import REPO, child_env

STRANDS_PYTHON = REPO / ".venv-strands" / "bin" / "python"


def strands_python() -> Path:
    if not STRANDS_PYTHON.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{STRANDS_PYTHON} is missing: `make test` makes it (`make strands`)")
        pytest.skip(f"SKIPPED LOUDLY: no {STRANDS_PYTHON}; run `make strands` to test the "
                    "Strands adapter")
    return STRANDS_PYTHON


def run_strands(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    """``.venv-strands/bin/python *args`` with the repository and its ``src`` on the path."""
    path = os.pathsep.join((str(REPO), str(REPO / "src")))
    return subprocess.run([str(strands_python()), *args], env=child_env(PYTHONPATH=path, **env),
                          capture_output=True, text=True, timeout=timeout, check=False)
