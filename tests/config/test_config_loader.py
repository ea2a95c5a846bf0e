"""Loading toolkeeper.yaml: every problem carries its file position (SPEC §7)."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolkeeper.config as config_pkg
from toolkeeper.config import ConfigFile, load_file, load_text
from toolkeeper.config.model import BuiltinEntry, DefinitionEntry, NativeEntry
from toolkeeper.errors import ConfigError


def _error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_text(text, "toolkeeper.yaml")
    return info.value


def test_yaml_syntax_error_has_line_and_column() -> None:
    err = _error("version: 1\nprofiles:\n  - name: [unclosed\n")
    assert err.path == "toolkeeper.yaml"
    assert err.line == 4 and err.column == 1
    assert err.problems[0].startswith("toolkeeper.yaml:4:1: YAML syntax:")


def test_wrong_type_deep_inside_a_profile_points_at_the_key() -> None:
    err = _error(
        "version: 1\n"
        "profiles:\n"
        "  - name: p\n"
        "    activations:\n"
        "      - tool: git\n"
        "        requires_confirmation: sometimes\n")
    assert (err.line, err.column) == (6, 9)
    assert err.problems == ["toolkeeper.yaml:6:9: profiles[0].activations[0]."
                            "requires_confirmation: Input should be a valid boolean, "
                            "unable to interpret input"]


def test_autonomy_out_of_range_message() -> None:
    err = _error("version: 1\nprofiles:\n  - name: p\n    autonomy: 7\n")
    assert err.problems == ["toolkeeper.yaml:4:5: profiles[0].autonomy: "
                            "Input should be 0, 1, 2 or 3"]


def test_duplicate_keys_are_refused_with_both_lines() -> None:
    err = _error("version: 1\nagents:\n  - name: a\n    profile: p\n    name: b\n")
    assert (err.line, err.column) == (5, 5)
    assert "duplicate key 'name' (first at line 3)" in err.problems[0]


def test_duplicate_top_level_key() -> None:
    err = _error("version: 1\ntools: []\ntools: []\n")
    assert err.line == 3 and "duplicate key 'tools'" in str(err)


def test_unknown_keys_are_errors_with_position() -> None:
    err = _error("version: 1\nprofiles:\n  - name: p\n    autonomyy: 2\n")
    assert err.problems == ["toolkeeper.yaml:4:5: profiles[0].autonomyy: "
                            "unknown key (not allowed here)"]


def test_all_problems_are_collected_in_file_order() -> None:
    err = _error(
        "version: 2\n"
        "tools:\n"
        "  - builtin: nope\n"
        "  - {foo: 1}\n"
        "tenants:\n"
        "  default:\n"
        "    gates: {high: {2: confrm}}\n"
        "agents: [{name: a}]\n")
    lines = [p.split(":")[1] for p in err.problems]
    assert lines == ["1", "3", "4", "7", "8"]
    assert "tools[0].builtin: no built-in 'nope'" in err.problems[1]
    assert "tools[1]: a tool entry needs exactly one of" in err.problems[2]
    assert "tenants.default.gates.high.2" in err.problems[3]
    assert "agents[0].profile: Field required" in err.problems[4]
    assert str(err).startswith("toolkeeper.yaml:1:1: version:") and "(and 4 more)" in str(err)


def test_lifecycle_fields_of_a_definition_are_refused() -> None:
    err = _error("version: 1\ntools:\n  - name: w\n    status: published\n")
    assert "status: managed by the registry" in err.problems[0]


def test_tool_entries_are_told_apart() -> None:
    cfg = load_text("version: 1\ntools:\n  - builtin: calculate\n"
                    "  - native: tests.support.config_tools:add_numbers\n    tenant: global\n"
                    "  - name: w\n    implementation_type: http\n")
    kinds = [type(t) for t in cfg.tools]
    assert kinds == [BuiltinEntry, NativeEntry, DefinitionEntry]
    assert cfg.tools[1].tenant is None
    assert cfg.tools[2].tenant == "default"


def test_secret_references_and_dollar_text_stay_literal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME_URL", "https://evil.example")
    cfg = load_text("version: 1\ntools:\n  - name: w\n    implementation_type: http\n"
                    "    implementation: {url: '${HOME_URL}', headers: "
                    "{Authorization: '${secret:w/token}'}}\n")
    entry = cfg.tools[0]
    assert isinstance(entry, DefinitionEntry)
    assert entry.implementation == {"url": "${HOME_URL}",
                                    "headers": {"Authorization": "${secret:w/token}"}}


def test_empty_and_non_mapping_files_are_refused() -> None:
    assert "empty" in str(_error(""))
    assert "must be a mapping" in str(_error("- 1\n- 2\n"))


def test_load_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tk.yaml"
    path.write_text("version: 1\nmode: fast\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.problems[0].startswith(f"{path}:2:1: mode:")
    with pytest.raises(ConfigError, match="cannot read config"):
        load_file(tmp_path / "missing.yaml")


def test_positions_are_kept_on_the_loaded_config() -> None:
    cfg = load_text("version: 1\nprofiles:\n  - name: p\n    autonomy: 2\n", "x.yaml")
    assert isinstance(cfg, ConfigFile)
    assert cfg.source == "x.yaml"
    assert cfg.position(("profiles", 0, "autonomy")) == (4, 5)
    assert cfg.position(("profiles", 0, "scopes")) == (3, 5)  # nearest existing node


def test_public_names_are_exported() -> None:
    for name in config_pkg.__all__:
        assert getattr(config_pkg, name) is not None
    assert {"load_file", "load_text", "check", "check_file", "apply_config", "apply_file",
            "ConfigFile", "Violation", "ApplyReport", "json_schema"} <= set(config_pkg.__all__)
