"""Fixtures for the CLI tests: the app run in-process against a fresh SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import DEMO_YAML, Invoke, as_json
from typer.testing import CliRunner, Result

from toolkeeper.cli import app


@pytest.fixture
def cli(db_url: str) -> Invoke:
    """``cli("calls", "list")`` runs ``toolkeeper --db <db_url> calls list`` in-process."""
    runner = CliRunner(env={"TOOLKEEPER_TOKEN": None, "TOOLKEEPER_DATABASE_URL": None,
                            "TOOLKEEPER_TENANT": None, "TOOLKEEPER_CONFIG": None,
                            "TOOLKEEPER_SECRETS_BACKEND": None, "TOOLKEEPER_SECRETS_KEY": None,
                            "TOOLKEEPER_SECRETS_KEY_FILE": None, "COLUMNS": "200"})

    def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
        return runner.invoke(app, ["--db", db_url, *args], env=env)

    return invoke


@pytest.fixture
def admin_token(cli: Invoke, tmp_path: Path) -> str:
    """``toolkeeper init`` in a scratch directory: the admin token it printed."""
    res = cli("init", "--config", str(tmp_path / "toolkeeper.yaml"), "--json")
    assert res.exit_code == 0, res.output
    token = as_json(res)["token"]
    assert isinstance(token, str)
    return token


@pytest.fixture
def demo_store(cli: Invoke, admin_token: str) -> str:
    """The demo's tools, profiles and agents applied to the store; returns the admin token."""
    res = cli("apply", "-f", str(DEMO_YAML))
    assert res.exit_code == 0, res.output
    return admin_token
