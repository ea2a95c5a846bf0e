"""The json_transform built-in: JMESPath over JSON input, bounded in and out."""

from __future__ import annotations

from typing import Any

import pytest

from toolkeeper.builtins.json_transform import JsonTransformPolicy, JsonTransformTool
from toolkeeper.errors import ToolDenied, ToolError
from toolkeeper.model.enums import Autonomy, Risk, SideEffect
from toolkeeper.providers.base import ToolContext

PEOPLE = {"people": [{"name": "ada", "age": 36}, {"name": "alan", "age": 41},
                     {"name": "grace", "age": 85}]}


def ctx(**policy: Any) -> ToolContext:
    return ToolContext(
        call_id="c1", tenant_id="t", agent="a", tool="json_transform", action="run",
        tool_version="1", autonomy=Autonomy(2), granted_scopes=frozenset(),
        policy=JsonTransformPolicy(**policy),
    )


def run(request: dict[str, Any], tool: JsonTransformTool | None = None, **policy: Any) -> Any:
    return (tool or JsonTransformTool()).execute("run", request, ctx(**policy))


def reason_of(request: dict[str, Any], **policy: Any) -> str:
    with pytest.raises((ToolDenied, ToolError)) as info:
        run(request, **policy)
    assert isinstance(info.value, (ToolDenied, ToolError))
    return info.value.reason


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("people[].name", ["ada", "alan", "grace"]),
        ("people[?age > `40`].name", ["alan", "grace"]),
        ("max_by(people, &age).name", "grace"),
        ("length(people)", 3),
        ("{names: people[].name, first: people[0].age}",
         {"names": ["ada", "alan", "grace"], "first": 36}),
        ("missing.key", None),
    ],
)
def test_expression_is_applied_to_the_data(expression: str, expected: Any) -> None:
    assert run({"data": PEOPLE, "expression": expression}) == {"result": expected}


def test_scalar_and_null_data_are_accepted() -> None:
    assert run({"data": None, "expression": "@"}) == {"result": None}
    assert run({"data": [1, 2, 3], "expression": "sum(@)"}) == {"result": 6}


def test_compiled_expressions_are_cached_per_instance() -> None:
    tool = JsonTransformTool()
    for _ in range(3):
        run({"data": PEOPLE, "expression": "people[0].name"}, tool)
    info = tool._compile.cache_info()
    assert (info.hits, info.misses) == (2, 1)


@pytest.mark.parametrize("expression", ["people[", "people[?age >]", "nosuchfn(people)",
                                        "abs(people)", "length(@, @)", "people..name"])
def test_broken_expression_is_expression_invalid(expression: str) -> None:
    assert reason_of({"data": PEOPLE, "expression": expression}) == "expression_invalid"


@pytest.mark.parametrize(
    "request_",
    [{"data": PEOPLE}, {"data": PEOPLE, "expression": 3}, {"data": PEOPLE, "expression": "  "},
     {"expression": "@"}, {"data": {1, 2}, "expression": "@"},
     {"data": float("nan"), "expression": "@"}],
)
def test_missing_or_malformed_arguments_are_invalid_arguments(request_: dict[str, Any]) -> None:
    assert reason_of(request_) == "invalid_arguments"


def test_input_larger_than_max_input_bytes_is_refused() -> None:
    data = {"blob": "x" * 200}
    assert run({"data": data, "expression": "length(blob)"}, max_input_bytes=300) == {
        "result": 200}
    assert reason_of({"data": data, "expression": "blob"}, max_input_bytes=100) == (
        "payload_too_large")


def test_multibyte_input_is_measured_in_bytes() -> None:
    data = "é" * 60  # 60 characters, 120 bytes, 122 with quotes
    assert reason_of({"data": data, "expression": "@"}, max_input_bytes=100) == (
        "payload_too_large")


def test_expression_longer_than_policy_limit_is_refused() -> None:
    request = {"data": PEOPLE, "expression": "people[0].name" + " " * 50}
    assert reason_of(request, max_expression_length=20) == "payload_too_large"


def test_result_larger_than_max_output_chars_fails() -> None:
    data = {"items": ["abcdefghij"] * 20}
    assert reason_of({"data": data, "expression": "items"}, max_output_chars=50) == (
        "output_too_large")
    assert run({"data": data, "expression": "length(items)"}, max_output_chars=50) == {
        "result": 20}


def test_action_outside_policy_is_denied() -> None:
    assert reason_of({"data": PEOPLE, "expression": "@"}, allowed_actions=()) == (
        "action_not_allowed")


def test_definition_is_pure_low_risk_and_inline() -> None:
    definition = JsonTransformTool.definition()
    assert definition.action_risk("run") is Risk.LOW
    assert definition.action_side_effect("run") is SideEffect.PURE
    assert JsonTransformTool.inline is True


def _pipes(unit: str, n: int) -> str:
    return "|".join([unit] * n)


@pytest.mark.parametrize(("data", "expression"), [
    (["x" * 10] * 10, _pipes("[@,@]", 40)),  # 2^40 leaves by reference, then serialized
    ("x" * 100, _pipes("[@,@]", 40) + "|to_string(@)"),
    (list(range(1000)), _pipes("[@,@,@,@,@,@,@,@,@,@][]", 12)),  # real copies, tenfold
    ([[1]], _pipes("map(&[@,@], @)", 40)),
    (["y" * 1000] * 10, _pipes("[join('', @), join('', @), join('', @), join('', @)]", 10)),
])
def test_expressions_that_multiply_their_input_fail_at_once(data: Any, expression: str) -> None:
    """Each of these hung the server (or ate its memory) before the search was bounded."""
    assert reason_of({"data": data, "expression": expression}) == "output_too_large"


def test_the_search_is_bounded_in_steps() -> None:
    data = list(range(2000))
    assert reason_of({"data": data, "expression": "[*].[@, @, @]"}, max_steps=1000) \
        == "output_too_large"
    assert run({"data": data, "expression": "length(@)"}, max_steps=1000) == {"result": 2000}


def test_a_large_ordinary_input_still_passes() -> None:
    data = [{"id": i, "name": f"n{i}"} for i in range(20_000)]
    out = run({"data": data, "expression": "length([?id > `100`].name)"})
    assert out == {"result": 19_899}
