"""Unknown outcomes come first in the Calls view even when more than the newest 1000
recorded calls came after them (issue 11 item 5), in a real Chromium against a real
``toolkeeper serve``: one call whose outcome is unknown, then 1,001 that succeeded; the
unknown one heads the list with its Resolve button."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage
from toolkeeper import Gateway

LATER = 1001
CONFIG = """\
version: 1
tools:
  - native: tests.api.exec_fixtures:lost
  - native: tests.api.exec_fixtures:charge
profiles:
  - {name: auto, autonomy: 3, activations: [{tool: lost}, {tool: charge}]}
agents:
  - {name: busy-bot, profile: auto}
"""


def _seed(work: Path) -> str:
    """The unknown call, then LATER that succeed, in-process (no event loop in this thread);
    the unknown call's id."""
    with Gateway.open(f"sqlite:///{work}/tk.db", config=work / "toolkeeper.yaml") as gw:
        lost = gw.call_sync("lost", arguments={"x": 1}, agent="busy-bot")
        assert lost.status.value == "unknown", lost.to_dict()
        for i in range(LATER):
            done = gw.call_sync("charge", arguments={"invoice": f"inv-{i}", "amount": i},
                                agent="busy-bot")
            assert done.status.value == "succeeded", done.to_dict()
        return lost.call_id


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    work: Path = tmp_path_factory.mktemp("ui-busy")
    (work / "toolkeeper.yaml").write_text(CONFIG)
    with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        unknown = pool.submit(_seed, work).result(timeout=600)
    tokens = {"admin": TokenSpec("admin")}
    with serving_toolkeeper(work, CONFIG, tokens) as srv:
        yield srv, unknown


def test_an_unknown_outcome_older_than_the_newest_thousand_comes_first(
        console_page: ConsolePage, busy: tuple[Server, str]) -> None:
    server, unknown = busy
    page = console_page.page
    page.goto(server.url + "/ui/#calls")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"^\d+ calls$"))
    first = page.locator("#call-table tbody tr").first
    expect(first).to_have_attribute("data-call-id", unknown)
    expect(first).to_contain_text("unknown")
    expect(first.get_by_role("button", name="Resolve…")).to_be_visible()
    expect(page.locator("#status")).to_have_text("1001 calls")  # the newest 1000 and it
    assert console_page.console.errors == []
