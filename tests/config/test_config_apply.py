"""``toolkeeper apply``: idempotent sync into the store, through the gateway's registry."""

from __future__ import annotations

import base64
import os
from datetime import timedelta
from pathlib import Path

import pytest

from toolkeeper.config import apply_config, apply_file, load_text
from toolkeeper.config.apply import ApplyReport, config_settings, secrets_store
from toolkeeper.errors import ConfigError
from toolkeeper.gateway import Gateway
from toolkeeper.model.enums import CallStatus, Mode, ToolStatus
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.secrets import EmbeddedSecretsStore, EnvSecretsStore, MemoryBlobStore

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "examples" / "toolkeeper.yaml"

CONFIG = """\
version: 1
tenants:
  default:
    gates: {high: {3: confirm}}
tools:
  - builtin: calculate
  - native: tests.support.config_tools:add_numbers
  - native: tests.support.config_tools:NotesTool
    version_placeholder: true
profiles:
  - name: helper
    autonomy: 2
    activations:
      - tool: calculate
      - tool: add_numbers
      - tool: notes
        actions: [read]
  - name: spare
agents:
  - {name: bot, profile: helper}
  - {name: spare-bot, profile: spare}
"""


def _cfg(notes: str = "") -> str:
    """CONFIG with ``notes`` as the extra lines of the NotesTool entry."""
    return CONFIG.replace("    version_placeholder: true\n", notes)


def _apply(gw: Gateway, text: str, prune: bool = False) -> ApplyReport:
    return apply_config(gw, load_text(text, "tk.yaml"), base_dir=HERE, prune=prune)


def _working(gw: Gateway, name: str) -> ToolDefinition:
    record = gw.catalog.record("default", name)
    assert record is not None, name
    return record[1]


def test_apply_creates_tools_profiles_agents_and_calls_run(gw: Gateway) -> None:
    report = _apply(gw, _cfg())
    assert report.created == [
        "tool:calculate", "tool:default/add_numbers", "tool:default/notes", "tenant:default",
        "profile:default/helper", "profile:default/spare", "agent:default/bot",
        "agent:default/spare-bot"]
    assert {t.name: t.status for t in gw.catalog.visible("default")} == {
        "add_numbers": ToolStatus.PUBLISHED, "calculate": ToolStatus.PUBLISHED,
        "notes": ToolStatus.PUBLISHED}
    assert _working(gw, "calculate").tenant_id is None
    res = gw.call_sync("add_numbers", arguments={"a": 2, "b": 3}, agent="bot")
    assert (res.status, res.output) == (CallStatus.SUCCEEDED, 5)
    res = gw.call_sync("calculate", "run", {"expression": "6*7"}, agent="bot")
    assert res.status is CallStatus.SUCCEEDED and res.output["result"] == 42
    denied = gw.call_sync("notes", "append", {"text": "x"}, agent="bot")
    assert denied.reason == "action_not_allowed"


def test_reapplying_an_unchanged_file_changes_nothing(gw: Gateway) -> None:
    _apply(gw, _cfg())
    before = gw.store.registry.tools(all_tenants=True)
    report = _apply(gw, _cfg())
    assert report.changes == 0 and report.created == report.updated == []
    assert len(report.unchanged) == 8
    assert gw.store.registry.tools(all_tenants=True) == before
    applied = [e for e in gw.store.audit.list(None) if e.type == "config.applied"]
    assert [e.data["changes"] for e in applied] == [8, 0]
    assert applied[0].data["digest"] == applied[1].data["digest"]


def test_changed_tool_with_a_published_version_is_refused_at_its_position(
        gw: Gateway) -> None:
    _apply(gw, _cfg())
    changed = _cfg(notes="    overrides: {description: other}\n")
    with pytest.raises(ConfigError) as info:
        _apply(gw, changed)
    err = info.value
    assert (err.path, err.line, err.column) == ("tk.yaml", 8, 5)
    assert "version 1.0.0 is already published" in str(err) and "bump `version`" in str(err)
    assert _working(gw, "notes").description != "other"


def test_changed_tool_with_a_new_version_is_published(gw: Gateway) -> None:
    _apply(gw, _cfg())
    report = _apply(gw, _cfg(notes="    overrides: {description: other, version: 1.1.0}\n"))
    assert report.updated == ["tool:default/notes"]
    record = gw.catalog.record("default", "notes")
    assert record is not None
    _id, working, versions = record
    assert (working.version, working.status) == ("1.1.0", ToolStatus.PUBLISHED)
    assert [v.version for v in versions] == ["1.0.0", "1.1.0"]


