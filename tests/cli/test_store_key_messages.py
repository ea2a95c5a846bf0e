"""Which key a store's audit chains are keyed with is never a guess (issue 33 item 6): the
first keying is said, with the key's source and the setting every process needs; a later
process without that key, or with another, is refused naming the key in use, the store's
key (its source and fingerprint) and the variable to set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from toolkeeper import Gateway
from toolkeeper.cli import app
from toolkeeper.errors import ConfigError
from toolkeeper.secrets import generate_key_file
from toolkeeper.store.audit_key import AuditKey, derive, read_key_file

CONFIG = """\
version: 1
secrets: {backend: env}
tools: [{builtin: calculate}]
profiles: [{name: p, autonomy: 3, activations: [{tool: calculate}]}]
agents: [{name: bot, profile: p}]
"""
KEY_VARS = ("TOOLKEEPER_AUDIT_KEY", "TOOLKEEPER_AUDIT_KEY_FILE", "TOOLKEEPER_SECRETS_KEY",
            "TOOLKEEPER_SECRETS_KEY_FILE", "TOOLKEEPER_SECRETS_BACKEND",
            "TOOLKEEPER_AUDIT_CHECKPOINTS", "TOOLKEEPER_DATABASE_URL", "TOOLKEEPER_CONFIG")


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory where ``make run`` left the demo's secrets key file."""
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    generate_key_file(tmp_path / "toolkeeper-secrets.key")
    (tmp_path / "tk.yaml").write_text(CONFIG)
    return tmp_path


def _run(*args: str, **env: str) -> Result:
    return CliRunner(env={"COLUMNS": "200", **env}).invoke(app, list(args))


def test_a_new_store_keyed_with_the_demos_key_file_says_so_and_a_refusal_names_the_fix(
        checkout: Path) -> None:
    demo_key = checkout / "toolkeeper-secrets.key"
    db = f"sqlite:///{checkout}/new.db"
    applied = _run("--db", db, "apply", "-f", "tk.yaml")
    assert applied.exit_code == 0, applied.output
    assert (f"note: this store's audit chains are now keyed with a key derived from the "
            f"secrets key file {demo_key}") in applied.stderr
    assert f"(TOOLKEEPER_SECRETS_KEY_FILE={demo_key})" in applied.stderr
    again = _run("--db", db, "apply", "-f", "tk.yaml")
    assert again.exit_code == 0 and "note: this store's" not in again.stderr, again.output

    # the config's `secrets: env` brings no key: refused, naming the store's key and the fix
    call = ("--db", db, "call", "calculate", "--arg", "expression=1+2", "--agent", "bot",
            "--config", "tk.yaml")
    refused = _run(*call)
    assert refused.exit_code == 2, refused.output
    message = " ".join(refused.stderr.split())
    fingerprint = AuditKey(derive(read_key_file(demo_key, "key"))).fingerprint()
    assert (f"keyed with a key derived from the secrets key file {demo_key} (fingerprint "
            f"{fingerprint}) and no audit key is configured here") in message
    assert f"set TOOLKEEPER_SECRETS_KEY_FILE={demo_key}" in message
    # ... and the fix it names works
    fixed = _run(*call, TOOLKEEPER_SECRETS_KEY_FILE=str(demo_key))
    assert fixed.exit_code == 0 and "succeeded" in fixed.stdout, fixed.output


def test_another_key_is_refused_naming_both_keys_and_the_setting(checkout: Path) -> None:
    first, other = checkout / "first.key", checkout / "other.key"
    generate_key_file(first)
    generate_key_file(other)
    db = f"sqlite:///{checkout}/keyed.db"
    Gateway.open(db, audit_key_file=str(first)).close()
    with pytest.raises(ConfigError, match="another audit key") as refused:
        Gateway.open(db, audit_key_file=str(other))
    text = str(refused.value)
    mine = AuditKey(read_key_file(other, "key")).fingerprint()
    stores = AuditKey(read_key_file(first, "key")).fingerprint()
    assert f"in use here (the audit key file {other}, fingerprint {mine})" in text
    assert f"with the audit key file {first} (fingerprint {stores})" in text
    assert f"set TOOLKEEPER_AUDIT_KEY_FILE={first}" in text
    assert os.path.exists(first)
