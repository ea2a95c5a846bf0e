"""Readable everywhere (issue 30 item 3), in a real Chromium against ``toolkeeper serve``:
times are relative with the exact local time on hover and in their text for a screen reader,
and move on by themselves; durations read in ms / s / min; a shortened id copies the whole id;
every call id in the inbox, the recent calls and the audit is a link to the call's page; every
empty list of an empty store says what to do next; dark mode follows the system setting."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.serve import Server, TokenSpec, serving_toolkeeper
from tests.ui.conftest import ConsolePage
from tests.ui.shown import short

EMPTY_CONFIG = "version: 1\n"
"""No tool, no profile, no agent: the store is empty apart from the admin's token."""


@pytest.fixture(scope="module")
def empty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving_toolkeeper(tmp_path_factory.mktemp("ui-readable-empty"), EMPTY_CONFIG,
                            {"admin": TokenSpec("admin")}) as srv:
        yield srv


def _login(page: Page, server: Server, role: str, tab: str) -> None:
    page.goto(server.url + "/ui/#" + tab)
    page.get_by_label("token").fill(server.tokens[role])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).not_to_have_text(re.compile("loading|error|^$"))


def _tab(page: Page, name: str) -> None:
    page.get_by_role("button", name=name, exact=True).click()
    expect(page.locator("#status")).not_to_have_text(re.compile("loading|error"))


def test_an_empty_store_says_in_every_list_what_to_do_next(console_page: ConsolePage,
                                                          empty: Server) -> None:
    page = console_page.page
    _login(page, empty, "admin", "approvals")
    inbox = page.locator("#approval-list .empty")
    expect(inbox).to_contain_text("Nothing is waiting for a decision")
    _tab(page, "Tools")
    tools = page.locator("#tools tbody .empty")
    expect(tools).to_contain_text("No tools yet. Add one with New tool")
    _tab(page, "Calls")
    expect(page.locator("#recent-table tbody .empty")).to_contain_text("No calls yet")
    expect(page.locator("#call-table tbody .empty")).to_contain_text("No recorded calls yet")
    _tab(page, "Audit")
    page.get_by_label("Call id").fill("no-such-call")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#audit-table tbody .empty")).to_contain_text("No audit event matches")
    health = page.locator("#health-table tbody .empty")
    expect(health).to_contain_text("No tool has been called yet")
    _tab(page, "Agents")
    agents = page.locator("#agent-table tbody .empty")
    expect(agents).to_contain_text("No agents yet. Add one below")
    profiles = page.locator("#profile-table tbody .empty")
    expect(profiles).to_contain_text("No profiles yet. Add one below")
    _tab(page, "Calls")  # the next step is one link away, and it opens that tab
    page.locator("#recent-table").get_by_role("link", name="Make an agent token").click()
    expect(page.locator("#access")).to_be_visible()
    expect(page.locator("#calls")).to_be_hidden()
    assert console_page.console.errors == []


def test_times_are_relative_exact_on_hover_and_move_on(browser: Browser, empty: Server) -> None:
    context = browser.new_context(locale="en-US", timezone_id="Europe/Paris")
    page = context.new_page()
    try:
        now = datetime(2026, 11, 26, 11, 13, 42, tzinfo=UTC)
        page.clock.install(time=now)
        page.goto(empty.url + "/ui/")
        iso = (now - timedelta(minutes=3)).isoformat()  # 2026-11-26T11:10:42+00:00
        page.evaluate("(iso) => { const t = fmtTime(iso); t.id = 'probe';"
                      " document.querySelector('main').appendChild(t); }", iso)
        probe = page.locator("#probe")
        expect(probe).to_have_attribute("datetime", iso)
        exact = "Nov 26, 2026, 12:10:42 PM"  # the browser's locale and time zone (Paris, UTC+1)
        expect(probe).to_have_attribute("title", exact)
        expect(probe).to_have_text(f"3 minutes ago ({exact})")  # the exact time is read out too
        expect(probe.locator(".rel")).to_be_visible()
        assert probe.locator(".sr-only").bounding_box() is None or \
            probe.locator(".sr-only").bounding_box()["width"] <= 1  # type: ignore[index]
        page.clock.run_for(60_000)  # no request: the text moves on by itself
        expect(probe.locator(".rel")).to_have_text("4 minutes ago")
        assert page.evaluate("fmtTime(null).textContent") == "—"
    finally:
        context.close()


