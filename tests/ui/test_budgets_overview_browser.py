"""The Overview's budgets panel (docs/guides/budgets.md) in a real Chromium against a real
``toolkeeper serve``: an agent spends its daily call budget and is refused past it; the
panel draws each budget key's spend (its data attribute, bars and data table say the same),
with no console or CSP error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.test_overview_browser import _bars, _data, _execute, _open, _page, _table

CONFIG = """\
version: 1
tools:
  - native: tests.support.replica_tools:echo
profiles:
  - name: runner
    autonomy: 1
    activations: [{tool: echo}]
    limits:
      budgets: [{name: echo-day, per: agent, max_calls: 2, warn_at: 0.5}]
agents:
  - {name: echo-bot, profile: runner}
"""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin"), "echo-bot": TokenSpec("agent", "echo-bot")}
    work: Path = tmp_path_factory.mktemp("ui-budgets")
    with serving_toolkeeper(work, CONFIG, tokens) as srv:
        for n in range(2):
            assert _execute(srv, "echo-bot", "echo", {"n": n})["status"] == "succeeded"
        over = _execute(srv, "echo-bot", "echo", {"n": 3})
        assert (over["status"], over["reason"]) == ("denied", "budget_exceeded"), over
        assert over["details"]["resets_at"]
        yield srv


def test_the_budgets_panel_draws_each_budgets_spend(browser: Browser, spent: Server) -> None:
    page, console = _page(browser)
    _open(page, spent)
    rows = _data(page, "budgets", "budgets")
    assert [(r["budget"], r["subject"], r["calls"], r["state"]) for r in rows] == [
        ("echo-day", "echo-bot", 2, "exceeded")]
    assert _bars(page, "budgets") == [100.0]
    table = _table(page, "budgets")
    assert len(table) == 1
    assert table[0][:7] == ["echo-day (echo-bot)", "profile:runner", "day", "2 / 2", "0", "100%",
                            "exceeded"]
    assert console.errors == []
    page.context.close()
