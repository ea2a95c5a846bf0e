"""``toolkeeper audit verify`` next to a running server (docs/audit-integrity.md): the
server's checkpoint file exists from its start and follows the chain heads while it runs,
so verify is quiet when all is well and still catches a rollback made meanwhile."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tests.support import audit_attacks as attack
from tests.support.waiting import wait_until
from toolkeeper import Gateway
from toolkeeper.cli import app

KEY_ENV = {"TOOLKEEPER_AUDIT_KEY": base64.b64encode(attack.KEY).decode()}


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name in ("TOOLKEEPER_AUDIT_KEY_FILE", "TOOLKEEPER_SECRETS_KEY",
                 "TOOLKEEPER_SECRETS_KEY_FILE", "TOOLKEEPER_AUDIT_CHECKPOINTS"):
        monkeypatch.delenv(name, raising=False)
    return f"sqlite:///{tmp_path}/tk.db"


@pytest.fixture
def serving(url: str) -> Iterator[Gateway]:
    """A gateway opened as ``toolkeeper serve`` opens it: the default checkpoint file
    ``<sqlite file>.audit-checkpoints``, checkpoints due every 0.2 s."""
    gw = attack.open_gateway(url, audit_key=attack.KEY, audit_checkpoint_path="auto",
                             audit_checkpoint_every_s=0.2)
    try:
        yield gw
    finally:
        gw.close()


def _verify(url: str) -> Result:
    runner = CliRunner(env={**KEY_ENV, "TOOLKEEPER_DATABASE_URL": None, "COLUMNS": "200"})
    return runner.invoke(app, ["--db", url, "audit", "verify"])


def _checkpointed(path: Path, seq: int) -> bool:
    lines = path.read_text().splitlines() if path.exists() else []
    return any(json.loads(line)["tenant"] == "default" and json.loads(line)["seq"] == seq
               for line in lines)


def test_verify_while_the_server_runs_is_quiet(url: str, serving: Gateway) -> None:
    attack.calls(serving, 2)
    res = _verify(url)
    assert res.exit_code == 0, res.output
    assert "warning" not in res.stderr, res.stderr


def test_a_rollback_while_the_server_runs_is_still_caught(url: str, serving: Gateway) -> None:
    attack.calls(serving, 2)
    saved = attack.head(url)
    attack.calls(serving, 2, tag="later-")
    newest = attack.head(url)["seq"]
    cps = Path(url.removeprefix("sqlite:///") + ".audit-checkpoints")
    # the server's periodic checkpoint, not the one written when it stops
    wait_until(lambda: _checkpointed(cps, newest), timeout=30,
               what=f"the running gateway checkpoints head {newest}")
    assert _verify(url).exit_code == 0
    attack.replay_head(url, saved)
    res = _verify(url)
    assert res.exit_code == 1, res.output
    assert "rolled back" in res.stderr, res.stderr
    assert os.stat(cps).st_mode & 0o077 == 0
