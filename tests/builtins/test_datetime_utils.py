"""The datetime_utils built-in: now, convert, parse and diff across IANA zones."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from toolkeeper.builtins.datetime_utils import DatetimePolicy, DatetimeTool
from toolkeeper.errors import ToolDenied, ToolError
from toolkeeper.model.enums import Autonomy, Risk, SideEffect
from toolkeeper.providers.base import ToolContext

FIXED = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)


def ctx(action: str, **policy: Any) -> ToolContext:
    return ToolContext(
        call_id="c1", tenant_id="t", agent="a", tool="datetime_utils", action=action,
        tool_version="1", autonomy=Autonomy(2), granted_scopes=frozenset(),
        policy=DatetimePolicy(**policy),
    )


def run(action: str, request: dict[str, Any], **policy: Any) -> Any:
    return DatetimeTool(clock=lambda: FIXED).execute(action, request, ctx(action, **policy))


def reason_of(action: str, request: dict[str, Any], **policy: Any) -> str:
    with pytest.raises((ToolDenied, ToolError)) as info:
        run(action, request, **policy)
    assert isinstance(info.value, (ToolDenied, ToolError))
    return info.value.reason


def test_now_defaults_to_utc() -> None:
    assert run("now", {}) == {"datetime": "2024-05-01T12:30:00+00:00", "tz": "UTC",
                              "unix": FIXED.timestamp()}


def test_now_in_a_named_zone_applies_its_offset() -> None:
    out = run("now", {"tz": "Asia/Tokyo"})
    assert out["datetime"] == "2024-05-01T21:30:00+09:00"
    assert out["tz"] == "Asia/Tokyo"


def test_now_uses_the_real_clock_by_default() -> None:
    before = datetime.now(UTC).timestamp()
    out = DatetimeTool().execute("now", {}, ctx("now"))
    assert before <= out["unix"] <= datetime.now(UTC).timestamp()


def test_convert_between_zones_handles_daylight_saving() -> None:
    summer = run("convert", {"datetime": "2024-07-01T12:00:00Z", "to_tz": "Europe/Paris"})
    winter = run("convert", {"datetime": "2024-01-01T12:00:00Z", "to_tz": "Europe/Paris"})
    assert summer["datetime"] == "2024-07-01T14:00:00+02:00"
    assert winter["datetime"] == "2024-01-01T13:00:00+01:00"


def test_convert_reads_naive_input_in_from_tz() -> None:
    out = run("convert", {"datetime": "2024-03-10 09:00", "from_tz": "America/New_York",
                          "to_tz": "UTC"})
    assert out["datetime"] == "2024-03-10T13:00:00+00:00"


@pytest.mark.parametrize(
    ("text", "expected", "fmt"),
    [
        ("2024-05-01T14:30:00+02:00", "2024-05-01T14:30:00+02:00", "iso8601"),
        ("2024-05-01", "2024-05-01T00:00:00+00:00", "iso8601"),
        ("@1714566600", "2024-05-01T12:30:00+00:00", "unix"),
        ("Wed, 01 May 2024 12:30:00 +0000", "2024-05-01T12:30:00+00:00", "rfc2822"),
        ("2024/05/01 12:30", "2024-05-01T12:30:00+00:00", "%Y/%m/%d %H:%M"),
        ("1 May 2024", "2024-05-01T00:00:00+00:00", "%d %B %Y"),
    ],
)
def test_parse_accepts_the_documented_formats(text: str, expected: str, fmt: str) -> None:
    out = run("parse", {"text": text})
    assert out["datetime"] == expected
    assert out["format"] == fmt


def test_parse_reads_naive_text_in_tz() -> None:
    out = run("parse", {"text": "2024-05-01 08:00", "tz": "Europe/London"})
    assert out["datetime"] == "2024-05-01T08:00:00+01:00"


@pytest.mark.parametrize(("unit", "value"), [("seconds", 5400.0), ("minutes", 90.0),
                                             ("hours", 1.5), ("days", 1.5 / 24)])
def test_diff_reports_end_minus_start_in_the_unit(unit: str, value: float) -> None:
    out = run("diff", {"start": "2024-05-01T10:00:00Z", "end": "2024-05-01T13:30:00+02:00",
                       "unit": unit})
    assert out["value"] == pytest.approx(value)
    assert out["seconds"] == 5400.0


def test_diff_is_negative_when_end_precedes_start() -> None:
    out = run("diff", {"start": "2024-05-02", "end": "2024-05-01", "unit": "days"})
    assert out["value"] == -1.0


@pytest.mark.parametrize("tz", ["Mars/Olympus", "../../etc/passwd", "America", "Europe/../Paris"])
def test_unknown_time_zone_is_invalid_arguments(tz: str) -> None:
    with pytest.raises(ToolError) as info:
        run("now", {"tz": tz})
    assert info.value.reason == "invalid_arguments"
    assert "time zone" in info.value.message


@pytest.mark.parametrize(
    ("action", "request_"),
    [
        ("parse", {"text": "next tuesday"}),
        ("parse", {"text": 1714566600}),
        ("parse", {}),
        ("convert", {"datetime": "2024-05-01", "to_tz": None}),
        ("diff", {"start": "2024-05-01", "end": "2024-05-02", "unit": "fortnights"}),
        ("diff", {"start": "2024-05-01", "end": "2024-05-02", "unit": ["days"]}),
        ("parse", {"text": "@99999999999999"}),
        ("parse", {"text": "2024-05-01" * 20}),
    ],
)
def test_bad_values_are_invalid_arguments(action: str, request_: dict[str, Any]) -> None:
    assert reason_of(action, request_) == "invalid_arguments"


def test_action_outside_policy_is_denied() -> None:
    assert reason_of("now", {}, allowed_actions=("parse",)) == "action_not_allowed"


def test_definition_is_pure_and_low_risk() -> None:
    definition = DatetimeTool.definition()
    for action in ("now", "convert", "parse", "diff"):
        assert definition.action_risk(action) is Risk.LOW
        assert definition.action_side_effect(action) is SideEffect.PURE
