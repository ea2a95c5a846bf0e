"""``toolkeeper demo``: the scripted agent drives every gate and checks every outcome."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from toolkeeper.cli import app
from toolkeeper.demo.runner import run_demo
from toolkeeper.demo.tools import DemoWorld


def test_demo_passes_every_gate_and_exits_zero() -> None:
    res = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["demo"])
    assert res.exit_code == 0, res.output
    summary = res.stdout.strip().splitlines()[-1]
    assert "demo ok" in summary
    for gate in ("allow", "preview", "confirm", "approve", "deny"):
        assert gate in summary
    for reason in ("gate_denied", "scope_missing", "tool_not_enabled", "deduped: true",
                   "approver_not_allowed", "refund_invoice"):
        assert reason in res.stdout


def test_demo_runs_again_on_the_same_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/demo.db"
    for _ in range(2):
        res = CliRunner().invoke(app, ["demo", "--db", url])
        assert res.exit_code == 0, res.output
    audit = CliRunner().invoke(app, ["--db", url, "audit", "tail", "--type",
                                     "side_effect.compensated", "--json"])
    assert audit.exit_code == 0
    assert [e["type"] for e in json.loads(audit.stdout)] == [
        "side_effect.compensated"] * 2


def test_an_unexpected_outcome_fails_the_demo(tmp_path: Path) -> None:
    """The demo is a smoke test: when the world differs (INV-1001 already paid, so the
    payment fails), it must say what differed and report failure."""
    world = DemoWorld.sample()
    world.invoices["INV-1001"].paid = 250.0
    buf = io.StringIO()
    ok = run_demo(f"sqlite:///{tmp_path}/demo.db", Console(file=buf, width=200), world)
    assert not ok
    text = buf.getvalue()
    assert "demo FAILED" in text
    assert "confirm: status: expected succeeded, got failed" in text
