"""Agents, profiles and the Tool Picker in the admin console (issue 11 item 3), in a real
Chromium against a real ``toolkeeper serve``: an admin creates a profile, picks tools with
the picker's bucket filter and search, saves (the profile's activations become the
selection, checked over REST), sees the same selection after a reload, removes one, clears
all; creates an agent on the profile, rebinds it and edits its description; deleting an
in-use profile shows the API's reason; an approver sees the lists but no admin action."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage

PICK = """\
version: 1
tools:
  - builtin: calculate
  - builtin: datetime_utils
  - native: tests.support.replica_tools:pay
profiles:
  - {name: payer, autonomy: 0, activations: [{tool: pay}]}
agents:
  - {name: pay-bot, profile: payer}
"""


@pytest.fixture(scope="module")
def pick_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tokens = {"admin": TokenSpec("admin"), "approver": TokenSpec("approver")}
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-agents"), PICK, tokens) as srv:
        yield srv


def _rest(server: Server, method: str, path: str, **kw: Any) -> Any:
    resp = httpx.request(method, server.url + path, timeout=30, **kw,
                         headers={"Authorization": f"Bearer {server.tokens['admin']}"})
    assert resp.status_code < 400, resp.text
    return resp.json() if resp.content else None


def _open_agents(page: Page, server: Server, who: str) -> None:
    page.goto(server.url + "/ui/#approvals")
    page.get_by_label("token").fill(server.tokens[who])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ pending"))
    page.get_by_role("button", name="Agents", exact=True).click()
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ agents, \d+ profiles"))


def _picked(server: Server, profile: str) -> list[str]:
    return sorted(a["tool"] for a in _rest(server, "GET", f"/activations?profile={profile}"))


def _box(page: Page, tool: str) -> Any:
    return page.locator("#picker-groups").get_by_role("checkbox", name=re.compile(f"^ ?{tool} "))


def test_an_admin_builds_a_profile_with_the_tool_picker(
        console_page: ConsolePage, pick_server: Server) -> None:
    page = console_page.page
    _open_agents(page, pick_server, "admin")
    page.get_by_label("New profile").fill("helper")
    page.get_by_role("button", name="Create profile").click()
    expect(page.locator("#agents-result")).to_have_text("profile helper created")
    row = page.locator('#profile-table tr[data-profile="helper"]')
    row.get_by_role("button", name="Edit").click()
    page.get_by_label("Picker bucket").select_option("built_in")
    groups = page.locator("#picker-groups fieldset")
    expect(groups).to_have_count(1)
    expect(groups).to_have_attribute("data-bucket", "built_in")
    _box(page, "calculate").check()
    page.get_by_label("Picker search").fill("pay")
    expect(page.locator("#picker-groups")).to_contain_text("No tool matches.")
    page.get_by_label("Picker bucket").select_option("")
    expect(groups).to_have_count(1)
    _box(page, "pay").check()
    expect(page.locator("#picker-count")).to_have_text("2 selected: calculate, pay")
    page.get_by_label("Picker search").fill("")
    expect(groups).to_have_count(2)
    page.get_by_text("Policy and gates of pay").click()
    page.get_by_label("policy of pay").fill('{"oops": ')
    _box(page, "datetime_utils").check()  # the policy being edited survives a change
    _box(page, "datetime_utils").uncheck()
    expect(page.get_by_label("policy of pay")).to_have_value('{"oops": ')
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#agents-result")).to_have_text(
        "invalid JSON in policy of pay (nothing was saved)")
    assert _picked(pick_server, "helper") == []
    page.get_by_label("policy of pay").fill("{}")
    page.get_by_text("Policy and gates of calculate").click()
    expect(page.get_by_label("calculate policy max_exponent")).to_have_value("1000")
    page.get_by_label("calculate policy max_exponent").fill("50")
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#agents-result")).to_have_text("profile helper saved: 2 tools")
    assert _picked(pick_server, "helper") == ["calculate", "pay"]
    saved = {a["tool"]: a for a in _rest(pick_server, "GET", "/activations?profile=helper")}
    assert saved["calculate"]["policy"] == {"max_exponent": 50}
    assert saved["pay"]["policy"] == {}

    page.reload()
    page.get_by_role("button", name="Agents", exact=True).click()
    page.locator('#profile-table tr[data-profile="helper"]').get_by_role(
        "button", name="Edit").click()
    expect(page.locator("#picker-count")).to_have_text("2 selected: calculate, pay")
    expect(_box(page, "calculate")).to_be_checked()
    expect(_box(page, "datetime_utils")).not_to_be_checked()
    page.get_by_text("Policy and gates of calculate").click()
    expect(page.get_by_label("calculate policy max_exponent")).to_have_value("50")
    _box(page, "calculate").uncheck()
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#agents-result")).to_have_text("profile helper saved: 1 tools")
    assert _picked(pick_server, "helper") == ["pay"]
    page.get_by_role("button", name="Clear all").click()
    expect(page.locator("#picker-count")).to_have_text("Nothing selected.")
    expect(_box(page, "pay")).not_to_be_checked()
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#agents-result")).to_have_text("profile helper saved: 0 tools")
    assert _picked(pick_server, "helper") == []
    assert console_page.console.errors == []


def test_an_admin_creates_and_rebinds_an_agent_and_cannot_delete_a_profile_in_use(
        console_page: ConsolePage, pick_server: Server) -> None:
    _rest(pick_server, "POST", "/profiles", json={"name": "spare", "autonomy": 1})
    page = console_page.page
    _open_agents(page, pick_server, "admin")
    page.get_by_label("New name").fill("crm-bot")
    page.locator("#agent-new-profile").select_option("payer")
    page.get_by_role("button", name="Create agent").click()
    expect(page.locator("#agents-result")).to_have_text("agent crm-bot created")
    row = page.locator('#agent-table tr[data-agent="crm-bot"]')
    expect(row).to_contain_text("payer")
    row.get_by_label("profile for crm-bot").select_option("spare")
    row.get_by_label("description of crm-bot").fill("answers CRM questions")
    row.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#agents-result")).to_have_text("agent crm-bot saved: profile spare")
    expect(row.locator("td").nth(1)).to_have_text("spare")
    expect(row.get_by_label("description of crm-bot")).to_have_value("answers CRM questions")
    stored = _rest(pick_server, "GET", "/agents/crm-bot")
    assert (stored["profile"], stored["description"]) == ("spare", "answers CRM questions")

    page.locator('#profile-table tr[data-profile="spare"]').get_by_role(
        "button", name="Delete").click()
    expect(page.locator("#agents-result")).to_have_text(
        re.compile(r"^409 conflict: profile 'spare' is used by agents"))
    expect(page.locator("#agents-result")).to_have_class("error")
    assert _rest(pick_server, "GET", "/profiles/spare")["name"] == "spare"
    assert [e for e in console_page.console.errors if "/profiles/spare" not in e
            and "409" not in e] == []

    row.get_by_role("button", name="Delete").click()
    expect(page.locator("#agents-result")).to_have_text("agent crm-bot deleted")
    expect(row).to_have_count(0)
    page.locator('#profile-table tr[data-profile="spare"]').get_by_role(
        "button", name="Delete").click()
    expect(page.locator("#agents-result")).to_have_text("profile spare deleted")
    expect(page.locator('#profile-table tr[data-profile="spare"]')).to_have_count(0)


def test_a_save_the_api_refuses_saves_nothing_and_shows_the_reason(
        console_page: ConsolePage, pick_server: Server) -> None:
    _rest(pick_server, "POST", "/profiles", json={"name": "picky", "autonomy": 1,
                                                   "activations": [{"tool": "pay"}]})
    page = console_page.page
    _open_agents(page, pick_server, "admin")
    page.locator('#profile-table tr[data-profile="picky"]').get_by_role(
        "button", name="Edit").click()
    _box(page, "calculate").check()
    page.get_by_text("Policy and gates of pay").click()
    page.get_by_label("gates of pay").fill('{"run": "sometimes"}')
    page.get_by_role("button", name="Save profile").click()
    expect(page.locator("#agents-result")).to_have_text(
        re.compile(r"^422 \w+: .*\(nothing was saved\)$"))
    assert _picked(pick_server, "picky") == ["pay"]


def test_an_approver_sees_agents_and_profiles_but_no_admin_action(
        console_page: ConsolePage, pick_server: Server) -> None:
    page = console_page.page
    _open_agents(page, pick_server, "approver")
    expect(page.locator('#agent-table tr[data-agent="pay-bot"]')).to_contain_text("payer")
    expect(page.locator('#profile-table tr[data-profile="payer"]')).to_contain_text("pay")
    section = page.locator("#agents")
    for name in ("Create agent", "Create profile", "Save", "Delete", "Edit", "Save profile"):
        expect(section.get_by_role("button", name=name)).to_have_count(0)
    expect(page.get_by_label("New name")).to_be_hidden()


def test_agents_are_listed_twenty_per_page_and_a_tool_opens_in_the_drawer(
        console_page: ConsolePage, pick_server: Server) -> None:
    for i in range(21):
        _rest(pick_server, "POST", "/agents", json={"name": f"many-{i:02d}", "profile": "payer"})
    page = console_page.page
    _open_agents(page, pick_server, "admin")
    rows = page.locator("#agent-table tbody tr")
    expect(rows).to_have_count(20)
    expect(page.locator("#agent-page")).to_have_text(re.compile(r"^page 1 of 2$"))
    page.get_by_role("button", name="Next").and_(page.locator("#agent-next")).click()
    expect(page.locator("#agent-page")).to_have_text("page 2 of 2")
    total = len(_rest(pick_server, "GET", "/agents"))
    expect(rows).to_have_count(total - 20)
    expect(page.locator("#agent-next")).to_be_disabled()

    page.locator('#profile-table tr[data-profile="payer"]').get_by_role(
        "button", name="Edit").click()
    page.get_by_role("button", name="Details of calculate").click()
    expect(page.locator("#tool-drawer")).to_be_visible()
    expect(page.locator("#drawer-title")).to_have_text("calculate")
    page.keyboard.press("Escape")
    expect(page.locator("#tool-drawer")).to_be_hidden()
    for i in range(21):
        _rest(pick_server, "DELETE", f"/agents/many-{i:02d}")
