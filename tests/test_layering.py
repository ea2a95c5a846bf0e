"""The layering is a contract (pyproject.toml ``[tool.importlinter]``, docs/architecture.md):
a module imports only from layers below its own, and no package's modules import each other
in a cycle. ``make lint`` runs the same contracts; this keeps ``make test`` honest too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(contract: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}  # this checkout, not an install
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--contract", contract],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.mark.parametrize("contract", [
    "layers",
    "acyclic",
    "mcp-not-api",
])
def test_import_contract_is_kept(contract: str) -> None:
    done = _lint(contract)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