def test_durations_read_in_ms_seconds_and_minutes(console_page: ConsolePage, empty: Server) -> None:
    page = console_page.page
    page.goto(empty.url + "/ui/")
    got = page.evaluate("[840, 2400, 59949, 185000, 3720000, null].map(fmtDuration)")
    assert got == ["840 ms", "2.4 s", "59.9 s", "3 min 5 s", "1 h 2 min", "—"]


def _execute(server: Server, arguments: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = httpx.post(
        server.url + "/tools/execute", json={"tool": "pay", "arguments": arguments}, timeout=30,
        headers={"Authorization": f"Bearer {server.tokens['agent']}"}).json()
    return body["error"]["details"] if "error" in body else body


def test_every_call_id_links_to_its_page_and_an_id_copies_whole(browser: Browser,
                                                                server: Server) -> None:
    asked = _execute(server, {"invoice": "inv-readable", "path": "/nonexistent/ledger"})
    assert asked["status"] == "approval_required", asked
    httpx.post(server.url + "/tools/execute", json={"tool": "no-such-tool", "arguments": {}},
               headers={"Authorization": f"Bearer {server.tokens['agent']}"}, timeout=30)
    call, approval = asked["call_id"], asked["approval_id"]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    page = context.new_page()
    try:
        _login(page, server, "admin", "approvals")
        card = page.locator(f'article.approval[data-id="{approval}"]')
        expect(card.get_by_role("link", name=short(call))).to_have_attribute(
            "href", "#call/" + call)  # the approval card links to the call that asked
        copy = card.get_by_role("button", name="copy id " + approval)
        expect(card.locator(".shortid code")).to_have_text(short(approval))
        copy.click()
        expect(page.locator("#copy-status")).to_have_text("copied " + approval)
        assert page.evaluate("navigator.clipboard.readText()") == approval
        _tab(page, "Calls")
        row = page.locator(f'#recent-table tr[data-call-id="{call}"]')
        expect(row.locator(f'a[href="#call/{call}"]')).to_have_text(short(call))
        expect(row.locator("td").nth(4)).to_have_text(re.compile(r"^(\d+(\.\d)? (ms|s)|—)$"))
        shown = page.locator("#recent-table tbody a.call-link").all_inner_texts()
        assert len(shown) >= 2 and len(set(shown)) == len(shown), shown  # ids read apart
        _tab(page, "Audit")
        page.get_by_label("Call id").fill(call)
        page.get_by_role("button", name="Search").click()
        others = page.locator(f'#audit-table tbody a.call-link:not([href="#call/{call}"])')
        expect(others).to_have_count(0)  # the search's answer has replaced the whole list
        expect(page.locator("#audit-table tbody a.call-link").first).to_have_attribute(
            "href", "#call/" + call)
    finally:
        context.close()
        httpx.post(f"{server.url}/approvals/{approval}/deny", json={"note": "readable"},
                   headers={"Authorization": f"Bearer {server.tokens['approver']}"}, timeout=30)


@pytest.mark.parametrize(("scheme", "background"), [("light", "rgb(246, 247, 249)"),
                                                    ("dark", "rgb(15, 19, 24)")])
def test_the_colours_follow_the_system_setting(browser: Browser, empty: Server, scheme: str,
                                               background: str) -> None:
    context = browser.new_context(color_scheme=scheme)  # type: ignore[arg-type]
    page = context.new_page()
    try:
        page.goto(empty.url + "/ui/")
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == background
        scheme_of = "getComputedStyle(document.documentElement).colorScheme"
        assert page.evaluate(scheme_of) == "light dark"
    finally:
        context.close()
