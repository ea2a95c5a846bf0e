"""The approvals inbox reaches every pending approval past the API's default page of 100
(issue 11 item 6, every list paginated), in a real Chromium against a real
``toolkeeper serve``: with 105 pending, the inbox counts 105 and its last page holds the
oldest ones — those expiring first, which the API's default newest-100 page left out."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage

PENDING = 105
CONFIG = """\
version: 1
tools:
  - native: tests.api.exec_fixtures:Bank
profiles:
  - {name: manual, autonomy: 0, scopes: [bank], activations: [{tool: bank}]}
agents:
  - {name: intern, profile: manual}
"""


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, list[str]]]:
    tokens = {"approver": TokenSpec("approver"), "agent": TokenSpec("agent", "intern")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-crowded"), CONFIG, tokens) as srv:
        ids = []
        with httpx.Client(base_url=srv.url, timeout=30, headers={
                "Authorization": f"Bearer {srv.tokens['agent']}"}) as http:
            for i in range(PENDING):
                body: dict[str, Any] = {"tool": "bank", "action": "pay", "arguments": {
                    "invoice": f"inv-{i:03d}", "amount": i}}
                asked = http.post("/tools/execute", json=body).json()
                assert asked["status"] == "approval_required", asked
                ids.append(asked["approval_id"])
        yield srv, ids


def test_every_pending_approval_is_reachable_past_a_hundred(
        console_page: ConsolePage, crowded: tuple[Server, list[str]]) -> None:
    server, ids = crowded
    page = console_page.page
    page.goto(server.url + "/ui/#approvals")
    page.get_by_label("token").fill(server.tokens["approver"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(f"{PENDING} pending")
    pager = page.locator('[data-pager="pending approvals"]')
    expect(pager).to_contain_text("page 1 of 6")
    for _ in range(5):
        pager.get_by_role("button", name="Next page of pending approvals").click()
    expect(pager).to_contain_text("page 6 of 6")
    cards = page.locator("#approval-list article.approval")
    expect(cards).to_have_count(PENDING - 100)
    expect(page.locator(f'article.approval[data-id="{ids[0]}"]')).to_contain_text("inv-000")
    assert console_page.console.errors == []