def test_changed_profile_is_updated_and_prune_removes_what_the_file_dropped(
        gw: Gateway) -> None:
    _apply(gw, _cfg())
    smaller = _cfg().replace("  - name: spare\n", "").replace(
        "  - {name: spare-bot, profile: spare}\n", "").replace("autonomy: 2", "autonomy: 1")
    report = _apply(gw, smaller)
    assert report.updated == ["profile:default/helper"]
    assert ("default", "spare") in gw.catalog.profiles  # kept without prune
    report = _apply(gw, smaller, prune=True)
    assert report.pruned == ["agent:default/spare-bot", "profile:default/spare"]
    assert ("default", "spare") not in gw.catalog.profiles
    assert ("default", "spare-bot") not in gw.catalog.agents
    assert ("default", "helper") in gw.catalog.profiles


def test_a_broken_wiring_is_refused_before_anything_is_written(gw: Gateway) -> None:
    bad = _cfg() + "  - {name: lost, profile: nowhere}\n"
    with pytest.raises(ConfigError) as info:
        _apply(gw, bad)
    assert "[unknown_profile] agents[2].profile" in str(info.value)
    assert info.value.line == 21
    assert gw.store.registry.tools(all_tenants=True) == []
    assert gw.store.registry.profiles() == []


def test_draft_tools_stay_drafts_until_publish_is_set(gw: Gateway) -> None:
    text = ("version: 1\ntools:\n  - native: tests.support.config_tools:add_numbers\n"
            "    publish: false\n")
    _apply(gw, text)
    assert _working(gw, "add_numbers").status is ToolStatus.DRAFT
    report = _apply(gw, text.replace("publish: false", "publish: true"))
    assert report.updated == ["tool:default/add_numbers"]
    assert _working(gw, "add_numbers").status is ToolStatus.PUBLISHED


def test_function_allow_list_reaches_the_gateway(gw: Gateway) -> None:
    text = ("version: 1\nfunctions: {shorten_text: 'textwrap:shorten'}\ntools:\n"
            "  - name: shorten\n    implementation_type: function\n"
            "    implementation: {function_name: shorten_text}\n    side_effect: pure\n"
            "    risk_default: low\n    input_schema: {type: object, additionalProperties: true}\n"
            "profiles: [{name: p, activations: [{tool: shorten}]}]\n"
            "agents: [{name: a, profile: p}]\n")
    _apply(gw, text)
    res = gw.call_sync("shorten", arguments={"text": "one two three four", "width": 12},
                       agent="a")
    assert (res.status, res.output) == (CallStatus.SUCCEEDED, "one [...]")


def test_gateway_open_applies_the_example(tmp_path: Path) -> None:
    with Gateway.open(f"sqlite:///{tmp_path}/tk.db", config=str(EXAMPLE)) as gw:
        res = gw.call_sync("word_count", arguments={"text": "a b c"}, agent="review-bot")
        assert (res.status, res.output) == (CallStatus.SUCCEEDED, 3)
        assert apply_file(gw, EXAMPLE).changes == 0


def test_config_settings_only_returns_what_the_file_sets() -> None:
    cfg = load_text("version: 1\nmode: debug\nsettings: {approval_ttl_s: 60, "
                    "audit_level: steps, max_pending_approvals: 50}\n")
    assert config_settings(cfg) == {"mode": Mode.DEBUG, "approval_ttl": timedelta(seconds=60),
                                    "audit_level": "steps", "max_pending_approvals": 50}
    assert config_settings(load_text("version: 1\n")) == {}


def test_secrets_store_builds_the_configured_backend(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLKEEPER_SECRETS_KEY", raising=False)
    assert secrets_store(load_text("version: 1\n"), tmp_path) is None
    env = secrets_store(load_text("version: 1\nsecrets: {backend: env}\n"), tmp_path)
    assert isinstance(env, EnvSecretsStore)
    key = tmp_path / "secrets.key"
    key.write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    key.chmod(0o600)
    cfg = load_text("version: 1\nsecrets: {backend: embedded, key_file: secrets.key}\n")
    store = secrets_store(cfg, tmp_path, MemoryBlobStore())
    assert isinstance(store, EmbeddedSecretsStore)
    with pytest.raises(ConfigError, match="blob store"):
        secrets_store(cfg, tmp_path)
