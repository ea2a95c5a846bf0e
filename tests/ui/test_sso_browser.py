"""A person signs in to the console in Chromium through the real test IdP (single sign-on:
the console's "Sign in with single sign-on" link, the provider's own form), approves an
agent's pending call from the inbox, and the call then runs exactly once; the approval and
the audit name them by subject and issuer. Then they sign out, and their session is gone
server-side. The page keeps its strict CSP (no console errors)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.identity.sso_world import SsoWorld, sso_world
from tests.support.idp import Idp
from tests.ui.conftest import Console


@pytest.fixture(scope="module")
def world(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SsoWorld]:
    with sso_world(idp, tmp_path_factory.mktemp("sso-browser")) as w:
        yield w


def test_a_person_signs_in_approves_once_and_signs_out(browser: Browser,
                                                       world: SsoWorld) -> None:
    approval_id = world.pending("inv-browser")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    console = Console()
    page.on("console", console.on_console)
    page.on("pageerror", console.on_error)
    page.on("response", console.on_response)
    page.set_default_timeout(15_000)
    try:
        page.goto(world.url("/ui/"))
        expect(page.locator("#sso-login")).to_be_visible()
        assert console.errors == []
        page.get_by_role("link", name="Sign in with single sign-on").click()
        page.locator("input[name=login]").fill("dana")
        page.locator("input[name=password]").fill("any-password")
        page.locator("button[type=submit]").click()
        page.wait_for_url(world.url("/ui/") + "**")
        console.errors.clear()  # the provider's pages (its favicon 404s) are not the console
        expect(page.locator("#sso-name")).to_have_text("Dana Decider")
        expect(page.locator("#login")).to_be_hidden()
        page.locator("#tabs button[data-tab=approvals]").click()  # the Overview is the landing tab
        card = page.locator(f'article.approval[data-id="{approval_id}"]')
        card.get_by_role("button", name="Approve", exact=True).click()
        result = page.locator("#approval-result")
        expect(result).to_contain_text("approved — status approved, decided by Dana Decider (dana)")
        cookies = {c["name"]: c for c in context.cookies()}
        assert cookies["tk_session"]["httpOnly"] and cookies["tk_session"]["sameSite"] == "Lax"
        stolen = cookies["tk_session"]["value"]

        ran = world.pay("inv-browser", approval_id)
        assert ran["status"] == "succeeded", ran
        assert world.pay("inv-browser", approval_id)["status"] != "succeeded"
        assert world.payments("inv-browser") == 1
        shown = httpx.get(world.url(f"/approvals/{approval_id}"), timeout=10,
                          cookies={"tk_session": stolen}).json()
        assert (shown["decided_by"], shown["decided_by_subject"],
                shown["decided_by_issuer"]) == ("Dana Decider", "dana", world.idp.issuer)
        granted = [e for e in world.gw.store.audit.list("default", types=["approval.granted"],
                                                         limit=500)
                   if e.data.get("approval_id") == approval_id]
        assert [(e.data["by"], e.data["by_subject"]) for e in granted] == \
            [("Dana Decider", "dana")]

        assert console.errors == []  # CSP held: no violation, no failed request
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(world.idp.issuer + "/**")  # the provider's RP-initiated logout
        after = httpx.get(world.url("/approvals"), timeout=10, cookies={"tk_session": stolen})
        assert after.status_code == 401
        assert after.json()["error"]["reason"] == "session_expired"
    finally:
        context.close()


def test_a_session_that_ends_server_side_brings_back_the_sign_in_link(
        browser: Browser, world: SsoWorld) -> None:
    """The session row goes (as at idle or absolute expiry, or a sign-out in another tab):
    the console's next request (the approvals poll) gets 401 and the page offers sign-in
    again instead of a name whose session is gone."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        page.goto(world.url("/ui/"))
        page.get_by_role("link", name="Sign in with single sign-on").click()
        page.locator("input[name=login]").fill("dana")
        page.locator("input[name=password]").fill("any-password")
        page.locator("button[type=submit]").click()
        page.wait_for_url(world.url("/ui/") + "**")
        expect(page.locator("#sso-name")).to_have_text("Dana Decider")
        expect(page.locator("#sso-login")).to_be_hidden()
        page.locator("#tabs button[data-tab=approvals]").click()  # polls every 3 s
        value = {c["name"]: c["value"] for c in context.cookies()}["tk_session"]
        assert world.gw.store.sessions.delete(value)
        expect(page.locator("#sso-login")).to_be_visible()  # the poll's 401, within 3 s
        expect(page.locator("#sso-user")).to_be_hidden()
    finally:
        context.close()
