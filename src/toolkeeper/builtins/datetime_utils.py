"""Built-in ``datetime_utils`` tool: now, convert, parse and diff across IANA time zones.

Time zones are IANA names (``Europe/Paris``, ``UTC``); an unknown one is ``invalid_arguments``.
Accepted date-time texts, tried in this order:

1. ISO 8601 (``2024-05-01``, ``2024-05-01T12:30:00+02:00``, ``2024-05-01 12:30Z``…);
2. ``@<unix seconds>`` (``@1714566600``, decimals allowed);
3. RFC 2822 (``Wed, 01 May 2024 12:30:00 +0000``);
4. ``YYYY/MM/DD[ HH:MM[:SS]]``, ``DD Month YYYY[ HH:MM]`` and ``Month DD, YYYY[ HH:MM]``
   with English month names, full or abbreviated.

A text without an offset is read in ``tz`` / ``from_tz`` when given, else in UTC.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, tzinfo
from email.utils import parsedate_to_datetime
from typing import Annotated, Any, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from toolkeeper.bounds import Subset
from toolkeeper.model.enums import Risk, SideEffect
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ActionSpec, ExecutionMeta
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.native import BaseTool

_TZ_RE = re.compile(r"^[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+){0,2}$")
_UNIX_RE = re.compile(r"^@-?\d{1,12}(?:\.\d{1,9})?$")
_MAX_TEXT = 100
_UNITS = {"seconds": 1.0, "minutes": 60.0, "hours": 3600.0, "days": 86400.0}
_FORMATS = (
    "%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M", "%Y/%m/%d",
    "%d %B %Y %H:%M", "%d %B %Y", "%d %b %Y %H:%M", "%d %b %Y",
    "%B %d, %Y %H:%M", "%B %d, %Y", "%b %d, %Y %H:%M", "%b %d, %Y",
)


class DatetimePolicy(ToolPolicy):
    """Policy of the datetime_utils tool: which actions may run."""

    allowed_actions: Annotated[tuple[str, ...] | None, Subset(open="none")] = (
        "now", "convert", "parse", "diff")
    """Actions permitted; ``None`` leaves it to the activation."""


class _BadInput(ValueError):
    """An argument the tool cannot use; becomes ``invalid_arguments``."""


def _text(request: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = request.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > _MAX_TEXT:
        raise _BadInput(f"{key} must be a non-empty string of at most {_MAX_TEXT} characters")
    return value.strip()


def zone(name: str | None) -> tzinfo:
    """The IANA zone ``name`` (UTC when ``None``)."""
    if name is None or name.upper() in ("UTC", "Z"):
        return UTC
    if not _TZ_RE.match(name):
        raise _BadInput(f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise _BadInput(f"unknown time zone {name!r}") from None


def parse_datetime(text: str, default_tz: tzinfo) -> tuple[datetime, str]:
    """Parse ``text`` in the documented formats: (aware datetime, format name)."""
    parsed, fmt = _parse_naive_or_aware(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=default_tz)
    return parsed, fmt


def _parse_naive_or_aware(text: str) -> tuple[datetime, str]:
    try:
        return datetime.fromisoformat(text), "iso8601"
    except ValueError:
        pass
    if _UNIX_RE.match(text):
        try:
            return datetime.fromtimestamp(float(text[1:]), UTC), "unix"
        except (OverflowError, OSError, ValueError):
            raise _BadInput(f"timestamp out of range: {text!r}") from None
    try:
        return parsedate_to_datetime(text), "rfc2822"
    except (TypeError, ValueError, IndexError):
        pass
    for fmt in _FORMATS:
        try:
            return datetime.strptime(text, fmt), fmt
        except ValueError:
            continue
    raise _BadInput(f"unrecognised date-time {text!r} (see the tool description for formats)")


def _describe(moment: datetime, tz_name: str | None = None) -> dict[str, Any]:
    return {
        "datetime": moment.isoformat(),
        "tz": tz_name or moment.tzname() or str(moment.tzinfo),
        "unix": moment.timestamp(),
    }


def _schema(props: dict[str, Any], *required: str) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


_STR: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": _MAX_TEXT}
_UNIT: dict[str, Any] = {"type": "string", "enum": list(_UNITS)}
_PURE = SideEffect.PURE


class DatetimeTool(BaseTool):
    """Current time, time-zone conversion, parsing and differences of date-times."""

    tool_name = "datetime_utils"
    description = "now / convert / parse / diff date-times across IANA time zones."
    actions: ClassVar[dict[str, ActionSpec]] = {
        "now": ActionSpec(description="Current time in tz (default UTC).",
                          input_schema=_schema({"tz": _STR}), side_effect=_PURE),
        "convert": ActionSpec(description="Convert a date-time to to_tz.", side_effect=_PURE,
                              input_schema=_schema(
                                  {"datetime": _STR, "to_tz": _STR, "from_tz": _STR},
                                  "datetime", "to_tz")),
        "parse": ActionSpec(description="Parse ISO 8601, @unix, RFC 2822 and a few more.",
                            input_schema=_schema({"text": _STR, "tz": _STR}, "text"),
                            side_effect=_PURE),
        "diff": ActionSpec(description="end - start in seconds, minutes, hours or days.",
                           input_schema=_schema({"start": _STR, "end": _STR, "unit": _UNIT},
                                                "start", "end"),
                           side_effect=_PURE),
    }
    risk_default = Risk.LOW
    side_effect = SideEffect.PURE
    execution = ExecutionMeta(is_pure=True, timeout_s=5.0)
    policy_model = DatetimePolicy
    inline = True

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self._clock = clock or (lambda: datetime.now(UTC))

    def execute(self, action: str, request: dict[str, Any], context: ToolContext) -> Any:
        """Run ``now``, ``convert``, ``parse`` or ``diff``."""
        self.checked_policy(action, context, ToolPolicy)
        handler: Callable[[dict[str, Any]], dict[str, Any]] = getattr(self, f"_{action}")
        try:
            return handler(request)
        except _BadInput as exc:
            context.fail(Reason.INVALID_ARGUMENTS, str(exc))

    def _now(self, request: dict[str, Any]) -> dict[str, Any]:
        name = _text(request, "tz", required=False)
        return _describe(self._clock().astimezone(zone(name)), name)

    def _convert(self, request: dict[str, Any]) -> dict[str, Any]:
        to_name = _text(request, "to_tz")
        source = zone(_text(request, "from_tz", required=False))
        moment, _ = parse_datetime(_text(request, "datetime") or "", source)
        return _describe(moment.astimezone(zone(to_name)), to_name)

    def _parse(self, request: dict[str, Any]) -> dict[str, Any]:
        name = _text(request, "tz", required=False)
        moment, fmt = parse_datetime(_text(request, "text") or "", zone(name))
        return {**_describe(moment), "format": fmt}

    def _diff(self, request: dict[str, Any]) -> dict[str, Any]:
        unit = request.get("unit", "seconds")
        if not isinstance(unit, str) or unit not in _UNITS:
            raise _BadInput(f"unit must be one of {', '.join(_UNITS)}")
        start, _ = parse_datetime(_text(request, "start") or "", UTC)
        end, _ = parse_datetime(_text(request, "end") or "", UTC)
        seconds = (end - start).total_seconds()
        return {"value": seconds / _UNITS[unit], "unit": unit, "seconds": seconds}
