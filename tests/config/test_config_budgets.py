"""Budgets and costs declared in config (docs/guides/budgets.md): applied, they stop calls."""

from __future__ import annotations

from pathlib import Path

from toolkeeper.config import apply_config, load_text
from toolkeeper.gateway import Gateway
from toolkeeper.model.reasons import Reason

HERE = Path(__file__).resolve().parent

CONFIG = """\
version: 1
tenants:
  default:
    limits:
      budgets:
        - {name: tenant-day, per: tenant, max_cost: 0.25}
tools:
  - builtin: calculate
    overrides:
      costs:
        "*": {fixed: 0.1}
  - native: tests.support.config_tools:add_numbers
profiles:
  - name: helper
    autonomy: 2
    activations:
      - tool: calculate
      - tool: add_numbers
        limits:
          budgets: [{name: adds, per: agent_tool, max_calls: 1}]
agents:
  - {name: bot, profile: helper}
"""


def test_budgets_and_costs_from_config_stop_calls(gw: Gateway) -> None:
    apply_config(gw, load_text(CONFIG, "tk.yaml"), base_dir=HERE)
    runs = [gw.call_sync("calculate", "run", {"expression": "1+1"}, agent="bot")
            for _ in range(3)]
    assert [r.ok for r in runs] == [True, True, False]  # 0.3 > 0.25
    assert runs[2].reason == Reason.BUDGET_EXCEEDED
    assert runs[2].details["budget"] == "tenant-day"
    assert gw.call_sync("add_numbers", arguments={"a": 1, "b": 2}, agent="bot").ok
    again = gw.call_sync("add_numbers", arguments={"a": 1, "b": 3}, agent="bot")
    assert again.reason == Reason.BUDGET_EXCEEDED and again.details["budget"] == "adds"
