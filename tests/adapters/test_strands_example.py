"""examples/strands_agent.py, under ``.venv-strands`` with the client wheel, against a real
``toolkeeper serve`` of the demo config: it pays the confirmed invoice exactly once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.adapters.strands_support import run_strands, strands_python
from tests.support.serve import TokenSpec, serving_toolkeeper
from toolkeeper.demo.runner import DEMO_CONFIG

pytestmark = pytest.mark.slow  # a real server and Strands in its own venv: CI, make test-all

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "strands_agent.py"


def test_the_strands_example_pays_the_confirmed_invoice_once(tmp_path: Path) -> None:
    strands_python()
    tokens = {"agent": TokenSpec("agent", "billing-bot"), "approver": TokenSpec("approver")}
    with serving_toolkeeper(tmp_path, DEMO_CONFIG.read_text(), tokens) as server:
        done = run_strands(str(EXAMPLE), server.url, server.tokens["agent"],
                           server.tokens["approver"], server=False, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith('waiting for a human: pay_invoice {"invoice_id": "INV-1002", '
                               '"amount": 480.0} (confirm, approval ap_'), lines
    assert lines[1].startswith('agent: Done: {"payment_id": '), lines
    assert '"amount_paid": 480.0' in lines[1]
    assert lines[2:] == ["pay_invoice executions: 1"]


def _statements(code: str) -> list[str]:
    """The code's lines without indentation and comments (PEP 8's: after two spaces)."""
    lines = (line.split("  #")[0].strip() for line in code.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_the_guides_python_is_the_example() -> None:
    """docs/guides/strands.md's Python block is lines of the example, line for line (and its
    command runs the example), so the page cannot drift from what the test above runs."""
    page = (EXAMPLE.parents[1] / "docs" / "guides" / "strands.md").read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    source = set(_statements(EXAMPLE.read_text()))
    assert [line for line in _statements(snippet) if line not in source] == []
    assert "python examples/strands_agent.py http://127.0.0.1:8700" in page
