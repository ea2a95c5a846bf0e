"""Built-in tools of part A (git, calculate, datetime_utils, json_transform), by tool name."""

from __future__ import annotations

from toolkeeper.builtins.calculate import CalculateTool
from toolkeeper.builtins.datetime_utils import DatetimeTool
from toolkeeper.builtins.git import GitTool
from toolkeeper.builtins.json_transform import JsonTransformTool
from toolkeeper.providers.native import BaseTool

BUILTINS_A: dict[str, type[BaseTool]] = {
    "git": GitTool,
    "calculate": CalculateTool,
    "datetime_utils": DatetimeTool,
    "json_transform": JsonTransformTool,
}
