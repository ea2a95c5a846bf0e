"""The approvals inbox's live updates are bounded (issue 11 item 4), in a real Chromium
against a real ``toolkeeper serve``, on the page's fake clock: the inbox asks every 3 s while
it is shown, a new pending approval appears without a reload, asking stops 10 minutes after
the tab was shown and whenever another tab is shown, and showing the inbox again resumes."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from playwright.sync_api import Page, Request, expect

from tests.support.serve import Server
from tests.support.waiting import wait_until
from tests.ui.conftest import ConsolePage

QUIET_MS = 700
"""Real time given to a request the fake clock may have started, before counting."""


class Polls:
    """The inbox's requests (``GET /approvals?status=pending``) the page sent."""

    def __init__(self, page: Page) -> None:
        self.count = 0
        page.on("request", self.seen)

    def seen(self, request: Request) -> None:
        if "/approvals?status=pending" in request.url:
            self.count += 1


def _settled(page: Page, polls: Polls) -> int:
    page.wait_for_timeout(QUIET_MS)
    return polls.count


def test_the_inbox_polls_while_shown_and_stops_after_ten_minutes_or_another_tab(
        console_page: ConsolePage, server: Server, tmp_path: Path) -> None:
    page = console_page.page
    page.clock.install()
    polls = Polls(page)
    page.goto(server.url + "/ui/#approvals")
    page.get_by_label("token").fill(server.tokens["approver"])
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ pending"))
    start = _settled(page, polls)

    page.clock.run_for(9_500)  # three 3-second ticks
    wait_until(lambda: polls.count >= start + 3, timeout=10, what="three polls")
    body = {"tool": "pay", "arguments": {"invoice": "inv-poll", "path": str(tmp_path / "l")}}
    asked = httpx.post(server.url + "/tools/execute", json=body, timeout=30,
                       headers={"Authorization": f"Bearer {server.tokens['agent']}"}).json()
    assert asked["status"] == "approval_required", asked
    page.clock.run_for(3_000)
    expect(page.locator(f'article.approval[data-id="{asked["approval_id"]}"]')).to_be_visible()

    page.clock.fast_forward("10:00")  # past the 10 minutes: one last tick stops it
    stopped = _settled(page, polls)
    page.clock.run_for(60_000)
    assert _settled(page, polls) == stopped, "the inbox kept polling after 10 minutes"

    page.get_by_role("button", name="Tools", exact=True).click()  # shown again: resumes
    page.get_by_role("button", name="Approvals", exact=True).click()
    expect(page.locator("#status")).to_have_text(re.compile(r"\d+ pending"))
    resumed = _settled(page, polls)
    page.clock.run_for(6_500)
    wait_until(lambda: polls.count >= resumed + 2, timeout=10, what="polling resumed")

    page.get_by_role("button", name="Tools", exact=True).click()  # hidden: it stops
    expect(page.locator("#status")).to_have_text(re.compile(r"tools$"))
    page.clock.run_for(3_000)  # the tick that notices
    hidden = _settled(page, polls)
    page.clock.run_for(60_000)
    assert _settled(page, polls) == hidden, "the inbox polled while another tab was shown"
    httpx.post(f"{server.url}/approvals/{asked['approval_id']}/deny", json={"note": "polling"},
               headers={"Authorization": f"Bearer {server.tokens['approver']}"}, timeout=30)
    assert console_page.console.errors == []
