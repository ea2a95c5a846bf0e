"""examples/pydantic_ai_agent.py runs offline and pays the approved invoice exactly once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import child_env

pytestmark = pytest.mark.slow  # runs the example as a process: CI and `make test-all`

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pydantic_ai_agent.py"


def test_the_pydantic_ai_example_runs_offline(db_url: str) -> None:
    done = subprocess.run([sys.executable, str(EXAMPLE), db_url], env=child_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("waiting for a human: pay_invoice")
    assert "(approve, approval ap_" in lines[0]
    assert lines[1:] == ['agent: Done: {"paid": "INV-7", "amount": 120}',
                         "pay_invoice executions: 1"]
