"""Bootstrap and config as code: ``init``, ``check``, ``apply``, ``db upgrade``, ``tokens``."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import DEMO_YAML, Invoke, as_json, new_token


def test_init_writes_config_creates_store_and_prints_one_admin_token(
        cli: Invoke, tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.yaml"
    res = cli("init", "--config", str(config))
    assert res.exit_code == 0, res.output
    assert config.exists()
    tokens = [w for w in res.stdout.split() if w.startswith("tk_")]
    assert len(tokens) == 1
    listed = as_json(cli("tokens", "list", "--json"))
    assert [(t["role"], t["label"]) for t in listed] == [("admin", "admin")]
    assert "token" not in listed[0]  # only the hash is stored, never shown again
    # the starter config works at once: the assistant can call calculate
    call = cli("call", "calculate", "--arg", "expression=2*(3+4)", "--agent", "assistant",
               "--json")
    assert call.exit_code == 0, call.output
    assert as_json(call)["output"]["result"] == 14


def test_second_init_refuses_to_overwrite_without_force(cli: Invoke, tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.yaml"
    assert cli("init", "--config", str(config)).exit_code == 0
    config.write_text(config.read_text() + "# my edits\n")
    again = cli("init", "--config", str(config))
    assert again.exit_code == 1
    assert "conflict" in again.stderr
    assert config.read_text().endswith("# my edits\n")
    forced = cli("init", "--config", str(config), "--force")
    assert forced.exit_code == 0, forced.output
    assert "# my edits" not in config.read_text()


def test_check_passes_the_starter_and_the_demo_config(cli: Invoke, tmp_path: Path) -> None:
    config = tmp_path / "toolkeeper.yaml"
    cli("init", "--config", str(config))
    for path in (config, DEMO_YAML):
        res = cli("check", "-f", str(path))
        assert res.exit_code == 0, res.output
        assert "no violations" in res.stdout


def test_check_prints_violations_with_rule_and_position(cli: Invoke, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nprofiles:\n  - name: p\n    activations:\n"
                   "      - tool: no_such_tool\n")
    res = cli("check", "-f", str(bad), "--json")
    assert res.exit_code == 1
    report = json.loads(res.stdout)
    assert report["ok"] is False
    [v] = [v for v in report["violations"] if v["rule"] == "unknown_tool"]
    assert v["line"] == 5
    table = cli("check", "-f", str(bad))
    assert table.exit_code == 1
    assert "unknown_tool" in table.stdout and f"{bad}:5" in table.stdout


def test_apply_reports_changes_then_is_idempotent(cli: Invoke) -> None:
    first = as_json(cli("apply", "-f", str(DEMO_YAML), "--json"))
    assert "tool:default/pay_invoice" in first["created"]
    assert "agent:default/billing-bot" in first["created"]
    second = as_json(cli("apply", "-f", str(DEMO_YAML), "--json"))
    assert second["changes"] == 0
    assert "profile:default/billing-assistant" in second["unchanged"]


def test_apply_of_an_invalid_file_is_a_config_error(cli: Invoke, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nagents:\n  - {name: a, profile: nope}\n")
    res = cli("apply", "-f", str(bad))
    assert res.exit_code == 2
    assert "config_invalid" in res.stderr


def test_db_upgrade_prints_the_revision(cli: Invoke) -> None:
    res = cli("db", "upgrade", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["revision"]


def test_tokens_need_an_admin_and_are_shown_once(cli: Invoke, admin_token: str) -> None:
    denied = cli("tokens", "create", "--role", "approver")
    assert denied.exit_code == 1 and "unauthenticated" in denied.stderr
    approver = new_token(cli, admin_token, "approver")
    not_admin = cli("tokens", "create", "--role", "operator", "--token", approver)
    assert not_admin.exit_code == 1 and "forbidden" in not_admin.stderr
    listed = as_json(cli("tokens", "list", "--json"))
    approver_id = next(t["id"] for t in listed if t["role"] == "approver")
    revoked = cli("tokens", "revoke", approver_id, "--token", admin_token)
    assert revoked.exit_code == 0, revoked.output
    after = cli("tokens", "create", "--role", "operator", "--token", approver)
    assert after.exit_code == 1 and "unauthenticated" in after.stderr


def test_agent_tokens_must_name_an_existing_agent(cli: Invoke, admin_token: str) -> None:
    missing = cli("tokens", "create", "--role", "agent", "--token", admin_token)
    assert missing.exit_code == 2
    unknown = cli("tokens", "create", "--role", "agent", "--agent", "ghost",
                  "--token", admin_token)
    assert unknown.exit_code == 2 and "invalid_arguments" in unknown.stderr
    ok = cli("tokens", "create", "--role", "agent", "--agent", "assistant",
             "--token", admin_token, "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["agent"] == "assistant"
