"""examples/pydantic_ai_agent.py runs offline and pays the approved invoice exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adapters.example_runs import paid_once

pytestmark = pytest.mark.slow  # runs the example as a process: CI and `make test-all`

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pydantic_ai_agent.py"


def test_the_pydantic_ai_example_runs_offline(db_url: str) -> None:
    paid_once(EXAMPLE, db_url, "waiting for a human: pay_invoice")
