"""Gateway.open(config=…) takes the file's database, mode, settings and secrets backend."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from toolkeeper import Gateway, Mode
from toolkeeper.secrets.env import EnvSecretsStore

CONFIG = """\
version: 1
mode: debug
database: sqlite:///{db}
secrets: {{backend: env}}
settings: {{audit_level: steps, approval_ttl_s: 60}}
tools:
  - builtin: calculate
profiles:
  - name: p
    autonomy: 2
    activations: [{{tool: calculate}}]
agents:
  - {{name: bot, profile: p}}
"""


def test_open_with_config_applies_its_settings(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLKEEPER_DATABASE_URL", raising=False)
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(CONFIG.format(db=tmp_path / "from-config.db"))
    with Gateway.open(config=path) as gw:
        assert gw.settings.mode is Mode.DEBUG
        assert gw.settings.audit_level == "steps"
        assert gw.settings.approval_ttl == timedelta(seconds=60)
        assert isinstance(gw._secrets, EnvSecretsStore)
        assert gw.store.db.url.endswith("from-config.db")
        res = gw.call_sync("calculate", arguments={"expression": "6*7"}, agent="bot")
        assert res.ok and res.output is not None
        gw.flush()
        types = {e.type for e in gw.store.audit.list("default", call_id=res.call_id)}
        assert {"call.requested", "gate.allowed", "call.succeeded"} <= types


def test_explicit_arguments_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(CONFIG.format(db=tmp_path / "from-config.db"))
    with Gateway.open(f"sqlite:///{tmp_path}/explicit.db", config=path,
                      mode="production", audit_level="decisions") as gw:
        assert gw.settings.mode is Mode.PRODUCTION and gw.settings.audit_level == "decisions"
        assert gw.store.db.url.endswith("explicit.db")
