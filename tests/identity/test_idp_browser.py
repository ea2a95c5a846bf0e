"""A person signs in at the test IdP in Chromium (Playwright): the page the SSO tests drive
works in a real browser and loads nothing from outside."""

from __future__ import annotations

import secrets
import shutil
import urllib.parse
from collections.abc import Iterator

import pytest

from tests.support.idp import Idp, pkce_pair
from tests.support.required import missing

CALLBACK = "http://127.0.0.1/callback"


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        missing("NO CHROMIUM: the IdP browser test needs Debian's `chromium`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def test_a_person_signs_in_with_the_form_in_chromium(chromium: object, idp: Idp) -> None:
    from playwright.sync_api import Browser, Route

    assert isinstance(chromium, Browser)
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(8)
    url = idp.authorize_url("console", CALLBACK, code_challenge=challenge, state=state,
                            nonce="n-1", scope="openid profile")
    context = chromium.new_context()
    outside: list[str] = []
    try:
        page = context.new_page()
        page.set_default_timeout(10_000)

        def callback(route: Route) -> None:
            route.fulfill(status=200, content_type="text/plain", body="back at the client")

        def elsewhere(route: Route) -> None:
            outside.append(route.request.url)
            route.abort()

        page.route(f"{CALLBACK}?**", callback)
        page.route(lambda u: not u.startswith(idp.issuer + "/") and not u.startswith(CALLBACK),
                   elsewhere)
        page.goto(url)
        page.fill("input[name=login]", "alice")
        page.fill("input[name=password]", "anything")
        page.click("button[type=submit]")
        page.wait_for_url(f"{CALLBACK}?**")
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))
    finally:
        context.close()
    assert outside == []
    assert query["state"] == state
    assert query["iss"] == idp.issuer  # RFC 9207
    tokens = idp.token("console", {"grant_type": "authorization_code", "code": query["code"],
                                   "redirect_uri": CALLBACK, "code_verifier": verifier})
    assert tokens["id_token"]
