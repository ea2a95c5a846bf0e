"""``check`` and ``apply`` on the sample config (examples/toolkeeper.yaml): check reports the
native tool only the config's directory holds; apply says which store it wrote to and
repeats what check found, as a note (it does not block the apply)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import Invoke, as_json

from toolkeeper.cli._common import safe_url

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "toolkeeper.yaml"


def test_check_reports_a_native_tool_only_beside_the_config(cli: Invoke) -> None:
    res = cli("check", "-f", str(EXAMPLE))
    assert res.exit_code == 1, res.output
    assert "only_beside_config" in res.stdout and "tools[2].native" in res.stdout
    assert f"{EXAMPLE.parent} on PYTHONPATH" in res.stdout


def test_apply_names_the_store_it_writes_to_and_notes_the_finding(
        cli: Invoke, db_url: str) -> None:
    res = cli("apply", "-f", str(EXAMPLE))
    assert res.exit_code == 0, res.output
    assert f"applied {EXAMPLE} to the store {safe_url(db_url)}" in res.stdout
    assert "note: [only_beside_config] tools[2].native: example_tools:word_count" in res.stderr
    again = as_json(cli("apply", "-f", str(EXAMPLE), "--json"))
    assert again["database"] == safe_url(db_url) and again["changes"] == 0


def test_with_its_directory_on_the_path_the_example_checks_clean(
        cli: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))  # the header's PYTHONPATH=examples
    res = cli("check", "-f", str(EXAMPLE))
    assert res.exit_code == 0 and "no violations" in res.stdout, res.output
    applied = cli("apply", "-f", str(EXAMPLE))
    assert applied.exit_code == 0 and "only_beside_config" not in applied.stderr, applied.output
