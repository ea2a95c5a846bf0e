"""examples/google_adk_agent.py runs offline and pays the approved invoice exactly once; what
docs/guides/google-adk.md shows of it (its output, its lines) is what it prints and has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.adapters.example_runs import paid_once

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "google_adk_agent.py"
GUIDE = REPO / "docs" / "guides" / "google-adk.md"


@pytest.mark.slow  # runs the example as a process: CI and `make test-all`
def test_the_google_adk_example_runs_offline(db_url: str) -> None:
    lines = paid_once(EXAMPLE, db_url, 'waiting for a human: pay_invoice {"number": "INV-7", ')
    shown = re.findall(r"```text\n(.*?)```", GUIDE.read_text(), flags=re.S)
    assert shown == ["\n".join(re.sub(r"ap_[\w-]+", "ap_…", line) for line in lines) + "\n"]


def _statements(code: str) -> list[str]:
    """The code's lines without indentation and comments (after two spaces)."""
    lines = (line.split("  #")[0].strip() for line in code.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_the_guides_snippet_is_the_example() -> None:
    python = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    assert len(python) == 1
    source = set(_statements(EXAMPLE.read_text()))
    missing = [line for line in _statements(python[0]) if line not in source]
    assert missing == [], f"examples/google_adk_agent.py lacks the guide's lines {missing}"
