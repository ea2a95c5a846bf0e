"""Every list of the console pages (issue 11 item 6), in a real Chromium against a real
``toolkeeper serve``: with more than 20 entries the profiles list, a Tool Picker group, the
approvals inbox, an agent's unavailable tools and a tool's versions show 20 at a time with
Previous / Next (client-side: their API returns the list whole), and a box checked on one
page of the picker stays checked after turning pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage

MANY = 25
PROFILES = "\n".join(f"  - {{name: p{i:02d}, autonomy: 1}}" for i in range(MANY))
CONFIG = f"""\
version: 1
tools:
  - native: tests.api.exec_fixtures:Bank
profiles:
  - {{name: manual, autonomy: 0, scopes: [bank], activations: [{{tool: bank}}]}}
{PROFILES}
agents:
  - {{name: intern, profile: manual}}
"""


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin"), "agent": TokenSpec("agent", "intern")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-paging"), CONFIG, tokens) as srv:
        for i in range(MANY):
            body = {"name": f"probe{i:02d}", "implementation_type": "http", "side_effect": "pure",
                    "risk_default": "low", "input_schema": {"type": "object"},
                    "implementation_config": {"url": "https://example.com/x", "method": "GET"}}
            made = _rest(srv, "admin", "POST", "/tools", json=body)
            _rest(srv, "admin", "POST", f"/tools/{made['id']}/publish")
            if i == 0:  # probe00 gets MANY more versions
                for v in range(MANY):
                    _rest(srv, "admin", "POST", f"/tools/{made['id']}/version?new_version=9.0.{v}")
            paid = _rest(srv, "agent", "POST", "/tools/execute", json={
                "tool": "bank", "action": "pay", "arguments": {"invoice": f"inv-{i}", "amount": i}})
            assert paid["status"] == "approval_required", paid
        yield srv


def _rest(server: Server, who: str, method: str, path: str, **kw: Any) -> Any:
    resp = httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens[who]}"})
    assert resp.status_code < 400, resp.text
    return resp.json()


def _login(page: Page, server: Server) -> None:
    page.goto(server.url + "/ui/#approvals")
    page.get_by_label("token").fill(server.tokens["admin"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(f"{MANY} pending")


def _turn(page: Page, what: str, label: str) -> None:
    page.get_by_role("button", name=f"{label} page of {what}").click()


def test_the_approvals_inbox_pages(console_page: ConsolePage, many: Server) -> None:
    page = console_page.page
    _login(page, many)
    cards = page.locator("#approval-list article.approval")
    expect(cards).to_have_count(20)
    expect(page.locator('[data-pager="pending approvals"]')).to_contain_text("page 1 of 2")
    _turn(page, "pending approvals", "Next")
    expect(cards).to_have_count(MANY - 20)
    expect(page.locator('[data-pager="pending approvals"]')).to_contain_text("page 2 of 2")
    expect(page.get_by_role("button", name="Next page of pending approvals")).to_be_disabled()
    expect(page.get_by_role("button", name="Previous page of pending approvals")).to_be_focused()


def test_the_profiles_and_a_picker_group_page(console_page: ConsolePage, many: Server) -> None:
    page = console_page.page
    _login(page, many)
    page.get_by_role("button", name="Agents", exact=True).click()
    expect(page.locator("#status")).to_have_text(re.compile(rf"\d+ agents, {MANY + 1} profiles"))
    rows = page.locator("#profile-table tbody tr")
    expect(rows).to_have_count(20)
    _turn(page, "profiles", "Next")
    expect(rows).to_have_count(MANY + 1 - 20)
    page.locator('#profile-table tr[data-profile="p24"]').get_by_role("button", name="Edit").click()
    group = page.locator('#picker-groups fieldset[data-bucket="custom"]')
    boxes = group.get_by_role("checkbox")
    expect(boxes).to_have_count(20)
    probe = group.get_by_role("checkbox", name=re.compile("^ ?probe00 "))
    probe.check()
    _turn(page, "custom tools", "Next")
    expect(boxes).to_have_count(MANY + 1 - 20)  # the probes and bank
    expect(probe).to_have_count(0)
    expect(group.locator('[data-pager="custom tools"]')).to_contain_text("page 2 of 2")
    _turn(page, "custom tools", "Previous")
    expect(probe).to_be_checked()
    expect(page.locator("#picker-policies details")).to_have_count(1)
    expect(page.locator('#picker-policies details[data-tool="probe00"]')).to_have_count(1)


def test_the_unavailable_tier_pages(console_page: ConsolePage, many: Server) -> None:
    page = console_page.page
    _login(page, many)
    page.get_by_role("button", name="Access", exact=True).click()
    page.select_option("#tier-agent", "intern")
    expect(page.locator("#enabled-table tbody tr")).to_have_count(1)
    expect(page.locator('[data-pager="enabled tools"] button')).to_have_count(0)
    expect(page.locator("#tier-result")).to_contain_text(f"1 enabled, {MANY} unavailable")
    rows = page.locator("#unavailable-table tbody tr")
    expect(rows).to_have_count(20)
    _turn(page, "unavailable tools", "Next")
    expect(rows).to_have_count(MANY - 20)
    expect(page.locator('[data-pager="unavailable tools"]')).to_contain_text("page 2 of 2")


def test_a_tools_versions_page_in_the_drawer(console_page: ConsolePage, many: Server) -> None:
    page = console_page.page
    _login(page, many)
    page.get_by_role("button", name="Tools", exact=True).click()
    page.fill("#tool-search", "probe00")
    page.locator("#tools tbody tr[data-tool=probe00] button.link").click()
    rows = page.locator("#tool-drawer table.versions tbody tr")
    expect(rows).to_have_count(20)
    versions = MANY + 1  # the first publish and the bumps
    _turn(page, "versions", "Next")
    expect(rows).to_have_count(versions - 20)
    expect(page.locator('#tool-drawer [data-pager="versions"]')).to_contain_text("page 2 of 2")


def test_the_tool_picker_by_keyboard(console_page: ConsolePage, many: Server) -> None:
    """Space toggles a picker checkbox, Tab moves on to its Details, Enter turns the group's
    page and the keyboard stays on the pager (issue 11 item 6: keyboard usable)."""
    page = console_page.page
    _login(page, many)
    page.get_by_role("button", name="Agents", exact=True).click()
    page.locator('#profile-table tr[data-profile="p03"]').get_by_role("button", name="Edit").click()
    group = page.locator('#picker-groups fieldset[data-bucket="custom"]')
    probe = group.get_by_role("checkbox", name=re.compile("^ ?probe01 "))
    probe.focus()
    page.keyboard.press("Space")
    expect(probe).to_be_checked()
    expect(page.locator('#picker-policies details[data-tool="probe01"]')).to_have_count(1)
    page.keyboard.press("Space")
    expect(probe).not_to_be_checked()
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Details")
    group.get_by_role("button", name="Next page of custom tools").focus()
    page.keyboard.press("Enter")
    expect(group.locator('[data-pager="custom tools"]')).to_contain_text("page 2 of 2")
    expect(group.get_by_role("button", name="Previous page of custom tools")).to_be_focused()
