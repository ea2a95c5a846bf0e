"""``toolkeeper check``: each wiring rule fires on a minimal bad config, at its node."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkeeper.config import Rule, check, check_file, load_text

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "examples" / "toolkeeper.yaml"

GOOD = """\
version: 1
functions: {shorten_text: 'textwrap:shorten'}
tenants:
  default:
    adjusters: [{name: big, when: [{arg: width, op: gt, value: 99}], raise_to: high}]
tools:
  - builtin: calculate
  - native: tests.support.config_tools:add_numbers
  - native: tests.support.config_tools:NotesTool
    policy: {max_length: 50}
  - name: shorten
    implementation_type: function
    implementation: {function_name: shorten_text}
  - name: weather
    implementation_type: http
    implementation: {url: 'https://x.example', headers: {Authorization: '${secret:w/token}'}}
profiles:
  - name: p
    autonomy: 2
    activations:
      - tool: calculate
        policy: {max_exponent: 10}
      - tool: add_numbers
      - tool: notes
        actions: [append, read]
      - tool: shorten
      - tool: weather
agents: [{name: a, profile: p}]
"""

# (rule, text, path of the reported node, line)
BAD = [
    (Rule.UNKNOWN_PROFILE, "version: 1\nagents: [{name: a, profile: nope}]\n",
     "agents[0].profile", 2),
    (Rule.UNKNOWN_TOOL, "version: 1\nprofiles:\n  - name: p\n    activations: [{tool: nope}]\n",
     "profiles[0].activations[0].tool", 4),
    (Rule.UNKNOWN_TOOL, "version: 1\ntools:\n"
     "  - {native: 'tests.support.config_tools:add_numbers', tenant: other}\n"
     "profiles:\n  - name: p\n    activations: [{tool: add_numbers}]\n",
     "profiles[0].activations[0].tool", 6),
    (Rule.UNKNOWN_ACTION, "version: 1\ntools: [{builtin: calculate}]\nprofiles:\n  - name: p\n"
     "    activations:\n      - tool: calculate\n        actions: [run, explode]\n",
     "profiles[0].activations[0].actions[1]", 7),
    (Rule.INVALID_POLICY, "version: 1\ntools: [{builtin: calculate}]\nprofiles:\n  - name: p\n"
     "    activations:\n      - tool: calculate\n        policy: {max_exponnt: 3}\n",
     "profiles[0].activations[0].policy.max_exponnt", 7),
    (Rule.INVALID_POLICY, "version: 1\ntools: [{builtin: calculate}]\nprofiles:\n  - name: p\n"
     "    activations:\n      - tool: calculate\n        policy: {max_exponent: lots}\n",
     "profiles[0].activations[0].policy.max_exponent", 7),
    # a built-in's own policy defaults hold against its policy model, reported at the tool
    # even when no profile activates it
    (Rule.INVALID_POLICY, "version: 1\ntools:\n  - builtin: git\n"
     "    policy: {max_files: lots}\n", "tools[0].policy.max_files", 4),
    (Rule.INVALID_POLICY, "version: 1\ntools:\n  - builtin: http_request\n"
     "    policy: {allowed_hostz: [a.example]}\n", "tools[0].policy.allowed_hostz", 4),
    (Rule.UNGATED_HIGH_RISK, "version: 1\ntools:\n  - builtin: calculate\n"
     "    overrides: {risk_default: high}\nprofiles:\n  - name: p\n    autonomy: 3\n"
     "    activations: [{tool: calculate}]\n", "profiles[0].activations[0]", 8),
    (Rule.UNGATED_HIGH_RISK, "version: 1\ntools:\n  - builtin: calculate\n"
     "    overrides: {risk_default: critical}\ntenants:\n  default: {gates: {critical: "
     "{1: allow}}}\nprofiles:\n  - name: p\n    activations: [{tool: calculate}]\n",
     "profiles[0].activations[0]", 9),
    (Rule.NATIVE_INVALID,
     "version: 1\ntools: [{native: 'tests.support.config_tools:NOT_A_TOOL'}]\n",
     "tools[0]", 2),
    (Rule.NATIVE_INVALID, "version: 1\ntools: [{native: 'no_such_module_xyz:T'}]\n",
     "tools[0]", 2),
    (Rule.INVALID_DEFINITION, "version: 1\ntools:\n  - builtin: calculate\n"
     "    overrides: {risk_map: {nope: high}}\n", "tools[0]", 3),
    (Rule.POLICY_MODEL_MISSING,
     "version: 1\ntools:\n  - native: tests.support.config_tools:BareTool\n",
     "tools[0].native", 3),
    (Rule.FUNCTION_INVALID, "version: 1\nfunctions: {f: 'textwrap:no_such_fn'}\n",
     "functions.f", 2),
    (Rule.FUNCTION_NOT_ALLOWED, "version: 1\ntools:\n  - name: f\n"
     "    implementation_type: function\n    implementation: {function_name: f}\n",
     "tools[0].implementation", 5),
    (Rule.NAME_COLLISION, "version: 1\ntools:\n  - native: tests.support.config_tools:NotesTool\n"
     "  - {name: notes_read, implementation_type: http}\n", "tools[1]", 4),
    (Rule.NAME_COLLISION, "version: 1\ntools:\n  - name: " + "x" * 120 + "\n"
     "    implementation_type: http\n    actions: {run: {}, longaction: {}}\n", "tools[0]", 3),
    (Rule.LITERAL_SECRET, "version: 1\ntools:\n  - name: w\n    implementation_type: http\n"
     "    implementation:\n      headers: {X-Api-Key: hunter2}\n",
     "tools[0].implementation.headers.X-Api-Key", 6),
    (Rule.LITERAL_SECRET, "version: 1\ntools:\n  - builtin: calculate\n"
     "    policy: {access_token: abc}\n", "tools[0].policy.access_token", 4),
    (Rule.DUPLICATE_TOOL, "version: 1\ntools:\n  - builtin: calculate\n  - builtin: calculate\n",
     "tools[1]", 4),
    (Rule.DUPLICATE_PROFILE, "version: 1\nprofiles: [{name: p}, {name: p}]\n",
     "profiles[1].name", 2),
    (Rule.DUPLICATE_AGENT, "version: 1\nprofiles: [{name: p}]\n"
     "agents: [{name: a, profile: p}, {name: a, profile: p}]\n", "agents[1].name", 3),
    (Rule.ADJUSTER_NO_EFFECT, "version: 1\ntenants:\n  t:\n    adjusters: [{name: x}]\n",
     "tenants.t.adjusters[0]", 4),
    (Rule.GATE_LOOSER_THAN_TENANT, "version: 1\ntenants:\n  default: {gates: {high: {2: "
     "approve}}}\nprofiles:\n  - name: p\n    gates: {high: {2: confirm}}\n",
     "profiles[0].gates", 6),
]


def test_good_config_has_no_violations() -> None:
    assert check(load_text(GOOD), base_dir=HERE, tests_dir=HERE) == []


@pytest.mark.parametrize(("rule", "text", "path", "line"), BAD,
                         ids=[f"{b[0].value}-{i}" for i, b in enumerate(BAD)])
def test_rule_fires_at_the_offending_node(rule: Rule, text: str, path: str, line: int) -> None:
    violations = check(load_text(text, "tk.yaml"), base_dir=HERE)
    assert [(v.rule, v.path, v.line) for v in violations] == [(rule.value, path, line)], \
        violations
    assert str(violations[0]).startswith(f"tk.yaml:{line}:")


def test_gates_confirmation_and_policy_make_high_risk_acceptable() -> None:
    base = ("version: 1\ntools:\n  - builtin: calculate\n    overrides: {risk_default: high"
            "{extra}}\nprofiles:\n  - name: p\n    autonomy: 3\n{gates}    activations:\n"
            "      - tool: calculate\n{act}")
    variants = [
        ("", "    gates: {high: {3: confirm}}\n", ""),
        (", requires_confirmation: true", "", ""),
        ("", "", "        requires_confirmation: true\n"),
        ("", "", "        gates: {run: approve}\n"),
        ("", "", "        policy: {allowed_actions: []}\n"),
        ("", "", "        enabled: false\n"),
    ]
    for extra, gates, act in variants:
        text = base.replace("{extra}", extra).replace("{gates}", gates).replace("{act}", act)
        assert check(load_text(text), base_dir=HERE) == [], (extra, gates, act)


def test_tests_missing_needs_a_test_mentioning_the_tool(tmp_path: Path) -> None:
    text = "version: 1\ntools:\n  - native: tests.support.config_tools:NotesTool\n"
    (tmp_path / "test_other.py").write_text("def test_x():\n    assert 'notebook'\n")
    [v] = check(load_text(text), base_dir=HERE, tests_dir=tmp_path)
    assert (v.rule, v.path, v.line) == ("tests_missing", "tools[0].native", 3)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_notes.py").write_text(
        "from tests.support.config_tools import NotesTool\n")
    assert check(load_text(text), base_dir=HERE, tests_dir=tmp_path) == []


def test_tool_functions_need_no_policy_model_but_classes_do() -> None:
    text = ("version: 1\ntools:\n  - native: tests.support.config_tools:add_numbers\n"
            "  - native: tests.support.config_tools:BareTool\n")
    rules = [(v.rule, v.path) for v in check(load_text(text), base_dir=HERE)]
    assert rules == [("policy_model_missing", "tools[1].native")]


def test_store_tools_count_as_existing() -> None:
    from toolkeeper.builtins import definition

    text = "version: 1\nprofiles:\n  - name: p\n    activations: [{tool: calculate}]\n"
    assert check(load_text(text), base_dir=HERE,
                 known_tools=[definition("calculate")]) == []


def test_check_file_turns_load_errors_into_violations(tmp_path: Path) -> None:
    path = tmp_path / "tk.yaml"
    path.write_text("version: 1\nprofiles:\n  - name: p\n    autonomy: 9\n")
    [v] = check_file(path)
    assert (v.rule, v.line, v.column, v.file) == ("config_invalid", 4, 5, str(path))
    assert "profiles[0].autonomy" in v.message


def test_example_config_passes_check_with_its_directory_on_the_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))  # PYTHONPATH=examples, as its header says
    assert check_file(EXAMPLE) == []


def test_an_entry_point_only_the_configs_directory_holds_is_reported() -> None:
    """``check`` imports every entry point as a process reading the store would: one found
    only next to the file (``apply`` and ``--config`` load it, ``call`` without it cannot)
    is a violation naming the config and what to do."""
    found = [v for v in check_file(EXAMPLE) if v.rule == Rule.ONLY_BESIDE_CONFIG]
    assert [(v.path, v.line) for v in found] == [("tools[2].native", 52)]
    message = found[0].message
    assert f"--config {EXAMPLE}" in message and f"put {EXAMPLE.parent} on PYTHONPATH" in message


def test_a_function_only_the_configs_directory_holds_is_reported(tmp_path: Path) -> None:
    (tmp_path / "beside_fn.py").write_text("def shout(text):\n    return text.upper()\n")
    config = tmp_path / "tk.yaml"
    config.write_text("version: 1\nfunctions: {shout: 'beside_fn:shout', wrap: 'textwrap:fill'}\n")
    assert [(v.rule, v.path) for v in check_file(config)] == [
        ("only_beside_config", "functions.shout")]


def test_a_literal_credential_is_refused_with_the_rest_code_and_advice() -> None:
    """Config and REST refuse a credential written into a tool the same way: the code
    ``secret_literal_refused`` and the advice to store it under ``PUT /credentials`` and
    write a ``${secret:…}`` reference in its place."""
    text = ("version: 1\ntools:\n  - name: w\n    implementation_type: http\n"
            "    implementation:\n      headers: {Authorization: Bearer hunter2}\n")
    [violation] = check(load_text(text, "tk.yaml"), base_dir=HERE)
    assert violation.rule == "secret_literal_refused"
    assert "PUT /credentials/" in violation.message
    assert "${secret:connector/key}" in violation.message
    assert "hunter2" not in str(violation)


def test_a_bad_tool_policy_default_is_reported_once_at_the_tool() -> None:
    text = ("version: 1\ntools:\n  - builtin: calculate\n    policy: {max_exponent: lots}\n"
            "profiles:\n  - name: p\n    activations: [{tool: calculate}]\n")
    found = check(load_text(text), base_dir=HERE)
    assert [(v.rule, v.path) for v in found] == [
        (Rule.INVALID_POLICY.value, "tools[0].policy.max_exponent")]

