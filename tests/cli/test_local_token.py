"""Recovering from a lost admin token: ``tokens create --local`` mints one straight in the
store (the operator holds the database), prints it once and audits who did it."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import Invoke, as_json, new_token
from typer.testing import CliRunner

from toolkeeper.cli import app


def test_local_admin_token_without_a_token_is_usable_and_audited(
        cli: Invoke, admin_token: str) -> None:
    del admin_token  # the store has an admin token, and it was lost
    res = cli("tokens", "create", "--role", "admin", "--local", "--label", "recovered",
              "--json")
    assert res.exit_code == 0, res.output
    minted = as_json(res)
    assert minted["role"] == "admin" and minted["label"] == "recovered"
    # the new token works as an admin's: it can create more tokens
    assert new_token(cli, minted["token"], "approver").startswith("tk_")
    events = as_json(cli("audit", "tail", "--type", "token.created", "--json"))
    assert len(events) == 1
    data = events[0]["data"]
    assert data["token_id"] == minted["id"] and data["role"] == "admin"
    assert data["actor"] == "local-operator" and data["via"] == "cli --local"
    assert minted["token"] not in str(events)  # never the plaintext


def test_without_local_a_token_is_still_required(cli: Invoke, admin_token: str) -> None:
    del admin_token
    res = cli("tokens", "create", "--role", "admin")
    assert res.exit_code == 1 and "unauthenticated" in res.stderr
    assert "--local" in res.stderr  # the refusal names the way out


def test_local_uses_the_config_files_database(db_url: str, admin_token: str,
                                              tmp_path: Path) -> None:
    del admin_token
    config = tmp_path / "ops.yaml"
    config.write_text(f"version: 1\ndatabase: {db_url}\n")
    runner = CliRunner(env={"TOOLKEEPER_DATABASE_URL": None, "TOOLKEEPER_TOKEN": None,
                            "TOOLKEEPER_CONFIG": None, "TOOLKEEPER_TENANT": None})
    res = runner.invoke(app, ["tokens", "create", "--role", "admin", "--local",
                              "--config", str(config), "--json"])
    assert res.exit_code == 0, res.output
    listed = runner.invoke(app, ["--db", db_url, "tokens", "list", "--json"])
    assert as_json(res)["id"] in listed.stdout


def test_local_refuses_a_sqlite_file_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    runner = CliRunner(env={"TOOLKEEPER_DATABASE_URL": None, "TOOLKEEPER_TOKEN": None,
                            "TOOLKEEPER_CONFIG": None, "TOOLKEEPER_TENANT": None})
    res = runner.invoke(app, ["--db", f"sqlite:///{missing}", "tokens", "create",
                              "--role", "admin", "--local"])
    assert res.exit_code == 2 and "not_found" in res.stderr
    assert not missing.exists()  # no empty store was created by the attempt
