"""``toolkeeper audit verify`` on a keyed store: it loads the audit key like the gateway
(environment, key file, or derived from the secrets master key), reads the checkpoint file,
and exits 1 on what a database writer without the key did (docs/audit-integrity.md)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from cli_helpers import Invoke, as_json

from tests.support import audit_attacks as attack
from toolkeeper.secrets import generate_key_file

KEY_ENV = {"TOOLKEEPER_AUDIT_KEY": base64.b64encode(attack.KEY).decode()}


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # no key made elsewhere
    for name in ("TOOLKEEPER_AUDIT_KEY", "TOOLKEEPER_AUDIT_KEY_FILE", "TOOLKEEPER_SECRETS_KEY",
                 "TOOLKEEPER_SECRETS_KEY_FILE", "TOOLKEEPER_AUDIT_CHECKPOINTS"):
        monkeypatch.delenv(name, raising=False)


def _write(url: str, n: int = 3, **kw: object) -> None:
    with attack.open_gateway(url, audit_key=attack.KEY, **kw) as gw:
        attack.calls(gw, n)


def test_deleting_the_last_event_and_moving_the_head_back_exits_1(
        cli: Invoke, db_url: str, cli_env: None) -> None:
    _write(db_url)
    assert cli("audit", "verify", env=KEY_ENV).exit_code == 0
    attack.delete_last_event(db_url)
    res = cli("audit", "verify", env=KEY_ENV)
    assert res.exit_code == 1, res.output
    assert "chain head" in res.stderr
    assert as_json(cli("audit", "verify", "--json", env=KEY_ENV))["ok"] is False


def test_editing_a_middle_event_and_rechaining_exits_1(
        cli: Invoke, db_url: str, cli_env: None) -> None:
    _write(db_url)
    attack.edit_and_rechain(db_url, 2)
    res = cli("audit", "verify", env=KEY_ENV)
    assert res.exit_code == 1 and "seq 2: unkeyed event after keyed events" in res.stderr


def test_a_downgrade_exits_1_with_the_key(cli: Invoke, db_url: str, cli_env: None) -> None:
    _write(db_url)
    attack.downgrade(db_url)
    res = cli("audit", "verify", env=KEY_ENV)
    assert res.exit_code == 1 and "not sealed" in res.stderr
    # the CLI only reads: verifying did not seal the downgraded head
    assert cli("audit", "verify", env=KEY_ENV).exit_code == 1


def test_a_replayed_head_exits_1_through_the_checkpoint_file(
        cli: Invoke, db_url: str, tmp_path: Path, cli_env: None) -> None:
    cps = tmp_path / "audit.checkpoints"
    with attack.open_gateway(db_url, audit_key=attack.KEY, audit_checkpoint_path=cps) as gw:
        attack.calls(gw, 2)
        saved = attack.head(db_url)
        attack.calls(gw, 2, tag="later-")
    attack.replay_head(db_url, saved)
    assert cli("audit", "verify", env=KEY_ENV).exit_code == 0  # the key alone cannot tell
    res = cli("audit", "verify", "--checkpoints", str(cps), env=KEY_ENV)
    assert res.exit_code == 1 and "rolled back" in res.stderr
    env = {**KEY_ENV, "TOOLKEEPER_AUDIT_CHECKPOINTS": str(cps)}
    assert cli("audit", "verify", env=env).exit_code == 1


def test_the_key_file_and_the_secrets_master_key_are_loaded_like_the_gateway(
        cli: Invoke, db_url: str, tmp_path: Path, cli_env: None) -> None:
    master = tmp_path / "secrets.key"
    generate_key_file(master)
    with attack.open_gateway(db_url, secrets="embedded", secrets_key_file=master) as gw:
        attack.calls(gw, 1)
    assert cli("audit", "verify").exit_code == 1  # keyed, and no key given
    ok = cli("audit", "verify", "--secrets-key-file", str(master))
    assert ok.exit_code == 0, ok.output
    assert cli("audit", "verify", env={"TOOLKEEPER_SECRETS_KEY_FILE": str(master)}
               ).exit_code == 0
    loose = tmp_path / "audit.key"
    loose.write_text(base64.b64encode(attack.KEY).decode())
    os.chmod(loose, 0o644)
    refused = cli("audit", "verify", "--audit-key-file", str(loose))
    assert refused.exit_code == 2 and "chmod 600" in refused.stderr


def test_a_legacy_unkeyed_store_verifies_with_a_warning(
        cli: Invoke, db_url: str, cli_env: None) -> None:
    with attack.open_gateway(db_url, legacy=True) as gw:
        attack.calls(gw, 1)
    res = cli("audit", "verify")
    assert res.exit_code == 0, res.output
    assert "warning: unkeyed chain" in res.stderr
    report = as_json(cli("audit", "verify", "--json"))
    assert any(c["warnings"] for c in report["chains"])


def test_the_cli_next_to_a_demo_store_uses_the_demo_key(
        cli: Invoke, db_url: str, tmp_path: Path, cli_env: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # what `make run` leaves in its directory: the store keyed from toolkeeper-secrets.key
    monkeypatch.chdir(tmp_path)
    generate_key_file(tmp_path / "toolkeeper-secrets.key")
    with attack.open_gateway(db_url, secrets="embedded",
                             secrets_key_file=tmp_path / "toolkeeper-secrets.key") as gw:
        attack.calls(gw, 1)
    listed = cli("approvals", "list", "--json")
    assert listed.exit_code != 2 and "audit key" not in listed.output, listed.output
    ok = cli("audit", "verify")
    assert ok.exit_code == 0 and "not checked" not in ok.output, ok.output
    (tmp_path / "toolkeeper-secrets.key").rename(tmp_path / "elsewhere.key")
    lost = cli("audit", "verify")
    assert lost.exit_code == 1  # no key: the keyed chain is not silently accepted


def test_the_cli_verifies_with_the_key_made_on_first_start(
        cli: Invoke, db_url: str, tmp_path: Path, cli_env: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # where a PostgreSQL store's key goes
    with attack.open_gateway(db_url) as gw:  # no key configured: one is made
        attack.calls(gw, 2)
    ok = cli("audit", "verify")
    assert ok.exit_code == 0, ok.output
    assert "unkeyed" not in ok.stderr and "not checked" not in ok.output
    attack.edit_and_rechain(db_url, 2)
    res = cli("audit", "verify")
    assert res.exit_code == 1 and "seq 2: unkeyed event after keyed events" in res.stderr
