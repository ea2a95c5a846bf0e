"""Running Strands code under ``.venv-strands`` (``make strands``) from the main suite:
strands-agents requires mcp<2.2 and the server pins mcp 2.3, so the two never share a venv.

The venv holds strands-agents, the ``toolkeeper-client`` wheel and the server's dependencies
less mcp. Over ``serve`` a script runs with the wheel (the repository root on its path, for
``tests``, never ``src``); in-process the checkout's ``src`` goes first on the path (the
whole package, shadowing the wheel's part of it). Without the venv a test skips loudly,
except under ``CI=true``, where ``make test`` has made it: there it fails.
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


def run_strands(*args: str, server: bool, timeout: float = 300,
                **env: str) -> subprocess.CompletedProcess[str]:
    """``.venv-strands/bin/python *args``: with the checkout's ``src`` first on the path when
    ``server`` (in-process), else with the installed client wheel."""
    path = os.pathsep.join((str(REPO), str(REPO / "src")) if server else (str(REPO),))
    return subprocess.run([str(strands_python()), *args], env=child_env(PYTHONPATH=path, **env),
                          capture_output=True, text=True, timeout=timeout, check=False)
