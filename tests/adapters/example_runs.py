"""The framework examples (``examples/*_agent.py``) as their tests run them: a process on a
given store, offline; each pauses ``pay_invoice INV-7`` for a human, is approved and pays
once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.processes import child_env


def paid_once(example: Path, db_url: str, first: str) -> list[str]:
    """Run ``example`` on ``db_url`` (bounded) and check what it printed: a pause whose line
    starts with ``first``, approved, then one payment. Its lines, for more checks."""
    done = subprocess.run([sys.executable, str(example), db_url], env=child_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(first)
    assert "(approve, approval ap_" in lines[0]
    assert lines[1:] == ['agent: Done: {"paid": "INV-7", "amount": 120}',
                         "pay_invoice executions: 1"]
    return lines
